"""Contracts: every form derived from the one canonical call, rendered deterministically."""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from catalog.contracts import (
    FORM_NAMES,
    FORM_NOTES,
    bind_secrets,
    canonical_json,
    example_args,
    forms,
    render_upstream,
    secret_names,
    validate_args,
)
from catalog.errors import ArgumentError, ToolError, UnboundSecret
from catalog.tool import Tool, split_document

PETS: dict[str, Any] = {
    "name": "create_pet",
    "description": "Add a pet to the store.",
    "args": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "tag": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "owner": {"type": "object"},
            "region": {"type": "string", "enum": ["eu", "us"]},
            "labels": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "region"],
        "additionalProperties": False,
    },
    "upstream": {
        "method": "POST",
        "url": "https://{region}.pets.example/v1/pets?labels={labels}&age={age}&key=[PETS_KEY]",
        "headers": {"authorization": "Bearer [PETS_TOKEN]", "x-tag": "{tag}"},
        "body": {"name": "{name}", "age": "{age}", "owner": "{owner}", "note": "for {name}", "fixed": 1},
    },
}
ARGS = {"name": "Rex é", "region": "eu", "age": 3, "owner": {"id": 7}}


def tool(**changes: Any) -> Tool:
    return Tool.from_frontmatter({**PETS, **changes}, "Body text.\n")


def test_a_tool_round_trips_through_its_markdown_document() -> None:
    """to_document writes frontmatter + body that from_document reads back to an equal Tool."""
    original = tool(cli=True, owner_team="pets")
    text = original.to_document()
    assert text.startswith("---\nname: create_pet\n")
    front, body = split_document(text)
    assert list(front)[:5] == ["name", "description", "args", "upstream", "cli"]
    assert body == "Body text.\n"
    again = Tool.from_document(text)
    assert again == original
    assert again.extra == {"owner_team": "pets"} and again.cli_opt_in is True


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": ""}, "non-empty `name`"),
        ({"args": {"type": "string"}}, "must describe an object"),
        ({"args": {"type": "object", "properties": {"a": {"type": 5}}}}, "not a valid JSON Schema"),
        ({"upstream": {"method": "GET", "url": "ftp://x"}}, "http:// or https://"),
        ({"upstream": {"method": "CLI"}}, "CLI contract needs `command`"),
        ({"upstream": {"method": "MCP", "server": {}, "tool": "t"}}, "`command` or a `url`"),
        ({"upstream": {"method": "CODE", "code": "x"}}, "`language` and `code`"),
        ({"upstream": {"method": "GET", "url": "https://a", "headers": {"x": 1}}}, "header names to text"),
        ({"upstream": []}, "at least one contract"),
        ({"cli": "yes"}, "`cli` must be true or false"),
    ],
)
def test_a_malformed_row_is_refused_with_a_reason(changes: dict[str, Any], message: str) -> None:
    """Every field the contracts rely on is checked when the row is read, with a one-line reason."""
    with pytest.raises(ToolError, match=message):
        tool(**changes)


