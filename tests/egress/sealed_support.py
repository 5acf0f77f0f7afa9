"""What the sealed tests share: a folder the sandbox's user may walk into and write, and the places
this Python lives in, named to the seal."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534
"""Who a command sealed by root runs as when its working directory is root's (or nobody's)."""


@contextlib.contextmanager
def nobody_folder(prefix: str) -> Iterator[Path]:
    """A fresh folder owned by nobody, searchable by all (a sealed command's home and working
    directory); removed at exit."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    os.chown(folder, NOBODY, NOBODY)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def python_reads() -> list[str]:
    """`--read` for every place this Python runs from: its installation (where root's sandbox user
    cannot walk), its virtualenv and the checkout. A clone under /tmp (as CI may make) is otherwise
    out of the seal's world: the sandbox gives the command a private /tmp."""
    places = dict.fromkeys([sys.base_prefix, sys.prefix, str(ROOT)])
    return [arg for place in places for arg in ("--read", place)]
