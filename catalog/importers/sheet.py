"""Sheet importer: rows from a TSV or CSV file in seed 000's layout, read by header label, never by
position (`catalog.importers.sheet_layout` has the labels).

The first line names the columns; a label that names no column is an error naming it, never a guess,
and so is a repeated column. Adding a column moves nothing else. An empty cell is an absent value.

- `name` is required. `type` is the bundle (default `tool`); `id` the path in it (default the name);
  `kind` is written only when it is not what the row would be anyway (its `type:` frontmatter, else
  its bundle's singular); `status`, `grain`, `frontmatter` (a JSON object of any other keys) and
  `text` (the body) as they are. A row of another bundle than `tool` takes no contract.
- The contract: the `upstream` way (a whole contract as JSON), or its parts (`upstream_method` with
  `upstream_url`, `headers` and `body` for a web call; `command` for `CLI`; `server`, `tool` and
  `arguments` for `MCP`; `language` and `code` for `CODE`). Every other way is derived from the
  canonical call, so it is checked (a runnable form; a web form aimed at the door's route) and not
  kept: the Directory renders it again, for whatever proxy and token it is shown with.
- `args`: the JSON Schema of the arguments; when absent, every `{placeholder}` of the contract is a
  required text argument. `cli_opt_in`: true/false (yes/no, 1/0).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import yaml

from catalog.errors import ImporterError, ToolError
from catalog.importers import Document, documents, placeholder_args
from catalog.importers.sheet_layout import DOOR_PATHS, PART_COLUMNS, WAY_COLUMNS, column_of, label
from catalog.tool import Tool

TRUE: Final = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
CONTRACT_COLUMNS: Final = frozenset({*PART_COLUMNS, *WAY_COLUMNS})
"""What a row of another bundle than `tool` cannot have."""
SHAPES: Final = ("{method, url, headers, body}", '{method: "MCP", ...}', '{method: "CLI", command}', "...")


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
    columns: list[str] = []
    for cell in header:
        column = column_of(cell)
        if column is None:
            hint = ' (a contract\'s own URL is "upstream url")' if label(cell) == "upstream_url" else ""
            raise ImporterError(
                f'{source}: unknown column "{cell.strip()}"{hint}; the labels are in seed 000\'s layout'
            )
        if column in columns:
            raise ImporterError(f'{source}: the column "{column}" appears twice')
        columns.append(column)
    if "name" not in columns:
        raise ImporterError(f"{source}: no `name` column")
    out: list[Document] = []
    for line, cells in enumerate(reader, start=2):
        if not any(cell.strip() for cell in cells):
            continue
        if len(cells) > len(columns):
            raise ImporterError(f"{source} line {line}: {len(cells)} cells under {len(columns)} labels")
        row = {
            c: cell for c, cell in zip(columns, cells, strict=False) if cell.strip() or (c == "text" and cell)
        }
        try:
            tool = _row(row, {c: h.strip() for c, h in zip(columns, header, strict=True)})
        except (ToolError, ImporterError) as e:
            raise ImporterError(f"{source} line {line}: {e}") from e
        [(bundle, path, document)] = documents([tool]) if tool.bundle == "tool" else [_plain(tool)]
        path = f"{row['id'].strip()}.md" if row.get("id", "").strip() else path
        if any((b, p) == (bundle, path) for b, p, _ in out):
            raise ImporterError(f"{source} line {line}: two rows would both be {bundle}/{path}")
        out.append((bundle, path, document))
    return out


def _row(row: Mapping[str, str], said: Mapping[str, str]) -> Tool:
    """One row as a tool row (a document of any bundle); `said` is each column's header as written."""
    bundle = row.get("type", "tool").strip()
    front: dict[str, Any] = _json(row, "frontmatter", said) if "frontmatter" in row else {}
    if not isinstance(front, dict):
        raise ImporterError(f"the {said['frontmatter']} cell must be a JSON object of frontmatter keys")
    front = {"name": row.get("name", "").strip(), "description": row.get("description", ""), **front}
    for key in ("status", "grain"):
        if key in row:
            front[key] = row[key].strip()
    kind = row.get("kind", "").strip()
    if kind and kind != str(front.get("type") or _singular(bundle)):
        front["kind"] = kind
    for way in WAY_COLUMNS:
        if way != "upstream" and way in row:
            _check_way(way, _json(row, way, said), said[way])
    if bundle != "tool":
        extra = sorted(set(row) & (CONTRACT_COLUMNS | {"args", "cli_opt_in"}))
        if extra:
            raise ImporterError(
                f'a row of type "{bundle}" calls nothing: it cannot have a "{said[extra[0]]}" column'
            )
    else:
        contract = _contract(row, said)
        if contract is not None:
            front["upstream"] = contract
        front["args"] = _json(row, "args", said) if "args" in row else placeholder_args(contract)
        if "cli_opt_in" in row:
            flag = TRUE.get(row["cli_opt_in"].strip().lower())
            if flag is None:
                raise ImporterError(f'{said["cli_opt_in"]} must be true or false, not "{row["cli_opt_in"]}"')
            front["cli"] = flag
    return Tool.from_frontmatter(front, row.get("text", ""), bundle=bundle)