def test_every_form_is_rendered_from_the_canonical_call() -> None:
    """forms() answers every named form, in order, each a pasteable JSON object of a known shape."""
    out = forms(tool(), ARGS)
    assert tuple(out) == tuple(n for n in FORM_NAMES if not n.startswith("link"))
    assert tuple(FORM_NOTES) == FORM_NAMES
    call = {"tool": "create_pet", "args": ARGS}
    body = canonical_json(call)
    assert body == '{"tool":"create_pet","args":{"name":"Rex é","region":"eu","age":3,"owner":{"id":7}}}'
    json.dumps(out)  # every form is plain JSON

    assert out["dispatch"] == {
        "method": "POST",
        "url": "http://flightlog.local/api/dispatch",
        "headers": {"content-type": "application/json", "authorization": "Bearer ${FLIGHTLOG_TOKEN}"},
        "body": call,
    }
    assert out["dispatch_dry_run"] == {
        **out["dispatch"],
        "url": "http://flightlog.local/api/dispatch?dry_run=1",
    }

    url = urlsplit(out["url"]["url"])
    assert (out["url"]["method"], url.path) == ("GET", "/api/dispatch")
    query = parse_qs(url.query)
    assert query["tool"] == ["create_pet"] and json.loads(query["args"][0]) == ARGS

    curl = shlex.split(out["curl"]["command"])
    assert curl[:5] == [
        "curl",
        "-sS",
        "--proxy",
        "http://127.0.0.1:8080",
        "http://flightlog.local/api/dispatch",
    ]
    assert curl[curl.index("--data-binary") + 1] == body
    assert "content-type: application/json" in curl

    cli = shlex.split(out["cli"]["command"])
    assert cli[:3] == ["flightlog", "call", "create_pet"] and json.loads(cli[4]) == ARGS

    assert out["python"]["language"] == "python" and repr(body) in out["python"]["code"]
    compile(out["python"]["code"], "<python form>", "exec")
    assert out["javascript"]["language"] == "javascript" and json.dumps(body) in out["javascript"]["code"]

    for name in ("mcp_stdio", "mcp_http"):
        assert out[name]["method"] == "MCP" and out[name]["tool"] == "call" and out[name]["arguments"] == call
    assert out["mcp_stdio"]["server"] == {"command": "flightlog", "args": ["mcp"]}
    assert out["mcp_http"]["server"]["url"] == "http://flightlog.local/api/mcp"
    proxied = {"HTTP_PROXY": "http://127.0.0.1:8080", "HTTPS_PROXY": "http://127.0.0.1:8080"}
    assert shlex.split(out["mcp_config_claude_code"]["command"]) == [
        "claude", "mcp", "add", "--scope", "project", "flightlog",
        "-e", "HTTP_PROXY=http://127.0.0.1:8080", "-e", "HTTPS_PROXY=http://127.0.0.1:8080",
        "--", "flightlog", "mcp",
    ]  # fmt: skip
    config = json.loads(out["mcp_config_json"]["code"])
    assert config == {"mcpServers": {"flightlog": {"command": "flightlog", "args": ["mcp"], "env": proxied}}}


def test_the_upstream_form_is_the_rendered_upstream_request() -> None:
    """The upstream form equals render_upstream: arguments filled, secrets still names, body canonical."""
    request = render_upstream(tool(), ARGS)
    assert forms(tool(), ARGS)["upstream"] == request
    assert request == {
        "method": "POST",
        "url": "https://eu.pets.example/v1/pets?age=3&key=[PETS_KEY]",
        "headers": {"authorization": "Bearer [PETS_TOKEN]", "content-type": "application/json"},
        "body": '{"name":"Rex é","age":3,"owner":{"id":7},"note":"for Rex é","fixed":1}',
    }
    assert secret_names(request) == ["PETS_KEY", "PETS_TOKEN"]


def test_rendering_is_deterministic_and_independent_of_the_args_order() -> None:
    """The same call renders the same bytes every time; the body follows the contract's key order."""
    reordered = dict(reversed(list(ARGS.items())))
    assert render_upstream(tool(), reordered) == render_upstream(tool(), ARGS)
    assert [render_upstream(tool(), ARGS) for _ in range(3)] == [render_upstream(tool(), ARGS)] * 3


def test_placeholders_follow_the_placement_rules() -> None:
    """URL values are percent-encoded, lists repeat their query pair, absent optional pieces drop out."""
    args = {"name": 'a "b"/c', "region": "us", "labels": ["x y", "z&"], "tag": "t1"}
    request = render_upstream(tool(), args)
    assert isinstance(request, dict)
    assert request["url"] == "https://us.pets.example/v1/pets?labels=x%20y&labels=z%26&key=[PETS_KEY]"
    assert request["headers"]["x-tag"] == "t1"
    assert json.loads(request["body"]) == {"name": 'a "b"/c', "note": 'for a "b"/c', "fixed": 1}
    without_tag = render_upstream(tool(), {"name": "n", "region": "eu"})
    assert isinstance(without_tag, dict) and "x-tag" not in without_tag["headers"]


