"""`snapshot` and `history` count the same concepts: the rows, not every stored document (issue 44:
snapshot said 16 where history said 17, the root's aliases.toml counted as a concept)."""

from __future__ import annotations

from pathlib import Path

from catalog import folder as catalog_folder
from catalog.agent_api import AgentApi
from catalog.directory import open_directory
from storage.documents.model import UNSAFE_IN_PATH, is_concept
from tests.catalog.conftest import ROWS, make_folder, row


def counts(api: AgentApi) -> tuple[int, int]:
    """(concepts in `snapshot`, concepts of the newest revision in `history`)."""
    snapshot = int(api.snapshot().split(", ")[1].split()[0])
    header, newest = (line.split("\t") for line in api.history().splitlines()[:2])
    return snapshot, int(newest[header.index("concepts")])


def test_snapshot_history_and_commits_agree_on_the_concepts(tmp_path: Path) -> None:
    """A folder holding rows, aliases.toml and a note that is not a row: snapshot, history and each
    commit's answer give the number of rows, and move together when a row is written or deleted."""
    folder = make_folder(tmp_path / "d")
    (folder / "tool" / "notes.txt").write_text("not a row\n")
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        api = AgentApi(d)
        assert counts(api) == (len(ROWS), len(ROWS)) == (len(d.rows()), len(ROWS))
        wrote = api.write("inbox", "idea.md", row("Idea", "An idea."))
        assert f", {len(ROWS) + 1} concepts" in wrote and counts(api) == (len(ROWS) + 1, len(ROWS) + 1)
        sha = d.current_hash("inbox", "idea.md")
        deleted = api.delete("inbox", "idea.md", sha)
        assert f", {len(ROWS)} concepts" in deleted and counts(api) == (len(ROWS), len(ROWS))
    finally:
        d.close()


def test_the_store_and_the_index_agree_on_what_is_a_row() -> None:
    """The store's rule (`is_concept`) refuses the same path characters as the folder check the index
    lists rows by, and a document outside a bundle, or not Markdown, is no row."""
    assert UNSAFE_IN_PATH.pattern == catalog_folder._UNSAFE.pattern
    assert is_concept("tool", "a.md") and not is_concept("", "aliases.toml")
    assert not is_concept("tool", "notes.txt") and not is_concept("tool", "x\nforged.md")
