"""An exchange's request as a curl command a person can paste: the recorded head and body, secrets left
as the `[NAME]` the Ledger holds (fill them in, or run it through the dispatch door, which does).
"""

from __future__ import annotations

import shlex
from typing import Final

SKIPPED: Final = frozenset({"host", "content-length", "connection", "proxy-connection", "transfer-encoding"})
"""Header fields curl writes itself from the URL and the body."""


def fields(head: bytes) -> list[tuple[str, str]]:
    """The header fields of an exact head, in order, duplicates kept."""
    out = []
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            out.append((name.strip(), value.strip()))
    return out


def curl(method: str | None, url: str | None, head: bytes, body: bytes | None) -> str:
    """`curl -X METHOD URL -H ... --data-binary ...`; a binary body is named, not pasted."""
    parts = ["curl"]
    method = (method or "GET").upper()
    if method != "GET" or body:
        parts += ["-X", method]
    parts.append(shlex.quote(url or "http://unknown/"))
    for name, value in fields(head):
        if name.lower() not in SKIPPED:
            parts += ["-H", shlex.quote(f"{name}: {value}")]
    note = ""
    if body:
        try:
            parts += ["--data-binary", shlex.quote(body.decode("utf-8"))]
        except UnicodeDecodeError:
            parts += ["--data-binary", "@body.bin"]
            note = f"\n# the {len(body):,}-byte body is binary: save it as body.bin (flightlog ledger blob)"
    if any(name.lower() == "content-encoding" for name, _ in fields(head)):
        note += "\n# the body is sent as recorded, still content-encoded"
    return " \\\n  ".join(_pairs(parts)) + note


def _pairs(parts: list[str]) -> list[str]:
    """Options with their values on one line each, so the command reads top to bottom."""
    lines: list[str] = []
    i = 0
    while i < len(parts):
        if parts[i].startswith("-") and i + 1 < len(parts):
            lines.append(f"{parts[i]} {parts[i + 1]}")
            i += 2
        else:
            lines.append(parts[i])
            i += 1
    if len(lines) > 1 and lines[0] == "curl":
        lines[0] = f"curl {lines.pop(1)}" if not lines[1].startswith("-") else "curl"
    return lines
