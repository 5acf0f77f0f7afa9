"""Seed 000's sheet layout: a row's name and description, one column per way of calling it, then its
type, kind and id; columns by header label, the seed's own labels read, any other refused by name.
A Directory exported to that layout and imported again gives the same rows (issue 44)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.agent_api import AgentApi
from catalog.contracts import FORM_NAMES, forms
from catalog.directory import Directory, open_directory
from catalog.errors import ImporterError
from catalog.importers.sheet import read_sheet
from catalog.importers.sheet_export import export_sheet
from catalog.importers.sheet_layout import WAY_COLUMNS
from catalog.tool import Tool, split_document
from tests.catalog.conftest import ROWS, cli, make_folder, row

SMS = Tool.from_frontmatter(
    {
        "name": "SMS_SEND",
        "description": "Send a text.",
        "args": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
        "upstream": {"method": "POST", "url": "https://sms.example/send", "body": {"to": "{to}"}},
    }
)


def seed_sheet(**cells: str) -> str:
    """A sheet in the seed's own words: name, description, REST, MCP, CLI, upstream, type, kind, id."""
    shown = forms(SMS, {"to": "+47"})
    values = {
        "Name": "SMS_SEND",
        "Description": "Send a text.",
        "REST": json.dumps(shown["dispatch"]),
        "MCP": json.dumps(shown["mcp_http"]),
        "CLI": json.dumps(shown["cli"]),
        "Apple Shortcut": json.dumps(shown["apple_shortcut"]),
        "Server-Sent Events": json.dumps(shown["sse"]),
        "upstream": json.dumps(SMS.upstream),
        "Type": "tool",
        "Kind": "tool",
        "ID": "sms_send",
    } | cells
    return "\t".join(values) + "\n" + "\t".join(values.values()) + "\n"


def test_the_seeds_layout_is_read_by_its_own_labels() -> None:
    """REST, MCP, CLI, Apple Shortcut, Server-Sent Events are ways; upstream is the row's contract;
    Type, Kind and ID place it. Only the contract is kept: the ways are derived from it again."""
    [(bundle, path, text)] = read_sheet(seed_sheet(), delimiter="\t")
    assert (bundle, path) == ("tool", "sms_send.md")
    tool = Tool.from_document(text)
    assert (tool.name, tool.upstream, dict(tool.args_schema)) == (
        SMS.name,
        SMS.upstream,
        dict(SMS.args_schema),
    )
    assert "dispatch" not in split_document(text)[0] and "kind" not in split_document(text)[0]


