"""A followed folder: every kind of edit is seen at the next ask, by inotify and by the fallback."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog.directory import open_directory
from catalog.folder_watch import InotifyWatch, StatWatch, Watch

EDITS: dict[str, Callable[[Path], None]] = {
    "in place": lambda d: (d / "tool" / "a.md").write_text("---\nname: a\ndescription: edited\n---\n"),
    "new file": lambda d: (d / "tool" / "b.md").write_text("---\nname: b\ndescription: b\n---\n"),
    "removed": lambda d: (d / "tool" / "a.md").unlink(),
    "renamed over": lambda d: (
        (d / "tool" / ".a.tmp").write_text("---\nname: a\ndescription: renamed\n---\n"),
        os.replace(d / "tool" / ".a.tmp", d / "tool" / "a.md"),
    ),
    "new bundle": lambda d: ((d / "flow").mkdir(), (d / "flow" / "f.md").write_text("---\nname: f\n---\n")),
    "touched": lambda d: os.utime(d / "tool" / "a.md", ns=(1, 1)),
}


def folder(tmp_path: Path) -> Path:
    (tmp_path / "d" / "tool" / "deep").mkdir(parents=True)
    (tmp_path / "d" / "tool" / "a.md").write_text("---\nname: a\ndescription: a\n---\n")
    return tmp_path / "d"


@pytest.mark.parametrize("kind", [InotifyWatch, StatWatch])
@pytest.mark.parametrize("edit", list(EDITS))
def test_every_edit_is_seen_once(tmp_path: Path, kind: Callable[[Path], Watch], edit: str) -> None:
    """Nothing changed: False; after the edit: True, once; then False again."""
    top = folder(tmp_path)
    watch = kind(top)
    assert watch.changed() is False
    EDITS[edit](top)
    assert watch.changed() is True
    assert watch.changed() is False
    watch.close()


def test_a_folder_made_later_is_watched_too(tmp_path: Path) -> None:
    """inotify: a subfolder created after the watch began is watched once its creation is read, so
    a file written into it later is seen."""
    top = folder(tmp_path)
    watch = InotifyWatch(top)
    (top / "article" / "x").mkdir(parents=True)
    assert watch.changed() is True
    (top / "article" / "x" / "y.md").write_text("---\nname: y\n---\n")
    assert watch.changed() is True
    watch.close()


def test_a_followed_directory_reads_an_edit_at_the_next_read(tmp_path: Path) -> None:
    """`Directory.follow()`: the next read after an edit of the folder answers the edit, with no
    open in between."""
    top = folder(tmp_path)
    followed = open_directory(f"sqlite:///{tmp_path / 'l.db'}", top)
    followed.follow()
    EDITS["in place"](top)
    assert "edited" in followed.document("a").text
    EDITS["new file"](top)
    assert {r.name for r in followed.rows("tool")} == {"a", "b"}
    followed.close()
