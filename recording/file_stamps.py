"""A file's stamp: what a watcher compares to know a file changed without reading it.

The proxy re-reads its secrets and prices (`processing_watch`) and the door its refused hosts and
secrets (`door.live_config`) when an operator edits them; both look once a second or once a
call, so a look must be one `stat`, and a file replaced by a rename (a new inode, the same size and
second) must still count as changed.
"""

from __future__ import annotations

from pathlib import Path

Stamp = tuple[int, int, int] | None
"""(mtime in ns, size, inode), or None when there is no file."""


def stamp(path: Path | None) -> Stamp:
    """The stamp of `path`, or None when there is none (or it cannot be looked at)."""
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
