"""What authority costs a call: the folder check a followed Directory makes before each call, and
the gate's judgement with and without a use spent in the Ledger's database.

`python -m bench.gate [FILES]` (default 25000): a Directory folder of 50 and of FILES rows, asked
`changed()` with nothing changed, by the inotify watch and by the stat-tag fallback, interleaved in
rounds; then `authority.gate.admit` for a Ledger read with a token of five caveats (no uses; one use
spent per call in a SQLite Ledger; the same on PostgreSQL when FLIGHTLOG_BENCH_PG names one).
Prints p50/p99 per ask in microseconds.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from authority import tokens
from authority.caveats import format_instant
from authority.gate import Ask, admit
from catalog.folder_watch import InotifyWatch, StatWatch
from storage.ledger import open_ledger
from storage.token_uses import TokenUses

ROOT = b"g" * 32


def timed(n: int, one: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        one()
        out.append((time.perf_counter() - start) * 1e6)
    return sorted(out)


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def folder(root: Path, files: int) -> Path:
    (root / "tool").mkdir(parents=True)
    for i in range(files):
        (root / "tool" / f"row{i:05d}.md").write_text(f"---\nname: row{i}\ndescription: d\n---\n")
    return root


def watches(files: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for size in (50, files):
            top = folder(Path(tmp) / f"d{size}", size)
            inotify, stat = InotifyWatch(top), StatWatch(top)
            rounds = {"inotify": [], "stat tags": []}  # type: dict[str, list[float]]
            n = 2000 if size <= 1000 else 5
            for _ in range(5):  # interleaved: the machine's load falls on both alike
                rounds["inotify"] += timed(n, inotify.changed)
                rounds["stat tags"] += timed(n, stat.changed)
            for name, values in rounds.items():
                values.sort()
                p50, p99 = pct(values, 0.5), pct(values, 0.99)
                print(f"folder of {size} rows, {name}: p50 {p50:.1f} us, p99 {p99:.1f} us")
            inotify.close()


def gate(url: str, label: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ledger = open_ledger(url, (Path(tmp) / "b").as_uri())
        book = TokenUses(ledger.engine)
        expires = format_instant(datetime.now(UTC) + timedelta(hours=1))
        common = ["grants = ledger", "doors = http", f"expires < {expires}", "task = T1"]
        plain = tokens.mint(ROOT, [*common, "tools = weather"]).encode()
        limited = tokens.mint(ROOT, [*common, "uses <= 100000"]).encode()
        ask = Ask("ledger", "http", datetime.now(UTC))
        rounds = {"no uses": [], "a use spent": []}  # type: dict[str, list[float]]
        for _ in range(5):
            rounds["no uses"] += timed(200, lambda: admit(plain, ask, ROOT, book))
            rounds["a use spent"] += timed(200, lambda: admit(limited, ask, ROOT, book))
        for name, values in rounds.items():
            values.sort()
            print(f"gate on {label}, {name}: p50 {pct(values, 0.5):.0f} us, p99 {pct(values, 0.99):.0f} us")
        ledger.close()


def main(argv: list[str]) -> None:
    files = int(argv[0]) if argv else 25000
    watches(files)
    with tempfile.TemporaryDirectory() as tmp:
        gate(f"sqlite:///{tmp}/l.db", "SQLite")
    if pg := os.environ.get("FLIGHTLOG_BENCH_PG"):
        gate(pg, "PostgreSQL")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