def _plain(row: Tool) -> Document:
    """A row of another bundle: its frontmatter as given (no arguments or opt-in: it calls nothing)."""
    front = {"name": row.name, "description": row.description, **row.extra}
    block = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    body = row.body if not row.body or row.body.endswith("\n") else row.body + "\n"
    return row.bundle, row.path, f"---\n{block}---\n{body}"


def _singular(bundle: str) -> str:
    """The kind a row of `bundle` has when its frontmatter names none (as the index reads it)."""
    return bundle[:-1] if bundle.endswith("s") and len(bundle) > 3 else bundle or "document"


def _check_way(way: str, form: Any, said: str) -> None:
    """A derived way's cell must be a runnable form, and a web form aimed at the door's route."""
    parts = form if isinstance(form, list) else [form]
    if not parts or not all(isinstance(p, dict) and isinstance(p.get("method"), str) for p in parts):
        raise ImporterError(f"the {said} cell is not a runnable form (one of {', '.join(SHAPES)})")
    route = DOOR_PATHS.get(way)
    url = str(parts[0].get("url") or "")
    if route is not None and urlsplit(url).path.rstrip("/") != route:
        raise ImporterError(
            f"the {said} cell calls {url or 'nothing'}, not flightlog's door at {route}: the tool's own"
            " call goes in the upstream column"
        )


def _contract(row: Mapping[str, str], said: Mapping[str, str]) -> Any:
    parts = sorted(set(row) & set(PART_COLUMNS))
    if "upstream" in row:
        if parts:
            raise ImporterError(f"give either the upstream or its parts, not both ({said[parts[0]]})")
        return _json(row, "upstream", said)
    if not parts:
        return None
    method = row.get("upstream_method", "").strip().upper()
    if not method:
        raise ImporterError("a contract needs a method (GET, POST, ..., MCP, CLI, CODE)")
    if method == "CLI":
        command = row.get("upstream_command", "")
        listed = command.lstrip()[:1] == "["
        return {"method": "CLI", "command": _json(row, "upstream_command", said) if listed else command}
    if method == "CODE":
        return {
            "method": "CODE",
            "language": row.get("upstream_language", ""),
            "code": row.get("upstream_code", ""),
        }
    if method == "MCP":
        contract = {
            "method": "MCP",
            "server": _json(row, "upstream_server", said),
            "tool": row.get("upstream_tool", ""),
        }
        if "upstream_arguments" in row:
            contract["arguments"] = _json(row, "upstream_arguments", said)
        if "upstream_headers" in row:
            contract["headers"] = _json(row, "upstream_headers", said)
        return contract
    contract = {"method": method, "url": row.get("upstream_url", "").strip()}
    if "upstream_headers" in row:
        contract["headers"] = _json(row, "upstream_headers", said)
    if "upstream_body" in row:
        body = row["upstream_body"]
        contract["body"] = _json(row, "upstream_body", said) if body.lstrip()[:1] in "{[" else body
    return contract


def _json(row: Mapping[str, str], column: str, said: Mapping[str, str]) -> Any:
    try:
        return json.loads(row[column])
    except ValueError as e:
        raise ImporterError(f"the {said.get(column, column)} cell is not valid JSON: {e}") from e
