"""Start-up shortcuts never serve stale rows: the stdlib SQLite reads, the skipped folder check
(`catalog.prescan`) and the index decoded part by part answer exactly what a full open answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from catalog.directory import open_directory
from catalog.folder import scan
from catalog.index import Index, SectionIndex, compile_section
from catalog.prescan import prescan
from storage.documents import open_document_store
from storage.documents.reads import open_sqlite_reads, sqlite_file
from tests.catalog.conftest import cli, make_folder, row


def find_ids(home: Path, folder: Path, *words: str) -> list[str]:
    out = cli(home, "find", "--json", "--directory", str(folder), *words)
    assert out.returncode in (0, 1), out.stderr
    return [h["id"] for h in json.loads(out.stdout)["hits"]]


def test_find_sees_a_file_changed_added_and_removed_since_the_last_open(tmp_path: Path, home: Path) -> None:
    """An in-place edit (the folder's own mtime unchanged), a new file and a deleted file each show in
    the next `flightlog find`, although the open before stored stat tags and an index, which find
    loads while a forked child checks the folder (on a machine of more than one core)."""
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
    """`flightlog mcp` checks the folder in a forked child while the SDK loads; a file edited in place
    after the last open is still what its search answers, not the stored index."""
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


def _prescan_alone(folder: Path, split: bool = False) -> object:
    """`prescan(folder, split=split)()` in a fresh single-threaded interpreter, as `flightlog mcp`
    (one child) and `flightlog find` (split in two) run it (this test process has other threads by
    now, and with those prescan rightly declines to fork)."""
    code = "import json, sys; from pathlib import Path; from catalog.prescan import prescan; "
    code += "print(json.dumps(prescan(Path(sys.argv[1]), split=sys.argv[2] == 'split')()))"
    done = subprocess.run(
        [sys.executable, "-c", code, str(folder), "split" if split else "whole"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize("split", [False, True])
def test_prescan_gives_the_tags_a_scan_gives(tmp_path: Path, split: bool) -> None:
    """The forked children's stat tags are the ones `scan` computes, whether one child stats every
    file or two each stat half; after an edit (of either half) they differ; a missing folder
    gives None (the parent's own scan then says what is wrong)."""
    folder = make_folder(tmp_path / "d")
    tags = {b: f.stat_tag for b, f in scan(folder).items()}
    assert _prescan_alone(folder, split) == tags
    names = sorted(p.name for p in (folder / "tool").glob("*.md"))
    for name in names[:2]:  # one document of each half (every second one in path order)
        (folder / "tool" / name).write_text(row("IMSG_READ", f"Edited {name}."), encoding="utf-8")
        edited = _prescan_alone(folder, split)
        assert isinstance(edited, dict) and edited["tool"] != tags["tool"], name
        assert edited == {b: f.stat_tag for b, f in scan(folder).items()}
        tags = edited
    assert _prescan_alone(tmp_path / "missing", split) is None


def test_the_halves_make_the_tag_and_a_file_gone_meanwhile_is_no_error(tmp_path: Path) -> None:
    """Each half's tag covers every second document of a bundle in path order (nested folders and
    the root `aliases.toml` too), and the halves make the tag `scan` gives. A document listed but
    removed before its stat is left out, as a scan a moment later would not have found it, rather
    than failing the open: the tag then differs and the sync reads the folder again."""
    from catalog import folder as folder_module

    folder = make_folder(tmp_path / "d")
    (folder / "article" / "deep" / "er").mkdir(parents=True)
    (folder / "article" / "deep" / "er" / "note.md").write_text(row("NOTE", "Deep."), encoding="utf-8")
    (folder / "aliases.toml").write_text('"weather" = ["get_weather"]\n', encoding="utf-8")
    scanned = scan(folder)
    halves = [folder_module.part_tags(folder, k) for k in range(folder_module.PARTS)]
    assert set(halves[0]) == set(scanned) >= {"", "tool", "article"}
    for bundle, found in scanned.items():
        assert folder_module.combine([h[bundle] for h in halves]) == found.stat_tag
    assert "deep/er/note.md" in scanned["article"].files
    listed = dict(folder_module._bundles(folder, ["tool"]))["tool"]
    Path(listed[0][1]).unlink()
    stated = folder_module._stated(listed)
    assert stated[0] is None and all(f is not None for f in stated[1:])
    assert listed[0][0] not in scan(folder)["tool"].files


def test_prescan_declines_to_fork_beside_another_thread(tmp_path: Path) -> None:
    """With another thread alive the child could inherit a held lock: no fork, None (a full scan)."""
    folder = make_folder(tmp_path / "d")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert prescan(folder)() is None
    finally:
        stop.set()
        other.join()


def test_a_stale_prescan_is_never_trusted(tmp_path: Path, home: Path) -> None:
    """Tags that do not match the stored ones make the open scan and sync as always."""
    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_directory(url, folder).close()
    (folder / "tool" / "imsg_read.md").write_text(row("IMSG_READ", "Read the yak herd."), encoding="utf-8")
    d = open_directory(url, folder, prescanned=lambda: {"tool": "not what is stored"})
    try:
        assert d.find("yak herd")[0].row.id == "imsg_read"
    finally:
        d.close()


def test_a_moved_prescan_tag_scans_only_that_bundle_again(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child's tags say which bundles changed: the open scans those again itself (an edit
    there is committed) and keeps the child's tags for the rest, which it does not scan twice."""
    import catalog.directory

    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    open_directory(url, folder).close()
    (folder / "tool" / "imsg_read.md").write_text(row("IMSG_READ", "Read the yak herd."), encoding="utf-8")
    tags = {b: f.stat_tag for b, f in scan(folder).items()}
    asked: list[object] = []

    def spied(where: Path, bundles: Any = None) -> Any:
        asked.append(None if bundles is None else sorted(bundles))
        return scan(where, bundles)

    monkeypatch.setattr(catalog.directory, "scan", spied)
    d = open_directory(url, folder, prescanned=lambda: tags)
    try:
        assert d.find("yak herd")[0].row.id == "imsg_read"
    finally:
        d.close()
    assert asked == [["tool"]]
    store = open_document_store(url, f"folder:{folder.resolve()}")
    try:
        assert store.folder_tags() == tags  # every bundle's, the next open compares with
    finally:
        store.close()


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
        head = before.head()
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
        sha = store.hash_of("tool", "imsg_read.md")
        assert sha is not None and "herd yaks" in store.contents([sha])[sha]
        index_tag = store.index_data(["tool"])["tool"][0]
        assert store.folder_tags() and index_tag.startswith(store.sections()["tool"] + ":")  # a format suffix
    finally:
        store.close()


def test_stdlib_reads_answer_what_sqlalchemy_reads_answer(tmp_path: Path, home: Path) -> None:
    """Every read of `storage.documents.reads` equals the SQLAlchemy store's for the same space, and
    only a plain SQLite file already at the newest schema is opened that way."""
    folder = make_folder(tmp_path / "d")
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    d = open_directory(url, folder)
    space = f"folder:{folder.resolve()}"
    d.close()
    lite = open_sqlite_reads(url, space)
    assert lite is not None
    sql = open_document_store(url, space).sql
    try:
        hashes = list(sql.tree().values())
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
            assert read(lite) == read(sql)
        lite.close()  # a closed store reopens on its next read, as a disposed engine does
        assert lite.head() == sql.head()
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
