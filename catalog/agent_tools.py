"""The agent API's verbs as tools: their definitions (name, title, when to call, JSON Schema, hints)
and the strict check of one call's arguments against them.

The definitions are paid in every session's prompt, so they are hand-written and small (their size
is measured by the benchmark). A call's arguments are checked here, not by the transport: an unknown
name, a missing one or a wrong type is one line naming the accepted arguments, never a silent drop
and never a library's raw validation message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from catalog.errors import ArgumentError


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One verb as an MCP tool: name, title, description, input schema and hints."""

    name: str
    title: str
    description: str
    schema: dict[str, Any]
    read_only: bool
    destructive: bool = False
    idempotent: bool = True


def _obj(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_STR: Final = {"type": "string"}
_INT: Final = {"type": "integer"}
READ_TOOLS: Final = (
    ToolSpec(
        "manifest",
        "Directory manifest",
        "Call this before anything else. The Directory as TSV: one line per row (id, bundle, kind, status, "
        "grain, summary, links). Pick ids from it; never guess one. bundle narrows it to one bundle; names "
        "lists ids only. Past 15,000 characters it comes in pages framed @@ manifest [start..end of total]; "
        "continue with offset: end.",
        _obj([], bundle=_STR, names={"type": "boolean"}, offset=_INT, limit=_INT),
        read_only=True,
    ),
    ToolSpec(
        "search",
        "Search the Directory",
        "Rows matching words, a name or a question, best first, as manifest lines; never bodies. A direct "
        "hit ends with pos: pass it to get as offset to read the passage. Call when you know what you want "
        "but not its id.",
        _obj(["query"], query=_STR, k=_INT, bundle=_STR),
        read_only=True,
    ),
    ToolSpec(
        "get",
        "Read rows",
        "Read rows by id. Pass every id you need in one call. Each comes framed @@ id [start..end of "
        "total]; continue with offset. section reads one part (frontmatter, body, or a heading's slug); "
        "find returns a window around a literal phrase and every match offset. Reads stop at 15,000 "
        "characters unless limit says otherwise.",
        _obj(
            ["ids"],
            ids={"type": "array", "items": _STR},
            section=_STR,
            offset=_INT,
            limit=_INT,
            find=_STR,
        ),
        read_only=True,
    ),
    ToolSpec(
        "snapshot",
        "Directory snapshot",
        "The digest of the Directory's content, its row count and revision. Call to check whether a "
        "manifest you hold has changed.",
        _obj([]),
        read_only=True,
    ),
)
WRITE_TOOLS: Final = (
    ToolSpec(
        "write",
        "Write a row",
        "Write one Markdown document (YAML frontmatter with name and description, then the body) at "
        'bundle/path.md. Omit replaces to create. A refusal ends with retry with replaces: "H"; re-read '
        "the concept if it matters, then call again with that hash. An indeterminate commit offers no "
        "hash: check snapshot before writing again.",
        _obj(["bundle", "path", "content"], bundle=_STR, path=_STR, content=_STR, replaces=_STR),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "delete",
        "Delete a row",
        "Delete the document at bundle/path. replaces is its current hash; a refusal offers it, as with "
        "write.",
        _obj(["bundle", "path"], bundle=_STR, path=_STR, replaces=_STR),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)
DATABASE_TOOLS: Final = (
    ToolSpec(
        "transact",
        "Commit several changes",
        "Commit 1 to 1,000 changes as one revision. No changes commit if any precondition fails. A change "
        "is {operation: write|delete, bundle, path, content?, replaces?}; hashes are full 64-character "
        "digests. expectedRevision refuses the commit if the head has moved.",
        _obj(
            ["changes"],
            changes={"type": "array", "items": {"type": "object"}, "minItems": 1, "maxItems": 1000},
            expectedRevision=_INT,
        ),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
    ToolSpec(
        "history",
        "Revision history",
        "Committed revisions, newest first. Pass the next cursor of one page as before to read on.",
        _obj([], before=_STR, limit=_INT),
        read_only=True,
    ),
    ToolSpec(
        "restore",
        "Restore a revision",
        "Make a new revision whose content equals an older revision's; history is never rewritten. "
        "expectedRevision must be the current head.",
        _obj(["revision", "expectedRevision"], revision=_INT, expectedRevision=_INT),
        read_only=False,
        destructive=True,
        idempotent=False,
    ),
)


CALL_TOOL: Final = ToolSpec(
    "call",
    "Run a tool",
    "Run one Directory tool: {tool: NAME, args: {...}} as its row's args schema says (read it with get "
    "first). flightlog holds the keys, checks the limits and records the call; the answer is "
    "{ok, result, action_id}.",
    _obj(["tool"], tool=_STR, args={"type": "object"}, token=_STR),
    read_only=False,
    destructive=True,
    idempotent=False,
)
"""Served only when the server is given a dispatcher (`flightlog mcp` wires the door)."""


_TYPES: Final = {
    "string": ((str,), "a string"),
    "integer": ((int,), "an integer"),
    "boolean": ((bool,), "true or false"),
    "array": ((list,), "a list"),
    "object": ((dict,), "an object"),
}


def check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of one call to `spec`, or `ArgumentError` in one line naming the accepted ones.

    An unknown argument is refused, never dropped: a model that sends `expected_revision` where the
    schema says `expectedRevision` must learn so, not commit on a stale head. `null` is absent.
    """
    props: dict[str, Any] = spec.schema.get("properties", {})
    accepted = ", ".join(props) or "none"
    given = {k: v for k, v in arguments.items() if v is not None}
    for name in given:
        if name not in props:
            raise ArgumentError(
                spec.name, name, f"is not one of its arguments; the accepted ones are {accepted}"
            )
    for name in spec.schema.get("required", []):
        if name not in given:
            raise ArgumentError(spec.name, name, f"is required; the accepted ones are {accepted}")
    for name, value in given.items():
        kind = props[name].get("type", "")
        types, said = _TYPES.get(kind, ((object,), "any value"))
        if not isinstance(value, types) or (isinstance(value, bool) and kind != "boolean"):
            raise ArgumentError(spec.name, name, f"must be {said}, not {_json_type(value)}")
        item = props[name].get("items", {}).get("type")
        if (
            isinstance(value, list)
            and item in _TYPES
            and not all(isinstance(v, _TYPES[item][0]) for v in value)
        ):
            raise ArgumentError(spec.name, name, f"must be a list of {item}s")
    return given


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    return names.get(type(value), "an object")


def tools(database_tools: bool = False, call: bool = False) -> tuple[ToolSpec, ...]:
    """The tools in their fixed order: the six defaults, `call` when dispatching, then the three
    database tools if asked."""
    return (
        READ_TOOLS + WRITE_TOOLS + ((CALL_TOOL,) if call else ()) + (DATABASE_TOOLS if database_tools else ())
    )
