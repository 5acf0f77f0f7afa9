"""How fast this machine's CPU is right now: one fixed pure-Python loop, timed.

A shared machine (a VM on a busy host) can run the same code 1.6x slower from one quarter of an hour
to the next: on 2026-12-01 this loop took 210 ms at one time and 352 ms fifteen minutes later, and
`bench.ledger` moved from 37k to 22k events/s on the same commit. The interleaved ratios cancel
such drift; absolute figures do not. The benchmarks print this probe before and after their runs,
so two runs' absolute figures can be told apart from the machine's speed.
"""

from __future__ import annotations

import time

LOOP = 3_000_000
"""Iterations of the fixed loop: ~0.2 s on the 2-core bench machine at its fastest."""


def _loop() -> int:
    total = 0
    for i in range(LOOP):
        total += i * i % 7
    return total


def probe_ms(repeat: int = 3) -> float:
    """CPU milliseconds of the fixed loop, the best of `repeat` (the least disturbed)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        _loop()
        best = min(best, time.process_time() - start)
    return best * 1000


def probe_line(when: str) -> str:
    """One line naming the machine's speed now (lower is faster)."""
    return (
        f"cpu probe ({when}): {probe_ms():.0f} ms for the fixed loop (lower is faster; see bench/_probe.py)"
    )