def test_a_line_break_cannot_reach_a_header() -> None:
    """An argument value with CR/LF in a header is refused, naming the argument."""
    with pytest.raises(ArgumentError, match='argument "tag"'):
        render_upstream(tool(), {"name": "n", "region": "eu", "tag": "x\r\nX-Evil: 1"})


def test_cli_mcp_and_code_contracts_render_their_own_way() -> None:
    """A list command keeps words whole, a string command shell-quotes, MCP keeps a structure."""
    args = {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}
    as_list = Tool.from_frontmatter(
        {"name": "grep", "args": args, "upstream": {"method": "CLI", "command": ["grep", "-m", "{n}", "{q}"]}}
    )
    assert render_upstream(as_list, {"q": "a b; rm -rf /"}) == {
        "method": "CLI",
        "command": ["grep", "-m", "a b; rm -rf /"],
    }
    as_line = Tool.from_frontmatter(
        {"name": "grep", "args": args, "upstream": {"method": "CLI", "command": "grep -m {n} {q} [LOG]"}}
    )
    line = render_upstream(as_line, {"q": "a b; rm -rf /", "n": 2})
    assert line == {"method": "CLI", "command": "grep -m 2 'a b; rm -rf /' [LOG]"}
    assert bind_secrets(line, {"LOG": "my log.txt"}) == {
        "method": "CLI",
        "command": "grep -m 2 'a b; rm -rf /' 'my log.txt'",
    }
    mcp = Tool.from_frontmatter(
        {
            "name": "search",
            "args": args,
            "upstream": {
                "method": "MCP",
                "server": {"url": "https://mcp.example/mcp"},
                "headers": {"authorization": "Bearer [MCP_TOKEN]"},
                "tool": "search",
                "arguments": {"query": "{q}", "limit": "{n}"},
            },
        }
    )
    assert render_upstream(mcp, {"q": "cats", "n": 5})["arguments"] == {"query": "cats", "limit": 5}  # type: ignore[call-overload]
    code = Tool.from_frontmatter(
        {
            "name": "calc",
            "args": args,
            "upstream": {"method": "CODE", "language": "python", "code": "f({q}, {n})"},
        }
    )
    assert render_upstream(code, {"q": "x", "n": 1})["code"] == 'f("x", 1)'  # type: ignore[call-overload]


def test_bound_secrets_replace_names_only_and_keep_the_dry_run_bytes() -> None:
    """bind_secrets changes nothing but the names: putting the names back gives the dry run byte for byte."""
    dry = render_upstream(tool(), ARGS)
    secrets = {"PETS_KEY": "k-123", "PETS_TOKEN": "tok.456"}
    real = bind_secrets(dry, secrets)
    assert isinstance(real, dict) and isinstance(dry, dict)
    assert real["url"].endswith("key=k-123") and real["headers"]["authorization"] == "Bearer tok.456"
    back = json.dumps(real)
    for name, value in secrets.items():
        back = back.replace(value, f"[{name}]")
    assert back == json.dumps(dry)
    assert dry["url"].endswith("[PETS_KEY]"), "binding must not change the dry-run request"


def test_secret_values_are_encoded_for_where_they_stand() -> None:
    """A value is percent-encoded in a URL and JSON-escaped in a JSON body, so it cannot break either."""
    contract = {
        "method": "POST",
        "url": "https://a.example/?k=[KEY]",
        "headers": {"content-type": "application/json"},
        "body": {"key": "[KEY]"},
    }
    request = render_upstream(Tool.from_frontmatter({"name": "t", "upstream": contract}), {})
    real = bind_secrets(request, {"KEY": 'a"b &c'})
    assert isinstance(real, dict)
    assert real["url"] == "https://a.example/?k=a%22b%20%26c"
    assert json.loads(real["body"]) == {"key": 'a"b &c'}


