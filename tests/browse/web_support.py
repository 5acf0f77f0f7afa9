"""Helpers for the `browse --web` tests: the real server in a child process, and what a page shows.

The page draws the browser on a canvas (xterm.js), so its text is not in the DOM: `XTERM_HOOK` keeps
every object that gets an xterm `_core` (the terminal among them) as it is built, and `XTERM_TEXT` reads
the terminal's screen buffer line by line. `png_pixels` decodes a screenshot without an image library.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storage.ledger import open_ledger
from tests.browse.sample import fill
from tests.support.processes import spawn, stop_group

CHROMIUM = Path("/usr/bin/chromium")
XTERM_HOOK = """
window.__xterms = [];
Object.defineProperty(Object.prototype, '_core', {
  configurable: true,
  set(v) {
    Object.defineProperty(this, '_core', {value: v, writable: true, configurable: true, enumerable: true});
    window.__xterms.push(this);
  },
});
"""
XTERM_TEXT = """() => {
  const ok = x => {
    try { return x.buffer && x.buffer.active && x.buffer.active.getLine; } catch (e) { return false; }
  };
  const t = (window.__xterms || []).find(ok);
  if (!t) return '';
  const b = t.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) { const l = b.getLine(i); if (l) out.push(l.translateToString(true)); }
  return out.join('\\n');
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sample_home(folder: Path) -> dict[str, str]:
    """The environment of a flightlog whose Ledger holds the browse sample (five exchanges)."""
    ledger_url, blobs_url = f"sqlite:///{folder / 'ledger.db'}", (folder / "blobs").as_uri()
    ledger = open_ledger(ledger_url, blobs_url)
    fill(ledger)
    ledger.close()
    (folder / "home").mkdir(exist_ok=True)
    return {
        **os.environ,
        "FLIGHTLOG_HOME": str(folder / "home"),
        "FLIGHTLOG_LEDGER": ledger_url,
        "FLIGHTLOG_BLOBS": blobs_url,
    }


@contextmanager
def web_server(env: dict[str, str], port: int, *extra: str) -> Iterator[str]:
    """`flightlog browse --web` on 127.0.0.1:`port` until the block ends; yields the page's URL (with
    the key the server printed)."""
    argv = [sys.executable, "-m", "flightlog", "browse", "--web", "--listen", f"127.0.0.1:{port}", *extra]
    proc = spawn(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = printed_url(proc)
        yield url
    finally:  # the group: textual-serve's `flightlog browse` children went on running without their server
        stop_group(proc)


def printed_url(proc: subprocess.Popen[bytes]) -> str:
    """The page's URL (with its key) as the server prints it when it is ready."""
    assert proc.stdout is not None
    said = b""
    while line := proc.stdout.readline():
        said += line
        if b"serving the Ledger's browser on " in line:
            return line.decode().rsplit(" ", 1)[1].strip()
    raise AssertionError(f"the web server did not come up: {said.decode(errors='replace')}")


def png_pixels(png: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """Width, height and the RGB pixels of an 8-bit RGB or RGBA PNG (what Chromium writes)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            chunks += data
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), f"unexpected PNG form: depth {depth}, colour type {colour}"
    step = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(chunks), width * step
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - step] if i >= step else 0
            up, corner = prev[i], prev[i - step] if i >= step else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(line)
        prev = line
    pixels = [tuple(row[x * step : x * step + 3]) for row in rows for x in range(width)]
    return width, height, pixels  # type: ignore[return-value]
