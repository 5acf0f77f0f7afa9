"""A folder sync reads only the files whose size or mtime changed since the last sync read them, and
never trusts a stat that a write in the same clock tick could have left unchanged."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import catalog.folder_sync as sync_module
from catalog import file_listing
from catalog.directory import open_directory
from catalog.errors import BadFolder
from storage.documents import open_document_store
from tests.catalog.conftest import make_folder, row

HOUR_NS = 3600 * 10**9


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The file names the folder sync reads from now on."""
    seen: list[str] = []
    real: Callable[[str], str | None] = sync_module.read_text

    def counting(path: str) -> str | None:
        seen.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(sync_module, "read_text", counting)
    yield seen


def aged(folder: Path) -> Path:
    """Every file of `folder` as if written an hour ago (as a folder usually is)."""
    past = time.time_ns() - HOUR_NS
    for path in folder.rglob("*.md"):
        os.utime(path, ns=(past, past))
    return folder


def rows(n: int) -> dict[str, str]:
    return {f"tool/t_{i:03d}.md": row(f"TOOL_{i:03d}", f"Does thing {i}.") for i in range(n)}


def names(url: str, folder: Path) -> list[str]:
    d = open_directory(url, folder)
    try:
        return [r.name for r in d.rows("tool")]
    finally:
        d.close()


def test_an_edit_reads_the_edited_file_alone(tmp_path: Path, reads: list[str], ledger_url: str) -> None:
    """300 files synced an hour after they were written; one is edited, one added, one removed:
    the next sync reads the two that are new or changed, and the Directory holds all three changes
    (on either engine: the listing is kept as derived data in the Ledger's database)."""
    folder = aged(make_folder(tmp_path / "d", rows(300), aliases=None))
    url = ledger_url
    assert len(names(url, folder)) == 300 and len(reads) == 300
    reads.clear()
    (folder / "tool" / "t_150.md").write_text(row("ZEBRA_COUNT", "Stripes."), encoding="utf-8")
    (folder / "tool" / "t_300.md").write_text(row("OKAPI_COUNT", "Okapis."), encoding="utf-8")
    (folder / "tool" / "t_007.md").unlink()
    listed = names(url, folder)
    assert sorted(reads) == ["t_150.md", "t_300.md"]
    assert "ZEBRA_COUNT" in listed and "OKAPI_COUNT" in listed and "TOOL_007" not in listed
    assert "TOOL_150" not in listed and len(listed) == 300