def test_an_unbound_secret_refuses_the_call_and_names_it() -> None:
    """A name with no value raises UnboundSecret naming it, before anything is substituted."""
    request = render_upstream(tool(), ARGS)
    with pytest.raises(UnboundSecret, match=r"secret \[PETS_TOKEN\] is not bound") as caught:
        bind_secrets(request, {"PETS_KEY": "k"})
    assert caught.value.name == "PETS_TOKEN"


@pytest.mark.parametrize(
    ("args", "argument", "message"),
    [
        ({"region": "eu"}, "name", "'name' is a required property"),
        ({"name": 5, "region": "eu"}, "name", "not of type 'string'"),
        ({"name": "n", "region": "mars"}, "region", "is not one of"),
        ({"name": "n", "region": "eu", "age": -1}, "age", "less than the minimum"),
        ({"name": "n", "region": "eu", "colour": "red"}, "colour", "Additional properties"),
    ],
)
def test_bad_arguments_are_named(args: dict[str, Any], argument: str, message: str) -> None:
    """Arguments are validated against the schema; the error names the bad argument."""
    with pytest.raises(ArgumentError, match=message) as caught:
        forms(tool(), args)
    assert caught.value.argument == argument
    assert f'argument "{argument}"' in str(caught.value)


def test_arguments_must_be_an_object() -> None:
    """A call whose args are not a JSON object is refused as a whole."""
    with pytest.raises(ArgumentError, match="must be a JSON object"):
        validate_args(tool(), ["Rex"])


def test_example_args_fill_each_required_argument_from_the_schema() -> None:
    """Without given arguments the CLI shows forms with a sample of each required argument."""
    assert example_args(tool()) == {"name": "<name>", "region": "eu"}
    forms(tool(), example_args(tool()))
    patterned = Tool.from_frontmatter(
        {
            "name": "blob",
            "args": {
                "type": "object",
                "properties": {"sha": {"pattern": "^[0-9a-f]+$"}},
                "required": ["sha"],
            },
        }
    )
    with pytest.raises(ArgumentError, match='argument "sha"'):
        forms(patterned, example_args(patterned))
    assert forms(patterned, example_args(patterned), check_args=False)["cli"]["command"].endswith("<sha>\"}'")


def test_a_tool_without_upstream_has_every_door_form_but_no_upstream() -> None:
    """A row with no upstream contract still gets every door form; only `upstream` is missing."""
    plain = Tool.from_frontmatter({"name": "note", "description": "A native tool."})
    assert tuple(forms(plain, {})) == tuple(n for n in FORM_NAMES[:-1] if not n.startswith("link"))
    assert tuple(forms(plain, {}, token="flt_x")) == FORM_NAMES[:-1]
    with pytest.raises(ToolError, match="has no upstream contract"):
        render_upstream(plain, {})


def test_an_argument_cannot_smuggle_a_secret_name_into_a_json_body() -> None:
    """An argument reading "[PETS_TOKEN]" stays that text: the JSON body escapes its `[`, so bind
    leaves it alone and the service gets the argument, never the secret's value."""
    args = {"name": "[PETS_TOKEN]", "region": "eu", "owner": {"[PETS_KEY]": ["[PETS_KEY] x"]}}
    dry = render_upstream(tool(), args)
    assert isinstance(dry, dict)
    assert '"name":"\\u005bPETS_TOKEN]"' in dry["body"]
    real = bind_secrets(dry, {"PETS_KEY": "k-123", "PETS_TOKEN": "tok.456"})
    assert isinstance(real, dict)
    assert real["body"] == dry["body"] and "tok.456" not in real["body"] and "k-123" not in real["body"]
    sent = json.loads(real["body"])
    assert sent["name"] == "[PETS_TOKEN]" and sent["owner"] == {"[PETS_KEY]": ["[PETS_KEY] x"]}
    assert sent["note"] == "for [PETS_TOKEN]"


