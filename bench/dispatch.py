"""What the dispatch door costs: token size and verification, and a call through the door vs direct.

`python -m bench.dispatch [CALLS]` (default 300): a local upstream on loopback; the same POST made
directly with httpx, then through `Dispatcher.dispatch` (render, bind, refused-host check, the call,
four events written synchronously to a SQLite Ledger), then with a `uses <= N` token (verification plus
the Ledger count under the lock). Prints per-call p50/p99 side by side and the ratios.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from authority import tokens
from catalog.tool import Tool
from door.dispatch import Dispatcher
from storage.ledger import open_ledger
from tests.dispatch.upstreams import raw_upstream

ROOT = b"b" * 32


def timed(n: int, one: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        one()
        out.append((time.perf_counter() - start) * 1000)
    return out


def row(p: list[float], q: float) -> float:
    return sorted(p)[min(len(p) - 1, int(q * len(p)))]


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 300
    caveats = ["tools = weather", "uses <= 1000000", "expires < 2026-12-31T00:00:00Z", "task = T1"]
    token = tokens.mint(ROOT, caveats)
    text = token.encode()
    verify = timed(2000, lambda: tokens.verify(tokens.decode(text), ROOT))
    print(
        f"token with {len(caveats)} caveats: {len(text)} characters;"
        f" decode+verify p50 {row(verify, 0.5) * 1000:.0f} µs"
    )
    with raw_upstream() as (base, _), tempfile.TemporaryDirectory() as tmp:
        tool = Tool.from_frontmatter(
            {
                "name": "weather",
                "description": "bench",
                "args": {"type": "object", "properties": {"city": {"type": "string"}}},
                "upstream": {
                    "method": "POST",
                    "url": base + "/w?key=[KEY]",
                    "headers": {"x-api-key": "[KEY]"},
                    "body": {"city": "{city}"},
                },
            }
        )
        ledger = open_ledger(f"sqlite:///{Path(tmp) / 'l.db'}", (Path(tmp) / "blobs").as_uri())
        door = Dispatcher({"weather": tool}.get, ledger, {"KEY": "bench-secret-value"}, ROOT)
        call = {"tool": "weather", "args": {"city": "Bern"}}
        with httpx.Client(trust_env=False) as client:
            direct = timed(
                n,
                lambda: client.post(
                    base + "/w?key=bench-secret-value", headers={"x-api-key": "x"}, json={"city": "Bern"}
                ),
            )
        plain = timed(n, lambda: door.dispatch(call))
        counted = timed(n, lambda: door.dispatch(call, token=text))
        ledger.close()
    print(f"{'calls':>6} {'direct httpx':>14} {'door':>10} {'door+token':>12}   (ms per call)")
    for label, q in (("p50", 0.5), ("p99", 0.99)):
        print(f"{label:>6} {row(direct, q):>14.2f} {row(plain, q):>10.2f} {row(counted, q):>12.2f}")
    base_ms = statistics.median(direct)
    print(
        f"door/direct {statistics.median(plain) / base_ms:.1f}x, door+token/direct "
        f"{statistics.median(counted) / base_ms:.1f}x (the door writes 4 events per call synchronously)"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
