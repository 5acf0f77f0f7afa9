"""What the last sync of a folder read of each file of a bundle: size, mtime and hash, so the next
sync reads only the files whose stat changed since.

A bundle whose stat tag changed used to be read whole: every file opened, hashed and compared with
the tree, thousands of files read when one row of a large section was edited. The listing is
derived data, kept beside the sections' compiled indexes (`DocumentStore.save_index`) under the
bundle's name and a "/", which no bundle name holds (`catalog.folder.check_target`); lost,
unreadable or from an older sync, it only costs the reads it would have saved.

A file whose mtime falls within `RACY_NS` of the sync's start is listed without its stat: a write
in the same clock tick after the file was read would leave its size and mtime as listed (git's
"racily clean" entries), so it is read again at the next sync. The bundle's stat tag, which
decides whether a bundle is looked at at all, has always relied on size and mtime alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import zstandard

RACY_NS: Final = 2_000_000_000
"""A file changed this close to (or after) the sync's start is read again next time."""
UNKNOWN: Final = (-1, -1)
"""The stat of a racy file: equal to no real one."""

Listing = dict[str, tuple[int, int, str]]
"""Each path to the (size, mtime_ns, hash) it had when it was read."""


def key(bundle: str) -> str:
    """Where a bundle's listing is kept among the derived data (a name no bundle can have)."""
    return f"{bundle}/"


def pack(listing: Mapping[str, tuple[int, int, str]]) -> bytes:
    """Path, size, mtime and hash of each file, every field ended by a NUL: the one character no
    path holds (a file name may hold a newline)."""
    text = "".join(f"{p}\0{size}\0{mtime}\0{sha}\0" for p, (size, mtime, sha) in listing.items())
    return zstandard.ZstdCompressor(level=3).compress(text.encode("utf-8"))


def unpack(data: bytes) -> Listing:
    """The listing `pack` made; an empty one for anything else (then every file is read)."""
    try:
        fields = zstandard.ZstdDecompressor().decompress(data).decode("utf-8").split("\0")
        if len(fields) % 4 != 1 or fields[-1]:
            return {}
        it = iter(fields[:-1])
        return {
            path: (int(size), int(mtime), sha) for path, size, mtime, sha in zip(it, it, it, it, strict=True)
        }
    except (zstandard.ZstdError, UnicodeDecodeError, ValueError):
        return {}


def unchanged(listed: Listing, path: str, stat: tuple[int, int], current: str | None) -> str | None:
    """The hash of `path` when it need not be read again: listed with this very stat and a hash
    the tree still holds; None when it must be read."""
    was = listed.get(path)
    if was is None or (was[0], was[1]) != stat or was[2] != current:
        return None
    return current


def entry(stat: tuple[int, int], sha: str, started_ns: int) -> tuple[int, int, str]:
    """A file's line in the next listing: its stat, unless it changed too close to the sync's
    start to be trusted (`RACY_NS`)."""
    size, mtime = stat
    if mtime >= started_ns - RACY_NS:
        return (*UNKNOWN, sha)
    return (size, mtime, sha)