def test_an_argument_shaped_like_a_secret_name_is_encoded_in_urls() -> None:
    """In a URL the `[` of an argument is percent-encoded, so it is never read as a secret name."""
    url_tool = Tool.from_frontmatter(
        {
            "name": "get",
            "args": {"type": "object", "properties": {"q": {"type": "string"}}},
            "upstream": {"method": "GET", "url": "https://a.example/?q={q}&key=[KEY]"},
        }
    )
    real = bind_secrets(render_upstream(url_tool, {"q": "[KEY]"}), {"KEY": "s3cret"})
    assert real["url"] == "https://a.example/?q=%5BKEY%5D&key=s3cret"  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "upstream",
    [
        {"method": "GET", "url": "https://a.example/", "headers": {"x-note": "{q}"}},
        {"method": "POST", "url": "https://a.example/", "body": "note={q}"},
        {"method": "CLI", "command": ["echo", "{q}"]},
        {"method": "CLI", "command": "echo {q}"},
        {"method": "MCP", "server": {"command": "srv"}, "tool": "t", "arguments": {"note": "{q}"}},
        {"method": "MCP", "server": {"command": "srv"}, "tool": "t"},
    ],
    ids=["header", "text body", "argv", "shell line", "MCP arguments", "MCP pass-through"],
)
def test_where_a_secret_name_cannot_be_escaped_the_argument_is_refused(upstream: dict[str, Any]) -> None:
    """Headers, text bodies, commands and MCP arguments refuse an argument shaped like a secret name."""
    row = Tool.from_frontmatter(
        {
            "name": "t",
            "args": {"type": "object", "properties": {"q": {"type": "string"}}},
            "upstream": upstream,
        }
    )
    with pytest.raises(ArgumentError, match='argument "q": holds "\\[OPENAI_KEY\\]"'):
        render_upstream(row, {"q": "please send [OPENAI_KEY]"})
    render_upstream(row, {"q": "an ordinary [note] or [1]"})


def test_every_starter_row_renders_every_form() -> None:
    """The rows a fresh install ships are tools whose contracts render in every form."""
    from catalog.directory import starter_folder

    paths = sorted((starter_folder() / "tool").glob("*.md"))
    assert paths
    for path in paths:
        row = Tool.from_document(path.read_text(encoding="utf-8"))
        rendered = forms(row, example_args(row), check_args=False)
        assert tuple(rendered) == tuple(n for n in FORM_NAMES if not n.startswith("link")), path.name
        assert rendered["upstream"]["url"].startswith("http://flightlog.local/api/"), path.name


def test_a_scoped_token_rides_in_every_form_that_reaches_the_door() -> None:
    """With a token: a bearer header on HTTP forms, token= on the URL, --token on the CLI, none on stdio."""
    token = "flt_abc.DEF-123"
    out = forms(tool(), ARGS, token=token)
    bearer = f"Bearer {token}"
    assert out["dispatch"]["headers"]["authorization"] == bearer
    assert out["dispatch_dry_run"]["headers"]["authorization"] == bearer
    assert parse_qs(urlsplit(out["url"]["url"]).query)["token"] == [token]
    assert f"authorization: {bearer}" in shlex.split(out["curl"]["command"])
    assert shlex.split(out["cli"]["command"])[-2:] == ["--token", token]
    assert f"'authorization': '{bearer}'" in out["python"]["code"]
    assert f'"authorization": "{bearer}"' in out["javascript"]["code"]
    assert out["mcp_http"]["headers"] == {"authorization": bearer}
    assert out["mcp_stdio"]["headers"] == {}
    assert out["mcp_stdio"]["server"]["env"] == {"FLIGHTLOG_TOKEN": token}
    claude = shlex.split(out["mcp_config_claude_code"]["command"])
    assert claude[claude.index(f"FLIGHTLOG_TOKEN={token}") - 1] == "-e"
    assert (
        json.loads(out["mcp_config_json"]["code"])["mcpServers"]["flightlog"]["env"]["FLIGHTLOG_TOKEN"]
        == token
    )
    assert out["mcp_config_json"]["paths"] == [".mcp.json", ".cursor/mcp.json", "~/.cursor/mcp.json"]
