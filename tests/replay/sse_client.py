"""Reads an SSE stream through the proxy variables and prints its events and when each arrived.

Prints one JSON line: {"events": [...], "gaps": [seconds between consecutive events]}.
"""

from __future__ import annotations

import itertools
import json
import sys
import time

import httpx


def main() -> None:
    arrivals: list[float] = []
    events: list[str] = []
    with httpx.Client(timeout=30) as client, client.stream("GET", sys.argv[1]) as answer:
        for line in answer.iter_lines():
            if line.startswith("data:"):
                arrivals.append(time.monotonic())
                events.append(line[5:].strip())
    gaps = [round(b - a, 4) for a, b in itertools.pairwise(arrivals)]
    print(json.dumps({"events": events, "gaps": gaps}))


if __name__ == "__main__":
    main()
