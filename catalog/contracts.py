"""Contracts: every runnable form of a tool, derived from the one canonical call.

A caller learns one shape, `{"tool": NAME, "args": {...}}`, and asks for the wrapper it needs.
`forms(tool, args)` answers all of them as JSON objects that can be pasted and run:

    {method, url, headers, body}              a web call (a string body is sent as written, any other
                                              JSON value as its canonical JSON text)
    {method: "MCP", server, headers, tool, arguments}
    {method: "CLI", command}                  a shell line (string) or an argv (list)
    {method: "CODE", language, code}
    an array of those                         run in order

Form names (`FORM_NAMES`, in order), 26 for every tool (`ALWAYS_FORMS`), as seed 000 counts them:
the dispatch door and its dry run, a one-line URL, two command-line clients (curl, wget), the
flightlog CLI, Python (httpx, and the official MCP client over stdio), JavaScript, a webhook, an
Apple Shortcut, an SDK method, a direct function call, MCP over stdio, over HTTP and as one JSON-RPC
POST, WebSocket, server-sent events, GraphQL, SSH, the MCP client configurations (Claude Code's
line, the mcpServers JSON, VS Code's) and the tool definitions models take (OpenAI chat and
Responses, Anthropic); with a live scoped token its three credential-free link forms (link,
link_curl, link_markdown: 29); and upstream, the service's own call, for a tool with an upstream
contract (27, or 30 with both). A tool whose upstream is a stdio MCP server also gets
`RECORDED_FORM_NAMES`: that server's own configuration behind `flightlog mcp-record`
(`catalog.forms.recorded_mcp`), which are not forms of the canonical call and are not counted.

The dispatch door uses two functions of this module: `render_upstream(tool, args)` gives the exact
upstream request with the arguments substituted and secrets still as `[NAME]` (what a dry run shows),
and `bind_secrets(request, secrets)` substitutes the values into the copy that is sent (an unbound
name raises `UnboundSecret`, naming it). Rendering is deterministic: bodies are serialized as
`json.dumps(value, separators=(",", ":"), ensure_ascii=False)` with the contract's key order, so a
dry run equals the real call byte for byte, with names instead of values. The placement rules are in
`catalog.forms.upstream`.

Arguments are validated against the tool's JSON Schema first (`ArgumentError` names the bad one), and
a tool whose contract, or whose rendered request, reaches a refused host raises `RefusedHost` naming
the host and where it hid (`catalog.retired_hosts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from catalog.errors import ArgumentError, ToolError
from catalog.form_names import ALWAYS_FORMS, FORM_NAMES, TOKEN_FORMS
from catalog.forms.agents import config_forms, definition_forms
from catalog.forms.channels import channel_forms
from catalog.forms.door import (
    DEFAULT_BASE,
    DEFAULT_PROXY,
    DEFAULT_SSH_HOST,
    DISPATCH_PATH,
    MCP_CALL_TOOL,
    MCP_HTTP_PATH,
    door_forms,
    link_forms,
    more_forms,
)
from catalog.forms.door import (
    FORM_NOTES as _NOTES,
)
from catalog.forms.library import function_snippet, sdk_snippet
from catalog.forms.recorded_mcp import RECORDED_FORM_NAMES, RECORDED_FORM_NOTES, mcp_upstream, recorded_forms
from catalog.forms.shortcut import shortcut_form
from catalog.forms.upstream import Request, bind, canonical_json, render, secret_names
from catalog.retired_hosts import RefusedHosts
from catalog.tool import Tool

__all__ = [
    "ALWAYS_FORMS",
    "DEFAULT_BASE",
    "DEFAULT_PROXY",
    "DISPATCH_PATH",
    "FORM_NAMES",
    "FORM_NOTES",
    "MCP_CALL_TOOL",
    "MCP_HTTP_PATH",
    "RECORDED_FORM_NAMES",
    "RECORDED_FORM_NOTES",
    "TOKEN_FORMS",
    "bind_secrets",
    "canonical_call",
    "canonical_json",
    "counted",
    "example_args",
    "forms",
    "render_upstream",
    "secret_names",
    "validate_args",
]

FORM_NOTES: Final = {name: _NOTES[name] for name in FORM_NAMES}
"""What varies per form, in the forms' order."""


def canonical_call(tool: Tool, args: Mapping[str, Any]) -> dict[str, Any]:
    """The one shape every form wraps: `{"tool": NAME, "args": {...}}`."""
    return {"tool": tool.name, "args": dict(args)}


def validate_args(tool: Tool, args: Any) -> dict[str, Any]:
    """The arguments, checked against the tool's schema; `ArgumentError` names the bad argument."""
    if not isinstance(args, Mapping):
        raise ArgumentError(tool.name, "", f"must be a JSON object, not {type(args).__name__}")
    validator = Draft202012Validator(dict(tool.args_schema))
    error = best_match(validator.iter_errors(dict(args)))
    if error is not None:
        raise ArgumentError(tool.name, _argument_of(error, args), error.message)
    return dict(args)