def test_every_form_is_a_way_column() -> None:
    """The layout has a way column for every form the contracts render (none left unreadable)."""
    assert set(WAY_COLUMNS) == set(FORM_NAMES)


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ({"Colour": "red"}, 'unknown column "Colour"'),
        ({"REST API": "{}"}, 'unknown column "REST API"'),
        ({"CLI": "yes"}, "the CLI cell is not valid JSON"),
        ({"CLI": '["flightlog", "call", "SMS_SEND"]'}, "the CLI cell is not a runnable form"),
        (
            {"REST": json.dumps(SMS.upstream)},
            "the REST cell calls https://sms.example/send, not flightlog's door",
        ),
        (
            {"Type": "article"},
            'a row of type "article" calls nothing: it cannot have a "Apple Shortcut" column',
        ),
    ],
)
def test_what_the_layout_does_not_say_is_refused_by_name(cells: dict[str, str], message: str) -> None:
    """A header that names no column, a way cell that is no runnable form or is the tool's own call
    under a door's label, a contract on a row that calls nothing: refused, naming the column."""
    header, values = seed_sheet().splitlines()
    columns = dict(zip(header.split("\t"), values.split("\t"), strict=True))
    for key, value in cells.items():
        columns[key] = value
    text = "\t".join(columns) + "\n" + "\t".join(columns.values()) + "\n"
    with pytest.raises(ImporterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_sheet(text, delimiter="\t")


LAYOUT_ROWS: dict[str, str] = {
    **ROWS,
    "tool/sms_send.md": SMS.to_document(),
    "tool/disk.md": Tool.from_frontmatter(
        {
            "name": "disk",
            "description": "Free space.",
            "args": {"type": "object", "properties": {"path": {"type": "string"}}},
            "upstream": {"method": "CLI", "command": ["df", "-h", "{path}"]},
            "cli": True,
            "owner": "ops",
        },
        "Runs df.\n",
    ).to_document(),
    "tool/add.md": Tool.from_frontmatter(
        {
            "name": "add",
            "description": "Adds.",
            "upstream": {"method": "MCP", "server": {"command": "npx", "args": ["srv"]}, "tool": "add"},
        }
    ).to_document(),
    "credential/sms_key.md": row("SMS_KEY", "The SMS key.", status="active", grain="secret"),
    "article/guide.md": row(
        "Guide", "How to text.", "See [[sms_send]] and [[disk]].\n\n## Steps\n\nOne.\n", kind="howto"
    ),
    "file/tests/test_cli.md": row("tests/test_cli.py", "The command line's tests.", links="[a, b]"),
}


def opened(tmp: Path, name: str, rows: dict[str, str]) -> Directory:
    return open_directory(f"sqlite:///{tmp / (name + '.db')}", make_folder(tmp / name, rows, aliases=None))


def rows_of(d: Directory) -> tuple[list[str], dict[str, Any]]:
    """The manifest's rows (no preamble: it names the folder and the snapshot), and each row's
    frontmatter fields that a tool is made of, and its body."""
    lines = [line for line in AgentApi(d).manifest().splitlines() if not line.startswith("#")]
    found: dict[str, Any] = {}
    for r in d.rows():
        doc = d.document(r.id)
        fields: dict[str, Any] = {"body": doc.body}
        if r.bundle == "tool":
            tool = Tool.from_frontmatter(doc.frontmatter, doc.body)
            fields |= {"args": dict(tool.args_schema), "upstream": tool.upstream, "cli": tool.cli_opt_in}
            fields["extra"] = dict(tool.extra)
        found[f"{r.bundle}/{r.path}"] = fields
    return lines, found


@pytest.mark.parametrize("delimiter", ["\t", ","])
def test_a_directory_exported_to_the_sheet_and_imported_is_the_same_rows(
    tmp_path: Path, delimiter: str
) -> None:
    """Tools of every contract shape (web, CLI, MCP), a command row's opt-in, an article with links and
    sections, a credential with status and grain, a file row in a subfolder, colliding ids: exported as
    one line each, with a column per way of calling, and imported into an empty folder, the manifest
    rows, the contracts, arguments and other frontmatter, and the bodies are the same."""
    first = opened(tmp_path, "first", LAYOUT_ROWS)
    try:
        sheet = export_sheet(first, delimiter=delimiter)
        before = rows_of(first)
    finally:
        first.close()
    header = sheet.splitlines()[0].split(delimiter)
    assert header[:3] == ["name", "description", "dispatch"] and header[-3:] == ["type", "kind", "id"]
    documents = read_sheet(sheet, delimiter=delimiter)
    again = opened(tmp_path, "again", {f"{b}/{p}": text for b, p, text in documents})
    try:
        assert rows_of(again) == before
        assert len(before[0]) == len(LAYOUT_ROWS) + 1  # the header line
    finally:
        again.close()


def test_the_command_line_exports_and_imports_the_sheet(tmp_path: Path, home: Path) -> None:
    """`flightlog directory export rows.tsv --sheet`, then `directory import sheet rows.tsv` into an
    empty folder: the same manifest rows."""
    source = make_folder(tmp_path / "source", LAYOUT_ROWS, aliases=None)
    out = cli(home, "directory", "export", str(tmp_path / "rows.tsv"), "--sheet", "--directory", str(source))
    assert out.returncode == 0 and out.stdout.startswith(f"exported {len(LAYOUT_ROWS)} rows"), out.stderr
    target = tmp_path / "target"
    target.mkdir()
    done = cli(home, "directory", "import", "sheet", str(tmp_path / "rows.tsv"), "--directory", str(target))
    assert done.returncode == 0, done.stderr
    manifests = [
        [x for x in cli(home, "manifest", "--directory", str(f)).stdout.splitlines() if not x.startswith("#")]
        for f in (source, target)
    ]
    assert manifests[0] == manifests[1] and len(manifests[0]) == len(LAYOUT_ROWS) + 1
    refused = cli(
        home, "directory", "export", str(tmp_path / "rows.txt"), "--sheet", "--directory", str(source)
    )
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and ".tsv or .csv" in refused.stderr
