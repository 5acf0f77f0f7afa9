"""Seed 002's agent API, strict: an argument the schema does not name is refused in one line naming
the accepted ones (never dropped), over the official MCP client (in process) and over HTTP."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from catalog.directory import Directory, open_directory
from catalog.http_api import handle
from catalog.mcp_server import build_server
from tests.catalog.conftest import make_folder, row


def session(directory: Directory, script: Any) -> Any:
    async def main() -> Any:
        async with Client(build_server(directory, database_tools=True, authorize=None)) as client:
            return await script(client)

    return anyio.run(main)


def text(result: Any) -> tuple[bool, str]:
    return bool(result.is_error), result.content[0].text


def test_transact_honours_the_seeds_expected_revision(directory: Directory) -> None:
    """transact(changes, expectedRevision): a stale expectedRevision refuses the commit (it used to be
    dropped silently and commit on a moved head); the snake_case name is refused naming the real one."""
    stale = directory.revision
    directory.write("inbox", "a.md", row("A", "a"))
    change = {"operation": "write", "bundle": "inbox", "path": "b.md", "content": row("B", "b")}

    async def script(c: Client) -> list[tuple[bool, str]]:
        return [
            text(await c.call_tool("transact", {"changes": [change], "expectedRevision": stale})),
            text(await c.call_tool("transact", {"changes": [change], "expected_revision": stale})),
        ]

    (moved, moved_text), (wrong, wrong_text) = session(directory, script)
    assert moved and "revision" in moved_text and "\n" not in moved_text.strip()
    assert wrong and wrong_text == (
        'transact: argument "expected_revision": is not one of its arguments; '
        "the accepted ones are changes, expectedRevision"
    )
    assert directory.rows("inbox") and [r.id for r in directory.rows("inbox")] == ["a"]


def test_restore_and_get_refuse_bad_arguments_in_one_line(directory: Directory) -> None:
    """restore with a string revision answers one line (not pydantic's multi-line dump); get with an
    argument it does not take is refused rather than ignored; a missing one names the accepted ones."""

    async def script(c: Client) -> list[tuple[bool, str]]:
        return [
            text(await c.call_tool("restore", {"revision": "abc", "expectedRevision": 1})),
            text(await c.call_tool("get", {"ids": ["get_weather"], "offest": 5})),
            text(await c.call_tool("restore", {"revision": 1})),
            text(await c.call_tool("search", {"query": 3})),
        ]

    answers = session(directory, script)
    assert answers == [
        (True, 'restore: argument "revision": must be an integer, not a string'),
        (
            True,
            'get: argument "offest": is not one of its arguments; '
            "the accepted ones are ids, section, offset, limit, find",
        ),
        (
            True,
            'restore: argument "expectedRevision": is required; '
            "the accepted ones are revision, expectedRevision",
        ),
        (True, 'search: argument "query": must be a string, not an integer'),
    ]


def test_server_info_carries_flightlogs_version(directory: Directory) -> None:
    """initialize answers serverInfo with flightlog's installed version, not an empty string."""

    async def script(c: Client) -> Any:
        return c.server_info

    info = session(directory, script)
    assert (info.name, info.version) == ("flightlog", version("flightlog"))


def test_a_tool_written_outside_tool_is_refused_with_the_reason(directory: Directory) -> None:
    """A row saying kind: tool in article/ would be listed as a tool nothing can call: the write is
    refused, saying where callable rows live; the same row under tool/ is accepted."""
    doc = row("SEND_FAX", "Send a fax.", kind="tool")

    async def script(c: Client) -> list[tuple[bool, str]]:
        return [
            text(await c.call_tool("write", {"bundle": "article", "path": "fax.md", "content": doc})),
            text(await c.call_tool("write", {"bundle": "tool", "path": "fax.md", "content": doc})),
        ]

    (refused, why), (ok, _) = session(directory, script)
    assert refused and why == (
        "refused: article/fax.md says kind: tool, but only rows in tool/ are callable; "
        "write it as tool/fax.md or give it another kind"
    )
    assert not ok and directory.tool("SEND_FAX").frontmatter["kind"] == "tool"


def test_search_carries_score_layer_and_matched_on_mcp_and_http(directory: Directory) -> None:
    """Every direct hit carries the manifest columns, pos, and the resolver's score, layer and words,
    on MCP search and on HTTP find alike (one resolver, every door)."""

    async def script(c: Client) -> str:
        return text(await c.call_tool("search", {"query": "send imessage", "k": 1}))[1]

    over_mcp = session(directory, script)
    status, _, body = handle(
        "GET", "/api/directory/find", {"q": ["send imessage"], "k": ["1"]}, {}, b"", directory
    )
    assert status == 200 and body.decode() == over_mcp
    lines = [line.split("\t") for line in over_mcp.splitlines() if not line.startswith("#")]
    header, hit = lines[0], dict(zip(lines[0], lines[1], strict=True))
    assert header[-4:] == ["pos", "score", "layer", "matched"]
    assert (hit["id"], hit["score"], hit["layer"], hit["matched"]) == (
        "imsg_send",
        "764",
        "alias",
        "imessage send",
    )
    assert lines[-1][-4:] == ["-", "-", "linked", "-"]  # imsg_read, linked from imsg_send


def test_bare_directory_route_lists_the_rows(directory: Directory) -> None:
    """GET /api/directory (where the no-match sentence points) lists every row; an unknown route's
    404 names it once, not with the prefix doubled."""
    status, headers, body = handle("GET", "/api/directory", {}, {}, b"", directory)
    assert status == 200 and headers["content-type"].startswith("text/tab-separated-values")
    assert {r.id for r in directory.rows()} <= {line.split("\t")[0] for line in body.decode().splitlines()}
    status, _, body = handle("GET", "/api/directory/nope", {}, {}, b"", directory)
    assert status == 404 and json.loads(body)["error"] == "no route /api/directory/nope"


def test_http_bodies_refuse_fields_they_do_not_take(directory: Directory) -> None:
    """An HTTP transact with a misspelt expectedRevision is a 400 naming the accepted fields, never a
    commit that ignored it."""
    change = {"operation": "write", "bundle": "inbox", "path": "c.md", "content": row("C", "c")}
    raw = json.dumps({"changes": [change], "expectedRevison": 1}).encode()
    status, _, body = handle("POST", "/api/directory/transact", {}, {}, raw, directory)
    assert status == 400 and json.loads(body)["error"] == (
        'unknown field "expectedRevison"; the accepted ones are changes, expected_revision, expectedRevision'
    )
    assert directory.rows("inbox") == []


def test_a_folder_row_saying_kind_tool_outside_tool_is_a_load_warning(tmp_path: Path) -> None:
    """A folder can hold what a write would refuse: loading it warns that the row is not callable."""
    folder = make_folder(
        tmp_path / "d", {"article/fax.md": row("SEND_FAX", "Send a fax.", kind="tool")}, None
    )
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        assert d.warnings == ("article/fax.md: kind: tool outside tool/ is not callable (move it to tool/)",)
    finally:
        d.close()
