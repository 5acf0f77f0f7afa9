"""The one GraphQL operation flightlog's door serves: its text (the `graphql` form sends it) and how a
request is read back into the canonical call (the door's `POST /api/graphql` reads it).

    mutation Call($tool: String!, $args: JSON) { call(tool: $tool, args: $args) }

with the canonical call's parts as its variables, `{"tool": NAME, "args": {...}}`. The door answers
`{"data": {"call": REPLY}}`, REPLY being what `POST /api/dispatch` answers. flightlog holds no schema
beyond this one field, so it parses no general GraphQL: a document is compared with this one token by
token, by GraphQL's own lexical rules (whitespace, commas and `#` comments are insignificant; the
operation's name is free), and anything else is refused, naming the operation it takes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from catalog.errors import CatalogError

OPERATION: Final = "mutation Call($tool: String!, $args: JSON) { call(tool: $tool, args: $args) }"
_TOKEN: Final = re.compile(
    r'"(?:[^"\\\n]|\\.)*"|\.\.\.|[!$&()\:=@\[\]{|}]|[_A-Za-z][_0-9A-Za-z]*|-?\d[\w.+-]*|[^\s,]'
)
_IGNORED: Final = re.compile(r"#[^\n\r]*|[\s,\ufeff]+")


class GraphQLRefused(CatalogError, ValueError):
    """A GraphQL request that is not the one operation flightlog serves (the message says which).

    In the tree (`CatalogError`), and still a `ValueError`: the door reads a request body's JSON and
    its operation in one `except ValueError`, a body that is not JSON being the other case."""


def tokens(document: str) -> list[str]:
    """The document's tokens, insignificant characters and comments dropped."""
    return _TOKEN.findall(_IGNORED.sub(" ", document))


def _shape(document: str) -> list[str]:
    """The tokens with the operation's name taken out (`mutation NAME(` reads as `mutation (`)."""
    found = tokens(document)
    if len(found) > 1 and found[0] == "mutation" and found[1] not in ("(", "{"):
        del found[1]
    return found


_WANTED: Final = _shape(OPERATION)


def read_call(request: Any) -> dict[str, Any]:
    """The canonical call a GraphQL request body (a JSON object) carries, or `GraphQLRefused`."""
    if not isinstance(request, Mapping):
        raise GraphQLRefused('a GraphQL request is a JSON object: {"query": ..., "variables": {...}}')
    query = request.get("query")
    if not isinstance(query, str) or _shape(query) != _WANTED:
        raise GraphQLRefused(f"flightlog serves one GraphQL operation: {OPERATION}")
    variables = request.get("variables")
    if not isinstance(variables, Mapping) or not isinstance(variables.get("tool"), str):
        raise GraphQLRefused('the variables are the canonical call: {"tool": NAME, "args": {...}}')
    unknown = sorted(set(variables) - {"tool", "args"})
    if unknown:
        raise GraphQLRefused(f"unknown variable ${unknown[0]}; the operation takes $tool and $args")
    args = variables.get("args")
    return {"tool": variables["tool"], "args": {} if args is None else args}


def request_body(call: Mapping[str, Any]) -> dict[str, Any]:
    """The GraphQL request carrying one canonical call (what the `graphql` form POSTs)."""
    return {"query": OPERATION, "operationName": "Call", "variables": dict(call)}
