"""The derived index: rebuilt per section only when that section's tag changes; the folder form."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from catalog.directory import open_directory
from storage.documents import metadata, sha256_text
from storage.engine import make_engine
from storage.migrate import migrate
from tests.catalog.conftest import make_folder, row


def index_tags(url: str) -> dict[str, str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT bundle, tag FROM directory_index")).all())
    finally:
        engine.dispose()


def test_index_rebuilt_only_for_the_section_that_changed(tmp_path: Path) -> None:
    """First open builds every section; reopening builds none; a write rebuilds only its own section."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    folder = make_folder(tmp_path / "d")
    first = open_directory(url, folder)
    assert first.rebuilt == ("article", "tool")
    first.close()
    tags = index_tags(url)

    again = open_directory(url, folder)
    assert again.rebuilt == ()
    again.write("article", "new.md", row("New", "A new article."))
    assert again.rebuilt == ("article",)
    after = index_tags(url)
    assert after["tool"] == tags["tool"] and after["article"] != tags["article"]

    other = open_directory(url, folder)  # another process: the stored index is current
    assert other.rebuilt == () and other.row("new").name == "New"
    other.close()
    again.close()


def test_another_instance_sees_a_commit_on_its_next_read(tmp_path: Path) -> None:
    """Two Directories on one store: a commit by one is visible to the other's next read."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    a, b = open_directory(url), open_directory(url)
    try:
        a.write("inbox", "x.md", row("X", "x"))
        assert b.row("x").name == "X" and b.snapshot() == a.snapshot()
    finally:
        a.close()
        b.close()


def test_folder_edits_sync_on_open_and_writes_go_through(tmp_path: Path) -> None:
    """An edited file is committed on the next open; a write lands in the folder as well."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    folder = make_folder(tmp_path / "d")
    d = open_directory(url, folder)
    head = d.revision
    d.close()

    target = folder / "tool" / "get_weather.md"
    target.write_text(row("GET_WEATHER", "Weather, edited by hand."))
    os.utime(target, ns=(1, 1))
    d = open_directory(url, folder)
    assert d.revision == head + 1 and d.row("get_weather").summary == "Weather, edited by hand."
    assert d.rebuilt == ("tool",)
    (folder / "article" / "ledger_row.md").unlink()
    d.close()

    d = open_directory(url, folder)
    assert "article/ledger_row" not in {r.id for r in d.rows()} and d.row("ledger_row").bundle == "tool"
    d.write("article", "fresh.md", row("Fresh", "Written by an agent."))
    assert (folder / "article" / "fresh.md").read_text() == row("Fresh", "Written by an agent.")
    revision = d.revision
    d.close()
    d = open_directory(url, folder)  # the written-through file is not seen as an edit
    assert d.revision == revision
    d.close()


def test_export_writes_the_folder_form_back(tmp_path: Path) -> None:
    """Exporting gives back every document byte for byte, aliases.toml included."""
    folder = make_folder(tmp_path / "d")
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        n = d.export(tmp_path / "out")
    finally:
        d.close()
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert n == len(files)
    for rel in files:
        assert (tmp_path / "out" / rel).read_bytes() == (folder / rel).read_bytes()


def test_rows_without_frontmatter_are_rows_with_warnings(tmp_path: Path) -> None:
    """A document without frontmatter is still listed (by its path) and the load says why it is odd."""
    folder = make_folder(tmp_path / "d", {"article/plain.md": "just text\n"}, aliases=None)
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        assert d.row("plain").name == "plain"
        assert any("no frontmatter" in w for w in d.warnings)
        done = d.write("article", "bad.md", "---\nname: [unclosed\n---\n")
        assert any("not valid YAML" in w for w in done.warnings)
        assert d.current_hash("article", "bad.md") == sha256_text("---\nname: [unclosed\n---\n")
    finally:
        d.close()


def test_migration_0002_matches_the_query_tables(ledger_url: str) -> None:
    """The tables the migration creates have exactly the columns the store's queries use."""
    engine = make_engine(ledger_url)
    try:
        migrate(engine)
        inspector = sa.inspect(engine)
        for table in metadata.sorted_tables:
            migrated = {c["name"] for c in inspector.get_columns(table.name)}
            assert migrated == {c.name for c in table.columns}, table.name
            assert set(inspector.get_pk_constraint(table.name)["constrained_columns"]) == {
                c.name for c in table.primary_key
            }
    finally:
        engine.dispose()