def test_a_file_removed_between_the_scan_and_its_read_is_a_removal_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor saving by rename or an agent deleting a row can remove a file after the sync
    listed it and before it reads it: the open goes on, the file counts as removed (an edited row
    gone too), and the next open, whose scan no longer lists it, agrees."""
    folder = aged(make_folder(tmp_path / "d", rows(20), aliases=None))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    assert len(names(url, folder)) == 20
    (folder / "tool" / "t_005.md").write_text(row("ZEBRA_COUNT", "Stripes."), encoding="utf-8")
    (folder / "tool" / "t_900.md").write_text(row("OKAPI_COUNT", "Okapis."), encoding="utf-8")
    real_scan = sync_module.scan

    def scan_then_remove(where: Path, bundles: object = None) -> object:
        scanned = real_scan(where, bundles)  # type: ignore[arg-type]
        (folder / "tool" / "t_005.md").unlink()
        (folder / "tool" / "t_900.md").unlink()
        return scanned

    monkeypatch.setattr(sync_module, "scan", scan_then_remove)
    listed = names(url, folder)
    assert "OKAPI_COUNT" not in listed and "ZEBRA_COUNT" not in listed and "TOOL_005" not in listed
    assert len(listed) == 19
    monkeypatch.setattr(sync_module, "scan", real_scan)
    assert names(url, folder) == listed


def test_a_file_rewritten_in_the_same_clock_tick_is_read_again(tmp_path: Path, reads: list[str]) -> None:
    """A file changed just before a sync is listed without its stat: when it is rewritten with the
    same size and mtime (two writes in one tick of a coarse clock), the next sync still reads it
    and records the second content."""
    folder = aged(make_folder(tmp_path / "d", rows(20), aliases=None))
    url = f"sqlite:///{tmp_path / 'l.db'}"
    names(url, folder)
    target = folder / "tool" / "t_005.md"
    target.write_text(row("FIRST_WRITE", "Same size."), encoding="utf-8")
    stamp = target.stat().st_mtime_ns
    assert "FIRST_WRITE" in names(url, folder)
    target.write_text(row("OTHER_WRITE", "Same size."), encoding="utf-8")
    os.utime(target, ns=(stamp, stamp))  # the same size and mtime as the sync saw
    (folder / "tool" / "t_011.md").write_text(row("TOOL_011", "Changed too."), encoding="utf-8")
    reads.clear()
    listed = names(url, folder)
    assert "t_005.md" in reads and "OTHER_WRITE" in listed and "FIRST_WRITE" not in listed


def test_an_unreadable_listing_costs_reads_and_loses_nothing(tmp_path: Path, reads: list[str]) -> None:
    """The listing is derived data: garbage in its place makes the sync read every file again, and
    the edit is still found."""
    folder = aged(make_folder(tmp_path / "d", rows(30), aliases=None))
    url = f"sqlite:///{tmp_path / 'l.db'}"
    names(url, folder)
    store = open_document_store(url, f"folder:{folder}")
    try:
        assert file_listing.key("tool") in store.index_data([file_listing.key("tool")])
        store.save_index(file_listing.key("tool"), "files", b"not a listing")
    finally:
        store.close()
    (folder / "tool" / "t_003.md").write_text(row("ZEBRA_COUNT", "Stripes."), encoding="utf-8")
    reads.clear()
    assert "ZEBRA_COUNT" in names(url, folder)
    assert len(reads) == 30


def test_a_listing_round_trips_and_refuses_what_it_did_not_write() -> None:
    """Paths with spaces, newlines (a file name may hold one) and non-ASCII survive; anything else
    unpacks as nothing listed."""
    listing = {
        "a b/é.md": (10, 1_700_000_000_000_000_000, "f" * 64),
        "c.md": (-1, -1, "0" * 64),
        "two\nlines.md": (7, 1_700_000_000_000_000_001, "a" * 64),
    }
    assert file_listing.unpack(file_listing.pack(listing)) == listing
    assert file_listing.unpack(b"junk") == {}
    now = time.time_ns()
    assert file_listing.entry((3, now - 10**9), "h", now) == (-1, -1, "h")
    assert file_listing.entry((3, now - 10 * 10**9), "h", now) == (3, now - 10 * 10**9, "h")


def test_a_file_name_that_is_not_utf8_is_one_clear_refusal(tmp_path: Path) -> None:
    """A name the file system holds as bytes that are not UTF-8 cannot be a row's path: the open
    says which file and what to do, in one line, instead of a traceback."""
    folder = make_folder(tmp_path / "d", rows(3), aliases=None)
    with open(os.fsencode(folder / "tool") + b"/bad\xff.md", "w", encoding="utf-8") as f:
        f.write(row("BAD", "Its name is not UTF-8."))
    with pytest.raises(BadFolder) as refused:
        open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    message = str(refused.value)
    assert "\n" not in message and "bad\\udcff.md" in message and "not a UTF-8 file name" in message


@pytest.mark.parametrize("name", ["x\nforged\ttool\tcommand.md", "x\tforged.md", "x\u2028forged.md"])
def test_a_file_name_that_would_forge_manifest_lines_is_one_clear_refusal(tmp_path: Path, name: str) -> None:
    """A folder from elsewhere holds a file whose name has a line break and tabs. A row's id is its
    path, so the manifest every agent reads showed a forged row (tried: `x`, then a line reading
    `forged_row<tab>tool<tab>command...` with the summary the name spelled). The open refuses,
    naming the file in one line, as it does a name that is not UTF-8."""
    folder = make_folder(tmp_path / "d", rows(3), aliases=None)
    (folder / "tool" / name).write_text(row("FORGED", "Its name holds a line break."), encoding="utf-8")
    with pytest.raises(BadFolder) as refused:
        open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    message = str(refused.value)
    assert "\n" not in message and "control character" in message and "rename it" in message
    assert ascii(str(folder / "tool" / name)) in message
