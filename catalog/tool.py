"""A tool row: the Directory's document for one capability that can be called.

A tool row is a Markdown document with a YAML frontmatter block, stored as `tool/NAME.md`:

    ---
    name: get_pet
    description: One pet by its id.
    args: {type: object, properties: {petId: {type: integer}}, required: [petId]}
    upstream: {method: GET, url: "https://petstore.example/v1/pets/{petId}",
               headers: {x-api-key: "[PETSTORE_KEY]"}}
    cli: false
    ---
    Free text for people.

`args` is the JSON Schema of the canonical call's arguments; `upstream` is the contract that runs it
(see `catalog.contracts` for the shapes and how they are rendered); `cli: true` opts a row whose
contract runs a command into being executed by the dispatch door. Any other frontmatter key is kept
as it is (`extra`) so that a row survives a round trip through `Tool` unchanged.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from catalog.errors import ToolError

Contract = dict[str, Any] | list[dict[str, Any]]
"""One upstream contract object, or an array of them run in order."""

EMPTY_ARGS: Final[dict[str, Any]] = {"type": "object", "properties": {}}
KNOWN_KEYS: Final = ("name", "description", "args", "upstream", "cli")
HTTP_METHOD: Final = re.compile(r"^[A-Z][A-Z0-9_-]*$")
_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FRONTMATTER: Final = re.compile(r"\A---[ \t]*\r?\n(.*?)^---[ \t]*\r?\n?", re.S | re.M)


@dataclass(frozen=True)
class Tool:
    """One tool row, as the contracts and the dispatch door read it."""

    name: str
    description: str
    args_schema: Mapping[str, Any] = field(default_factory=lambda: dict(EMPTY_ARGS))
    upstream: Contract | None = None
    cli_opt_in: bool = False
    bundle: str = "tool"
    body: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_frontmatter(
        cls, frontmatter: Mapping[str, Any], body: str = "", *, bundle: str = "tool"
    ) -> Tool:
        """Build a tool from a parsed frontmatter block, checking every field it relies on."""
        name = frontmatter.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ToolError("a tool row needs a non-empty `name`")
        description = frontmatter.get("description", "")
        if not isinstance(description, str):
            raise ToolError(f"{name}: `description` must be text")
        args = frontmatter.get("args")
        args = dict(EMPTY_ARGS) if args is None else args
        check_args_schema(name, args)
        upstream = frontmatter.get("upstream")
        if upstream is not None:
            check_contract(name, upstream)
        cli = frontmatter.get("cli", False)
        if not isinstance(cli, bool):
            raise ToolError(f"{name}: `cli` must be true or false")
        extra = {k: v for k, v in frontmatter.items() if k not in KNOWN_KEYS}
        return cls(name, description, args, upstream, cli, bundle, body, extra)

    @classmethod
    def from_document(cls, text: str, *, bundle: str = "tool") -> Tool:
        """Build a tool from a whole Markdown document (frontmatter block first)."""
        frontmatter, body = split_document(text)
        return cls.from_frontmatter(frontmatter, body, bundle=bundle)

    def frontmatter(self) -> dict[str, Any]:
        """The frontmatter block as a dict, known keys first in a fixed order."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        out["args"] = _plain(self.args_schema)
        if self.upstream is not None:
            out["upstream"] = _plain(self.upstream)
        out["cli"] = self.cli_opt_in
        out.update(_plain(dict(self.extra)))
        return out

    def to_document(self) -> str:
        """The row as a Markdown document with YAML frontmatter; `from_document` reads it back equal."""
        block = yaml.safe_dump(self.frontmatter(), sort_keys=False, allow_unicode=True, width=100)
        body = self.body if not self.body or self.body.endswith("\n") else self.body + "\n"
        return f"---\n{block}---\n{body}"

    @property
    def path(self) -> str:
        """The document's path inside its bundle."""
        return f"{self.name}.md"

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The declared top-level arguments, in schema order."""
        return tuple(self.args_schema.get("properties", {}) or {})


def split_document(text: str) -> tuple[dict[str, Any], str]:
    """Split a Markdown document into its frontmatter (a YAML mapping) and its body."""
    match = _FRONTMATTER.match(text)
    if match is None:
        raise ToolError("the document has no frontmatter block (--- ... ---) at its start")
    try:
        data = yaml.load(match.group(1), Loader=_LOADER)  # CSafeLoader or SafeLoader: safe either way
    except yaml.YAMLError as e:
        raise ToolError(f"the frontmatter is not valid YAML: {str(e).splitlines()[0]}") from e
    if not isinstance(data, dict):
        raise ToolError("the frontmatter must be a mapping of keys to values")
    return data, text[match.end() :]


def check_args_schema(name: str, schema: Any) -> None:
    """An argument schema must be a valid JSON Schema describing an object."""
    if not isinstance(schema, dict):
        raise ToolError(f"{name}: `args` must be a JSON Schema object")
    try:
        problem = _schema_problem(json.dumps(schema, sort_keys=True, default=str))
    except (TypeError, ValueError):
        problem = "it is not plain JSON"
    if problem:
        raise ToolError(f"{name}: `args` is not a valid JSON Schema: {problem}")
    if schema.get("type", "object") != "object":
        raise ToolError(f"{name}: `args` must describe an object (type: object)")


@functools.lru_cache(maxsize=4096)
def _schema_problem(schema_json: str) -> str:
    """Why a schema (as canonical JSON) is not valid JSON Schema, or "" when it is.

    Checking against the 2020-12 meta-schema costs milliseconds; rows are read on every dispatch,
    and the same schemas recur, so the verdict is kept per distinct schema.
    """
    try:
        Draft202012Validator.check_schema(json.loads(schema_json))
    except SchemaError as e:
        return e.message
    return ""


def check_contract(name: str, contract: Any, *, nested: bool = False) -> None:
    """Check one contract's shape: HTTP, MCP, CLI, CODE, or an array of those."""
    if isinstance(contract, list) and not nested:
        if not contract:
            raise ToolError(f"{name}: an upstream array needs at least one contract")
        for part in contract:
            check_contract(name, part, nested=True)
        return
    if not isinstance(contract, dict):
        raise ToolError(f"{name}: `upstream` must be a contract object or an array of them")
    method = contract.get("method")
    if not isinstance(method, str) or not HTTP_METHOD.match(method):
        raise ToolError(f"{name}: the upstream contract needs a `method` (GET, POST, MCP, CLI, CODE, ...)")
    if method == "CLI":
        command = contract.get("command")
        if not (isinstance(command, str) and command) and not (
            isinstance(command, list) and command and all(isinstance(w, str) for w in command)
        ):
            raise ToolError(f"{name}: a CLI contract needs `command`: a string or a list of strings")
    elif method == "CODE":
        if not isinstance(contract.get("language"), str) or not isinstance(contract.get("code"), str):
            raise ToolError(f"{name}: a CODE contract needs `language` and `code` strings")
    elif method == "MCP":
        server = contract.get("server")
        if not isinstance(server, dict) or not (server.get("command") or server.get("url")):
            raise ToolError(f"{name}: an MCP contract needs `server` with a `command` or a `url`")
        if not isinstance(contract.get("tool"), str):
            raise ToolError(f"{name}: an MCP contract needs the server's `tool` name")
        if not isinstance(contract.get("arguments", {}), dict):
            raise ToolError(f"{name}: an MCP contract's `arguments` must be an object")
        _check_headers(name, contract)
    else:
        url = contract.get("url")
        if not isinstance(url, str) or not re.match(r"^https?://", url, re.I):
            raise ToolError(f"{name}: an HTTP contract needs an http:// or https:// `url`")
        _check_headers(name, contract)


def _check_headers(name: str, contract: Mapping[str, Any]) -> None:
    headers = contract.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ToolError(f"{name}: `headers` must map header names to text values")


def _plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists, so YAML never writes Python tags."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
