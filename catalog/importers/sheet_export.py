"""A Directory written as a sheet in seed 000's layout: each row's name and description, then one
column per way of calling it (every form `catalog.contracts` renders, for a sample of its arguments),
then its arguments, its other frontmatter and body, and last its type, kind and id.

`catalog.importers.sheet` reads it back to the same rows: the `upstream` column is the row's own
contract (placeholders kept, never the rendered request), the other ways are derived again on use,
and nothing else a document holds is left out (other frontmatter keys go in the `frontmatter`
column as JSON, the body in `text`). The credential-free link forms need a lent token, so they are
not written.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Final

from catalog.contracts import example_args, forms
from catalog.directory import Directory
from catalog.document import parse
from catalog.errors import ToolError
from catalog.importers.sheet_layout import WAY_COLUMNS
from catalog.index import Row
from catalog.tool import Tool

WAYS: Final = tuple(w for w in WAY_COLUMNS if not w.startswith("link"))
COLUMNS: Final = (
    "name",
    "description",
    *WAYS,
    "args",
    "cli_opt_in",
    "status",
    "grain",
    "frontmatter",
    "text",
    "type",
    "kind",
    "id",
)
OWN_COLUMNS: Final = frozenset({"name", "description", "args", "upstream", "cli", "status", "grain", "kind"})
"""Frontmatter keys that have a column of their own; the rest go in `frontmatter`."""


def export_sheet(
    directory: Directory, *, delimiter: str = "\t", base: str | None = None, proxy: str | None = None
) -> str:
    """The Directory as the sheet's text (TSV by default), one line per row, bundles in order."""
    rows = directory.rows()
    texts = directory.texts(rows)
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        cells = _cells(row, texts.get(row.id, ""), base, proxy)
        writer.writerow([cells.get(c, "") for c in COLUMNS])
    return out.getvalue()


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _cells(row: Row, text: str, base: str | None, proxy: str | None) -> dict[str, str]:
    front, body, _ = parse(text)
    cells = {
        "name": row.name,
        "description": str(front.get("description") or ""),
        "type": row.bundle,
        "kind": row.kind,
        "id": row.path.removesuffix(".md"),
        "text": body,
    }
    for key in ("status", "grain"):
        if front.get(key) not in (None, ""):
            cells[key] = str(front[key])
    rest = {k: v for k, v in front.items() if k not in OWN_COLUMNS}
    if rest:
        cells["frontmatter"] = _json(rest)
    if row.bundle != "tool":
        return cells
    try:
        tool = Tool.from_frontmatter(front, body, bundle=row.bundle)
    except ToolError:
        return cells | {
            "frontmatter": _json({k: v for k, v in front.items() if k not in ("name", "description")})
        }
    where = {k: v for k, v in (("base", base), ("proxy", proxy)) if v}
    for way, form in forms(tool, example_args(tool), check_args=False, **where).items():
        if way in WAYS:
            cells[way] = _json(form)
    if tool.upstream is not None:
        cells["upstream"] = _json(tool.upstream)  # the contract itself, not one rendering of it
    cells["args"] = _json(tool.args_schema)
    if tool.cli_opt_in:
        cells["cli_opt_in"] = "true"
    return cells
