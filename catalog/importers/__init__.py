"""Importers: rows for the Directory from an OpenAPI document, an MCP server or a sheet.

Every importer returns documents `[(bundle, path, text)]` (`path` inside the bundle, e.g.
`get_pet.md`), ready for `Directory.transact(...)` or to be written as files under a Directory folder.
Nothing is guessed: what an importer cannot read faithfully is an `ImporterError` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from catalog.errors import ImporterError
from catalog.forms.upstream import PLACEHOLDER
from catalog.tool import Tool

Document = tuple[str, str, str]
ARG_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def documents(tools: Iterable[Tool]) -> list[Document]:
    """The tools as documents; two rows with one name are an error, never a silent overwrite."""
    out: list[Document] = []
    seen: set[tuple[str, str]] = set()
    for tool in tools:
        key = (tool.bundle, tool.path)
        if key in seen:
            raise ImporterError(f"two rows would both be {tool.bundle}/{tool.path}")
        seen.add(key)
        out.append((tool.bundle, tool.path, tool.to_document()))
    return out


def row_name(text: str) -> str:
    """A row name from free text: runs of characters outside `[A-Za-z0-9_.-]` become one `_`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.-")
    if not name:
        raise ImporterError(f'"{text}" gives no usable row name')
    return name[:128]


def arg_name(text: str) -> str:
    """An argument name usable as a `{placeholder}`: other characters become `_`."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if ARG_NAME.match(name) else f"_{name}"


def secret_name(text: str) -> str:
    """A secret name (`[NAME]`): upper case letters, digits and `_`, starting with a letter."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()
    return name if name[:1].isalpha() else f"S_{name}"


def placeholder_args(contract: Any) -> dict[str, Any]:
    """An argument schema made from a contract's `{placeholders}`: each one a required string."""
    names: dict[str, None] = {}

    def walk(value: Any) -> None:
        if isinstance(value, str):
            for match in PLACEHOLDER.finditer(value):
                names.setdefault(match.group(1), None)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(key)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(contract)
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
    }