def _argument_of(error: ValidationError, args: Mapping[str, Any]) -> str:
    """The top-level argument an error is about, also for `required` and `additionalProperties`."""
    if error.absolute_path:
        return str(error.absolute_path[0])
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = [name for name in error.validator_value if name not in args]
        return str(missing[0]) if missing else ""
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}) if isinstance(error.schema, dict) else ())
        extra = sorted(name for name in args if name not in known)
        return extra[0] if extra else ""
    return ""


def render_upstream(
    tool: Tool,
    args: Mapping[str, Any],
    *,
    refused: RefusedHosts | Iterable[str] = (),
    check_args: bool = True,
) -> Request:
    """The exact upstream request for these arguments, secrets still written as `[NAME]`.

    `check_args=False` skips the schema check, only to show forms with sample arguments.
    """
    if tool.upstream is None:
        raise ToolError(f"{tool.name} has no upstream contract")
    checked = validate_args(tool, args) if check_args else dict(args)
    hosts = refused if isinstance(refused, RefusedHosts) else RefusedHosts(tuple(refused))
    hosts.check(tool.upstream, f"{tool.name}.upstream")
    request = render(tool.name, tool.upstream, checked, tool.arg_names)
    hosts.check(request, f"the {tool.name} upstream request")
    return request


def bind_secrets(request: Request, secrets: Mapping[str, str]) -> Request:
    """The request with secret values substituted for their names; an unbound name is refused."""
    return bind(request, secrets)


def forms(
    tool: Tool,
    args: Mapping[str, Any],
    *,
    base: str = DEFAULT_BASE,
    proxy: str = DEFAULT_PROXY,
    refused: RefusedHosts | Iterable[str] = (),
    check_args: bool = True,
    token: str | None = None,
    home: str | None = None,
    ssh_host: str = DEFAULT_SSH_HOST,
) -> dict[str, Any]:
    """Every form of the canonical call `{"tool": tool.name, "args": args}`, keyed by form name.

    `token` (a scoped token) is carried by every form that reaches the door and adds the three
    credential-free link forms; without one, every form that can carry a token reads FLIGHTLOG_TOKEN
    where it runs. `proxy` is the running proxy's address (the command line reads it from
    `proxy.json`); `home` is the FLIGHTLOG_HOME the MCP client configurations start the server with;
    `ssh_host` is the machine the SSH form runs the CLI on. `check_args=False` skips the schema
    check, only to show forms with sample arguments.
    """
    checked = validate_args(tool, args) if check_args else dict(args)
    hosts = refused if isinstance(refused, RefusedHosts) else RefusedHosts(tuple(refused))
    name = tool.name
    out = door_forms(name, checked, base=base, proxy=proxy, token=token)
    out |= more_forms(name, checked, base=base, proxy=proxy, token=token)
    headers = out["dispatch"]["headers"]
    call = canonical_call(tool, checked)
    out["apple_shortcut"] = shortcut_form(name, out["dispatch"]["url"], headers, call, token)
    out["sdk"] = {
        "method": "CODE",
        "language": "python",
        "code": sdk_snippet(name, checked, proxy, base, token),
    }
    out["function"] = {"method": "CODE", "language": "python", "code": function_snippet(name, checked, token)}
    out |= channel_forms(
        name, checked, base=base, proxy=proxy, headers=headers, token=token, ssh_host=ssh_host
    )
    out |= config_forms(home, proxy, token) | definition_forms(name, tool.description, tool.args_schema)
    if token:
        out |= link_forms(name, checked, base=base, proxy=proxy, token=token)
    out = {form: out[form] for form in FORM_NAMES if form in out}
    if tool.upstream is not None:
        out["upstream"] = render_upstream(tool, checked, refused=hosts, check_args=False)
        if (mcp := mcp_upstream(tool.upstream)) is not None:  # a stdio server's config behind mcp-record
            out |= recorded_forms(mcp.get("server") or {})
    hosts.check(out, f"the {name} forms")
    return out


def counted(rendered: Mapping[str, Any]) -> int:
    """How many of `rendered` are forms of the canonical call (26, 27, 29 or 30; the wrapped MCP
    server configurations are the upstream's, not the call's)."""
    return sum(1 for form in rendered if form in FORM_NAMES)


def example_args(tool: Tool) -> dict[str, Any]:
    """Arguments to show forms with when none are given: each required argument with a sample value
    (not always valid: a pattern or format is not imitated, so render samples with `check_args=False`).

    A value comes from the schema (`default`, `examples`, `example`, `const`, the first `enum`), else
    from its type (`"<name>"` for text, the minimum or 0 for numbers, false, [] or {}).
    """
    properties: Mapping[str, Any] = tool.args_schema.get("properties", {}) or {}
    required = tool.args_schema.get("required", []) or []
    return {name: _sample(name, properties.get(name, {})) for name in required}


def _sample(name: str, schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return f"<{name}>"
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    if schema.get("examples"):
        return schema["examples"][0]
    if "example" in schema:
        return schema["example"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "string")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    return {"boolean": False, "array": [], "object": {}, "null": None}.get(kind, f"<{name}>")
