"""What the sealed tests share: a folder the sandbox's user may walk into and write."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
