"""Sheet importer: rows from a TSV or CSV file, read by header label, never by position.

The first line names the columns. Labels are matched case-insensitively (spaces and `-` read as
`_`) against `COLUMNS`; a label that is not one of them is an error naming it, never a guess, and so
is a repeated label. Adding a column moves nothing else. An empty cell is an absent value.

- `name` (required), `description`, `bundle` (default `tool`; other bundles take only name and
  description).
- The contract: `upstream` (a whole contract as JSON), or its parts: `method` with `url`, `headers`
  (JSON object) and `body` (JSON when it starts with `{` or `[`, else text) for a web call;
  `command` (a JSON list or a shell line) for `CLI`; `server` (JSON), `tool` and `arguments` (JSON)
  for `MCP`; `language` and `code` for `CODE`.
- `args`: the JSON Schema of the arguments; when absent, every `{placeholder}` of the contract is a
  required text argument. `cli`: true/false (yes/no, 1/0).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from catalog.errors import ImporterError, ToolError
from catalog.importers import Document, documents, placeholder_args
from catalog.tool import Tool

COLUMNS: Final = (
    "name",
    "description",
    "bundle",
    "args",
    "upstream",
    "method",
    "url",
    "headers",
    "body",
    "command",
    "server",
    "tool",
    "arguments",
    "language",
    "code",
    "cli",
)
CONTRACT_COLUMNS: Final = frozenset(COLUMNS) - {"name", "description", "bundle", "args", "cli"}
TRUE: Final = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def import_sheet(path: Path, *, delimiter: str | None = None) -> list[Document]:
    """Documents for every row of the sheet at `path` (TSV by `.tsv`, CSV by `.csv`)."""
    if delimiter is None:
        suffix = path.suffix.lower()
        if suffix not in (".tsv", ".csv"):
            raise ImporterError(f"{path}: name a .tsv or .csv file, or give the delimiter")
        delimiter = "\t" if suffix == ".tsv" else ","
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise ImporterError(f"cannot read {path}: {e.strerror}") from e
    return read_sheet(text, delimiter=delimiter, source=path.name)


def read_sheet(text: str, *, delimiter: str, source: str = "the sheet") -> list[Document]:
    """Documents from a sheet's text."""
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise ImporterError(f"{source} is empty: its first line must name the columns") from None
    labels = [_label(cell) for cell in header]
    for given, label in zip(header, labels, strict=True):
        if label not in COLUMNS:
            raise ImporterError(f'{source}: unknown column "{given.strip()}" (known: {", ".join(COLUMNS)})')
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ImporterError(f'{source}: the column "{repeated[0]}" appears twice')
    if "name" not in labels:
        raise ImporterError(f"{source}: no `name` column")
    tools = []
    for line, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) > len(labels):
            raise ImporterError(f"{source} line {line}: {len(cells)} cells under {len(labels)} labels")
        row = {label: cell for label, cell in zip(labels, cells, strict=False) if cell.strip()}
        try:
            tools.append(_tool(row))
        except (ToolError, ImporterError) as e:
            raise ImporterError(f"{source} line {line}: {e}") from e
    return documents(tools)


def _label(cell: str) -> str:
    return re.sub(r"[\s-]+", "_", cell.strip().lower())


def _tool(row: Mapping[str, str]) -> Tool:
    bundle = row.get("bundle", "tool").strip()
    front: dict[str, Any] = {"name": row.get("name", "").strip(), "description": row.get("description", "")}
    if bundle != "tool":
        extra = sorted(set(row) & (CONTRACT_COLUMNS | {"args", "cli"}))
        if extra:
            raise ImporterError(f'a row of bundle "{bundle}" cannot have a {extra[0]}')
        return Tool.from_frontmatter(front, "", bundle=bundle)
    contract = _contract(row)
    if contract is not None:
        front["upstream"] = contract
    front["args"] = _json(row, "args") if "args" in row else placeholder_args(contract)
    if "cli" in row:
        flag = TRUE.get(row["cli"].strip().lower())
        if flag is None:
            raise ImporterError(f'cli must be true or false, not "{row["cli"]}"')
        front["cli"] = flag
    return Tool.from_frontmatter(front, "", bundle=bundle)


def _contract(row: Mapping[str, str]) -> Any:
    if "upstream" in row:
        parts = sorted(set(row) & CONTRACT_COLUMNS - {"upstream"})
        if parts:
            raise ImporterError(f"give either upstream or its parts, not both ({parts[0]})")
        return _json(row, "upstream")
    if not set(row) & CONTRACT_COLUMNS:
        return None
    method = row.get("method", "").strip().upper()
    if not method:
        raise ImporterError("a contract needs a method (GET, POST, ..., MCP, CLI, CODE)")
    if method == "CLI":
        command = row.get("command", "")
        return {"method": "CLI", "command": _json(row, "command") if command.lstrip()[:1] == "[" else command}
    if method == "CODE":
        return {"method": "CODE", "language": row.get("language", ""), "code": row.get("code", "")}
    if method == "MCP":
        contract = {"method": "MCP", "server": _json(row, "server"), "tool": row.get("tool", "")}
        if "arguments" in row:
            contract["arguments"] = _json(row, "arguments")
        if "headers" in row:
            contract["headers"] = _json(row, "headers")
        return contract
    contract = {"method": method, "url": row.get("url", "").strip()}
    if "headers" in row:
        contract["headers"] = _json(row, "headers")
    if "body" in row:
        body = row["body"]
        contract["body"] = _json(row, "body") if body.lstrip()[:1] in "{[" else body
    return contract


def _json(row: Mapping[str, str], column: str) -> Any:
    try:
        return json.loads(row[column])
    except ValueError as e:
        raise ImporterError(f"the {column} cell is not valid JSON: {e}") from e
