"""A payload received chunk by chunk (a streamed answer) stored with bounded memory.

Up to `INLINE_MAX` the chunks stay in memory and the spool gives back plain bytes, to travel inline
on an `Event`. Past that they go to a temporary file, hashed and UTF-8-checked as they arrive; on
close the file is compressed into a second temporary file and uploaded to the blob store, and the
spool gives back a `PayloadRef`. The upload happens before any row points at it.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import tempfile
from pathlib import Path
from typing import IO

import zstandard

from storage.blobstore import BlobStore
from storage.codec import LEVEL
from storage.events import INLINE_MAX, PayloadRef


class Spool:
    """Accepts `write(chunk)` calls, then `close()` stores the whole and returns its address."""

    def __init__(self, store: BlobStore, tmpdir: Path | None = None) -> None:
        self._store = store
        self._tmpdir = tmpdir
        self._memory = bytearray()
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._hash = hashlib.sha256()
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._text = True
        self._size = 0
        self._closed = False

    @property
    def size(self) -> int:
        """Bytes received so far."""
        return self._size

    def write(self, chunk: bytes) -> None:
        """Take the next chunk; spills to disk once the payload outgrows the inline limit."""
        if self._closed:
            raise ValueError("spool is closed")
        if not chunk:
            return
        self._size += len(chunk)
        self._hash.update(chunk)
        if self._text:
            try:
                self._utf8.decode(chunk, final=False)
            except UnicodeDecodeError:
                self._text = False
        if self._file is None:
            self._memory += chunk
            if len(self._memory) > INLINE_MAX:
                fd, name = tempfile.mkstemp(prefix="flightlog-spool-", dir=self._tmpdir)
                self._path = Path(name)
                self._file = os.fdopen(fd, "wb")
                self._file.write(self._memory)
                self._memory = bytearray()
        else:
            self._file.write(chunk)

    def close(self) -> bytes | PayloadRef:
        """Store what was written: the bytes themselves when small, else a `PayloadRef`."""
        if self._closed:
            raise ValueError("spool is closed")
        self._closed = True
        if self._file is None:
            return bytes(self._memory)
        text = self._text
        if text:
            try:
                self._utf8.decode(b"", final=True)
            except UnicodeDecodeError:
                text = False
        self._file.close()
        assert self._path is not None
        sha = self._hash.hexdigest()
        packed = self._path.with_suffix(".zst")
        try:
            compressor = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True)
            with open(self._path, "rb") as src, open(packed, "wb") as dst:
                compressor.copy_stream(src, dst, size=self._size)
            stored = packed.stat().st_size
            self._store.put_file(sha, packed)
        finally:
            for path in (self._path, packed):
                path.unlink(missing_ok=True)
        return PayloadRef(sha256=sha, size=self._size, text=text, stored_size=stored)

    def discard(self) -> None:
        """Drop what was written (the exchange will not be recorded with this payload)."""
        self._closed = True
        self._memory = bytearray()
        if self._file is not None:
            self._file.close()
        if self._path is not None:
            self._path.unlink(missing_ok=True)
