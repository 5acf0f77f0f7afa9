"""Seed 000's form counts (26 always, 29 with a token, 30 with an upstream too), and the parts of the
forms added for it that can be checked without a proxy: the GraphQL operation's reading, the SSH
line's quoting, the Shortcut's request. `tests/dispatch/test_live_forms.py` runs them all."""

from __future__ import annotations

import json
import shlex
import subprocess
from typing import Any

import pytest

from catalog.contracts import ALWAYS_FORMS, FORM_NAMES, TOKEN_FORMS, canonical_json, counted, forms
from catalog.graphql_call import OPERATION, GraphQLRefused, read_call, request_body
from catalog.tool import Tool

ARGS = {"city": "Zürich & 'Bern'", "days": 2}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}


def row(upstream: Any = None) -> Tool:
    front: dict[str, Any] = {"name": "weather", "description": "Weather.", "args": SCHEMA}
    return Tool.from_frontmatter(front | ({"upstream": upstream} if upstream else {}))


UPSTREAM = {"method": "GET", "url": "https://api.example/v1?q={city}"}
STDIO_MCP = {"method": "MCP", "server": {"command": "npx", "args": ["srv"]}, "tool": "weather"}


@pytest.mark.parametrize(
    ("upstream", "token", "count"),
    [
        (None, None, 26),
        (None, "flt_t", 29),
        (UPSTREAM, None, 27),
        (UPSTREAM, "flt_t", 30),
        (STDIO_MCP, "flt_t", 30),
    ],
)
def test_the_seed_counts(upstream: Any, token: str | None, count: int) -> None:
    """26 forms for every tool, the 3 links with a token, upstream with an upstream contract; a stdio
    MCP server's three configurations behind mcp-record are its own, not forms of the call."""
    rendered = forms(row(upstream), ARGS, token=token)
    assert counted(rendered) == count
    expected = [*ALWAYS_FORMS, *(TOKEN_FORMS if token else ()), *(["upstream"] if upstream else [])]
    assert [n for n in rendered if n in FORM_NAMES] == expected
    assert len(rendered) - count == (3 if upstream is STDIO_MCP else 0)


@pytest.mark.parametrize(
    "document",
    [
        OPERATION,
        "mutation($tool: String!, $args: JSON) { call(tool: $tool, args: $args) }",
        "mutation Other ($tool:String!,$args:JSON){call(tool:$tool,args:$args)}",
        "# a comment\nmutation Call(\n  $tool: String!\n  $args: JSON\n) {\n"
        "  call(tool: $tool, args: $args)\n}\n",
    ],
)
def test_the_one_operation_is_read_however_it_is_spaced_or_named(document: str) -> None:
    """GraphQL's lexical rules: whitespace, commas and comments do not matter, nor the operation's name."""
    call = read_call({"query": document, "variables": {"tool": "weather", "args": ARGS}})
    assert call == {"tool": "weather", "args": ARGS}


@pytest.mark.parametrize(
    ("request_", "says"),
    [
        ({"query": "{ __schema { types { name } } }"}, "serves one GraphQL operation"),
        ({"query": "query($tool: String!, $args: JSON) { call(tool: $tool, args: $args) }"}, "one GraphQL"),
        ({"query": OPERATION + " mutation B { x }"}, "one GraphQL"),
        ({"query": OPERATION.replace("$args: JSON", '$args: JSON = "{}"')}, "one GraphQL"),
        ({"query": OPERATION, "variables": {"args": {}}}, "the variables are the canonical call"),
        ({"query": OPERATION, "variables": {"tool": "t", "extra": 1}}, "unknown variable $extra"),
        (["not", "an", "object"], "a JSON object"),
    ],
)
def test_any_other_graphql_is_refused_by_name(request_: Any, says: str) -> None:
    """Anything but the one operation with the call as its variables is refused, saying what is served."""
    with pytest.raises(GraphQLRefused, match=says.replace("$", r"\$")):
        read_call(request_)


def test_the_graphql_form_posts_the_operation_with_the_call_as_variables() -> None:
    """The form's body reads back to the canonical call it was made from."""
    form = forms(row(), ARGS)["graphql"]
    assert form["url"] == "http://flightlog.local/api/graphql" and form["body"] == request_body(
        {"tool": "weather", "args": ARGS}
    )
    assert read_call(form["body"]) == {"tool": "weather", "args": ARGS}


def test_the_ssh_line_runs_the_cli_form_remotely_with_the_token_on_stdin() -> None:
    """The remote shell gets `flightlog call NAME --args JSON` quoted once more for itself; the token is
    `printf`ed into ssh's stdin (FLIGHTLOG_TOKEN here, or the lent one), never on a command line."""
    for token, given in ((None, '"$FLIGHTLOG_TOKEN"'), ("flt_t", "flt_t")):
        line = forms(row(), ARGS, token=token, ssh_host="box")["ssh"]["command"]
        head, _, ssh = line.partition(" | ")
        assert head == f"printf %s {given}"
        words = shlex.split(ssh)
        assert words[:2] == ["ssh", "box"] and len(words) == 3
        script = words[2].split("; ")
        assert script[:2] == ['FLIGHTLOG_TOKEN="$(cat)"', "export FLIGHTLOG_TOKEN"]
        assert shlex.split(script[2]) == [
            "exec",
            "flightlog",
            "call",
            "weather",
            "--args",
            canonical_json(ARGS),
        ]
        assert "flt_t" not in ssh


def test_the_wget_form_reads_the_token_where_it_runs() -> None:
    """Without a lent token, wget's authorization header is `Bearer $FLIGHTLOG_TOKEN`, expanded by the
    shell that runs it (it had none, so with the variable set the door answered 401)."""
    command = forms(row(), ARGS)["wget"]["command"]
    done = subprocess.run(
        ["sh", "-c", f"set -- {command.removeprefix('wget ')}; printf '%s\\n' \"$@\""],
        capture_output=True,
        text=True,
        env={"FLIGHTLOG_TOKEN": "flt_from_env", "PATH": "/usr/bin:/bin"},
    )
    assert "--header=authorization: Bearer flt_from_env" in done.stdout.splitlines()


def test_the_shortcut_sends_the_dispatch_request_exactly() -> None:
    """The Shortcut's Get Contents of URL posts the Text action's output, which is the call's canonical
    JSON, to the door with the dispatch form's headers; with no lent token it asks for one."""
    for token in (None, "flt_t"):
        rendered = forms(row(), ARGS, token=token)
        actions = json.loads(rendered["apple_shortcut"]["code"])["WFWorkflowActions"]
        kinds = [a["WFWorkflowActionIdentifier"] for a in actions]
        asks = ["is.workflow.actions.ask"] if token is None else []
        assert kinds == ["is.workflow.actions.gettext", *asks, "is.workflow.actions.downloadurl"]
        text, fetch = actions[0]["WFWorkflowActionParameters"], actions[-1]["WFWorkflowActionParameters"]
        assert text["WFTextActionText"] == canonical_json(rendered["dispatch"]["body"])
        assert (fetch["WFURL"], fetch["WFHTTPMethod"]) == (rendered["dispatch"]["url"], "POST")
        assert fetch["WFRequestVariable"]["Value"]["OutputUUID"] == text["UUID"]
        items = fetch["WFHTTPHeaders"]["Value"]["WFDictionaryFieldValueItems"]
        keys = [i["WFKey"]["Value"]["string"] for i in items]
        assert keys == list(rendered["dispatch"]["headers"])
        auth = items[keys.index("authorization")]["WFValue"]["Value"]
        assert auth["string"] == ("Bearer \ufffc" if token is None else f"Bearer {token}")
