"""Start-up shortcuts never serve stale rows: the stdlib SQLite reads, the stored stat tags and the
index decoded part by part answer exactly what a full open answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from catalog.directory import open_directory
from catalog.folder import scan
from catalog.index import Index, SectionIndex
from catalog.section_compile import compile_section
from storage.documents import open_document_store
from storage.documents.reads import open_sqlite_reads, sqlite_file
from tests.catalog.conftest import cli, make_folder, row


def find_ids(home: Path, folder: Path, *words: str) -> list[str]:
    out = cli(home, "find", "--json", "--directory", str(folder), *words)
    assert out.returncode in (0, 1), out.stderr
    return [h["id"] for h in json.loads(out.stdout)["hits"]]


def test_find_sees_a_file_changed_added_and_removed_since_the_last_open(tmp_path: Path, home: Path) -> None:
    """An in-place edit (the folder's own mtime unchanged), a new file and a deleted file each show in
    the next `flightlog find`, although the open before stored stat tags and an index."""
    folder = make_folder(tmp_path / "d")
    assert find_ids(home, folder, "get", "weather")[0] == "get_weather"
    assert find_ids(home, folder, "zebra", "forecast") == []
    target = folder / "tool" / "get_weather.md"
    target.write_text(row("ZEBRA_FORECAST", "Stripes for a city."), encoding="utf-8")  # in place
    assert find_ids(home, folder, "zebra", "forecast")[0] == "get_weather"
    (folder / "tool" / "okapi_count.md").write_text(row("OKAPI_COUNT", "How many okapis."), encoding="utf-8")
    assert find_ids(home, folder, "okapi")[0] == "okapi_count"
    (folder / "tool" / "okapi_count.md").unlink()
    assert find_ids(home, folder, "okapi") == []


def test_mcp_search_sees_a_file_changed_since_the_last_open(tmp_path: Path, home: Path) -> None:
    """`flightlog mcp` checks the folder while the SDK loads; a file edited in place after the last
    open is what its search answers, not the stored index."""
    folder = make_folder(tmp_path / "d")
    assert find_ids(home, folder, "get", "weather")[0] == "get_weather"
    (folder / "tool" / "imsg_read.md").write_text(row("IMSG_READ", "Read the yak herd."), encoding="utf-8")
    env = {**os.environ, "FLIGHTLOG_HOME": str(home), "FLIGHTLOG_DIRECTORY": str(folder)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "flightlog", "mcp"], env=env)

    async def main() -> Any:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await s.list_tools()
            return await s.call_tool("search", {"query": "yak herd"})

    found = anyio.run(main)
    assert not found.is_error
    assert "imsg_read" in found.content[0].text


def test_the_tag_moves_with_an_edit_and_a_file_gone_meanwhile_is_no_error(tmp_path: Path) -> None:
    """A scan finds nested folders and the root `aliases.toml`; editing any one document moves its
    bundle's stat tag and no other's. A document listed but removed before its stat is left out,
    as a scan a moment later would not have found it, rather than failing the open: the tag then
    differs and the sync reads the folder again."""
    from catalog import folder as folder_module

    folder = make_folder(tmp_path / "d")
    (folder / "article" / "deep" / "er").mkdir(parents=True)
    (folder / "article" / "deep" / "er" / "note.md").write_text(row("NOTE", "Deep."), encoding="utf-8")
    (folder / "aliases.toml").write_text('"weather" = ["get_weather"]\n', encoding="utf-8")
    scanned = scan(folder)
    assert set(scanned) >= {"", "tool", "article"}
    assert "deep/er/note.md" in scanned["article"].files
    tags = {b: f.stat_tag for b, f in scanned.items()}
    for name in sorted(p.name for p in (folder / "tool").glob("*.md"))[:2]:
        (folder / "tool" / name).write_text(row("IMSG_READ", f"Edited {name}."), encoding="utf-8")
        now = {b: f.stat_tag for b, f in scan(folder).items()}
        assert now["tool"] != tags["tool"] and {b: t for b, t in now.items() if b != "tool"} == {
            b: t for b, t in tags.items() if b != "tool"
        }, name
        tags = now
    listed = dict(folder_module._bundles(folder, ["tool"]))["tool"]
    Path(listed[0][1]).unlink()
    stated = folder_module._stated(listed)
    assert stated[0] is None and all(f is not None for f in stated[1:])
    assert listed[0][0] not in scan(folder)["tool"].files


def test_reading_a_directory_never_imports_sqlalchemy(tmp_path: Path, home: Path) -> None:
    """Opening an unchanged folder Directory on SQLite and answering a query loads no SQLAlchemy,
    nor the Ledger's event classes (`storage.events`: six dataclasses, ~7 ms of every `find`'s
    imports, when the Directory needs only `storage.escaped.needs_escape`)."""
    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_directory(url, folder).close()
    code = (
        "import sys\nfrom catalog.directory import open_directory\n"
        f"d = open_directory({url!r}, {str(folder)!r})\n"
        "print(d.find('get weather')[0].row.id, 'sqlalchemy' in sys.modules,\n"
        "      'storage.events' in sys.modules)\nd.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["get_weather", "False", "False"]


def test_a_directory_edited_in_its_folder_syncs_without_importing_sqlalchemy(
    tmp_path: Path, home: Path
) -> None:
    """After a row of the folder is edited, the next open syncs it (a commit, the section's index
    recompiled and saved, the folder's tags saved) on the standard library alone, and what it
    wrote reads back through SQLAlchemy as it would have been written there: the revision, its
    time (UTC) and the changed document."""
    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_directory(url, folder).close()
    space = f"folder:{folder.resolve()}"
    before = open_document_store(url, space).sql
    try:
        head = before.reads.head()
    finally:
        before.close()
    edited = folder / "tool" / "imsg_read.md"
    edited.write_text(edited.read_text().replace("Read", "Read and herd yaks in", 1))
    code = (
        "import sys\nfrom catalog.directory import open_directory\n"
        f"d = open_directory({url!r}, {str(folder)!r})\n"
        "print(d.find('herd yaks')[0].row.id, 'sqlalchemy' in sys.modules)\nd.close()\n"
    )
    started = datetime.now(UTC)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["imsg_read", "False"]
    store = open_document_store(url, space).sql
    try:
        (revision, *_) = store.history(limit=1)
        assert revision.revision == head + 1 and revision.parent == head
        assert revision.at.tzinfo is not None and started - timedelta(seconds=1) <= revision.at
        assert revision.at <= datetime.now(UTC) and revision.changes == 1
        reads = store.reads
        sha = reads.hash_of("tool", "imsg_read.md")
        assert sha is not None and "herd yaks" in reads.contents([sha])[sha]
        index_tag = reads.index_data(["tool"])["tool"][0]
        assert reads.folder_tags() and index_tag.startswith(reads.sections()["tool"] + ":")  # a format suffix
    finally:
        store.close()


def test_reads_on_a_stdlib_connection_answer_what_the_pools_connection_answers(
    tmp_path: Path, home: Path
) -> None:
    """The one implementation of the reads (`storage.documents.reads`) gives the same answers on a
    connection of its own as on the one the SQLAlchemy store's pool lends, and only a plain SQLite
    file already at the newest schema is opened the stdlib way."""
    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    d = open_directory(url, folder)
    space = f"folder:{folder.resolve()}"
    d.close()
    lite = open_sqlite_reads(url, space)
    assert lite is not None
    sql = open_document_store(url, space).sql
    pooled = sql.reads
    try:
        hashes = list(pooled.tree().values())
        assert pooled.head() > 0 and ("tool", "imsg_read.md") in pooled.tree()
        for read in (
            lambda s: s.head(),
            lambda s: s.sections(),
            lambda s: s.index_data(["tool", "article", "nope"]),
            lambda s: s.tree(),
            lambda s: s.tree("tool"),
            lambda s: s.hash_of("tool", "imsg_read.md"),
            lambda s: s.hash_of("tool", "absent.md"),
            lambda s: s.contents(hashes),
            lambda s: s.bundle_documents("article"),
            lambda s: s.folder_tags(),
        ):
            assert read(lite) == read(pooled)
        lite.close()  # a closed store reopens on its next read, as a disposed engine does
        assert lite.head() == pooled.head()
    finally:
        lite.close()
        sql.close()
    assert sqlite_file("sqlite:///rel.db") == Path("rel.db")
    assert sqlite_file("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert sqlite_file("sqlite://") is None and sqlite_file("postgresql+psycopg://h/db") is None
    # an absent file is not opened here: SQLAlchemy creates and migrates it
    assert open_sqlite_reads(f"sqlite:///{tmp_path / 'new.db'}", space) is None


def test_a_section_decoded_part_by_part_lists_what_was_compiled(tmp_path: Path) -> None:
    """Rows, names, orders and postings read back from the compact layout equal what went in."""
    docs = [
        ("a.md", "h1", row("ALPHA_SEND", "Send alpha.", "alpha beta\nnew line [[b]]")),
        ("b.md", "h2", row("beta", 'Quote " and \\ and é.', "beta")),
        ("sub/c.md", "h3", "no frontmatter at all\n"),
    ]
    data, _ = compile_section("tool", docs)
    s = SectionIndex("tool", "t", data)
    assert s.stems == ["a", "b", "sub/c"] and len(s.rows) == 3
    assert s.names == ["ALPHA_SEND", "beta", "c"]
    assert s.rows[1][2] == "beta" and s.rows[1][7] == 'Quote " and \\ and é.'
    assert list(s.name_words["alpha"]) == [0] and "zzz" not in s.name_words
    assert set(s.text_words["beta"]) == {0, 1}
    index = Index([s])
    assert [r.id for r in index.rows()] == ["a", "b", "sub/c"]
    assert index.row("tool", 0).links == ("b",)
    assert index.locate("tool/sub/c") == ("tool", 2) and index.locate("ALPHA_SEND") == ("tool", 0)
