"""`manifest()` over MCP is capped and framed like `get` (seed 002: a read can no longer flood the
context); the library, the HTTP API and the MCP resource stay whole (their callers are programs, or
a client preloading it on purpose)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from catalog.agent_api import MCP_READ_CAP, AgentApi
from catalog.directory import open_directory
from catalog.slices import lines_page
from tests.catalog.conftest import make_folder, row

FRAME = re.compile(r"@@ manifest \[(\d+)\.\.(\d+) of (\d+)\]\n")
ROWS = 25_000


def test_a_page_ends_at_a_line_end_and_frames_itself() -> None:
    """Pages never split a line; the whole text from 0 is unframed; a line longer than the page is cut
    rather than answer nothing; past the end is an empty page at the total."""
    text = "a\tb\nccc\tddd\neeee\n"
    assert lines_page("manifest", text, None, None) == text
    assert lines_page("manifest", text, 0, 100) == text
    assert lines_page("manifest", text, 0, 10) == "@@ manifest [0..4 of 17]\na\tb\n"
    assert lines_page("manifest", text, 4, 10) == "@@ manifest [4..12 of 17]\nccc\tddd\n"
    assert lines_page("manifest", text, 12, 3) == "@@ manifest [12..15 of 17]\neee"
    assert lines_page("manifest", text, 99, 10) == "@@ manifest [17..17 of 17]\n"
    assert lines_page("manifest", text, -5, 4) == "@@ manifest [0..4 of 17]\na\tb\n"


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Directory folder of 25,000 tool rows (about 1.8 MB of manifest)."""
    root = tmp_path_factory.mktemp("big")
    rows = {
        f"tool/row_{n:05d}.md": row(f"ROW_{n:05d}", f"Row number {n}, a tool that does thing {n % 97}.")
        for n in range(ROWS)
    }
    return make_folder(root / "dir", rows, aliases=None)


def test_manifest_over_mcp_at_25k_rows_comes_in_framed_pages(tmp_path: Path, big_folder: Path) -> None:
    """Over MCP stdio (`flightlog mcp`, the official client): the first manifest answer holds at most
    15,000 characters of rows, framed `@@ manifest [0..end of total]`; following `offset: end` to the
    total gives back, page by page, exactly the whole manifest the library answers, every row whole on
    one page. The resource is the whole manifest, unpaged."""
    env = {**os.environ, "FLIGHTLOG_HOME": str(tmp_path / "home"), "FLIGHTLOG_DIRECTORY": str(big_folder)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "flightlog", "mcp"], env=env)

    async def script(s: ClientSession) -> dict[str, Any]:
        pages: list[str] = []
        offset = 0
        while True:
            answer = await s.call_tool("manifest", {"offset": offset} if offset else {})
            assert answer.is_error is False
            text = answer.content[0].text  # type: ignore[union-attr]
            pages.append(text)
            start, end, total = (int(x) for x in FRAME.match(text).groups())  # type: ignore[union-attr]
            assert start == offset and len(text) - len(FRAME.match(text).group(0)) == end - start  # type: ignore[union-attr]
            if end == total:
                break
            offset = end
        resource = await s.read_resource("flightlog://manifest")
        return {"pages": pages, "resource": resource.contents[0].text}  # type: ignore[union-attr]

    async def main() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await script(s)

    out = anyio.run(main)
    d = open_directory(f"sqlite:///{tmp_path / 'home' / 'ledger.db'}", big_folder)
    try:
        whole = AgentApi(d).manifest()
        assert AgentApi(d, cap=None).manifest() == whole and not whole.startswith("@@")
    finally:
        d.close()
    pages: list[str] = out["pages"]
    assert len(whole) > 1_500_000 and whole.count("\n") > ROWS
    bodies = [FRAME.sub("", p, count=1) for p in pages]
    assert all(0 < len(b) <= MCP_READ_CAP and b.endswith("\n") for b in bodies)
    assert "".join(bodies) == whole
    assert len(pages) == pytest.approx(len(whole) / MCP_READ_CAP, rel=0.05, abs=2)
    assert out["resource"] == whole


def test_a_small_manifest_over_mcp_is_whole_and_a_limit_pages_it(tmp_path: Path) -> None:
    """Under the cap the MCP manifest is the plain TSV as before; `limit` asks for smaller pages."""
    folder = make_folder(tmp_path / "d")
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        capped, plain = AgentApi(d, cap=MCP_READ_CAP), AgentApi(d)
        assert capped.manifest() == plain.manifest() and not plain.manifest().startswith("@@")
        page = capped.manifest(limit=200)
        match = FRAME.match(page)
        assert match is not None and int(match.group(2)) <= 200 and page.endswith("\n")
        assert plain.manifest().startswith(page[match.end() :])
    finally:
        d.close()
