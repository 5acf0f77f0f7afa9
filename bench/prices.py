"""What pricing a model answer costs the writer: reading its usage, then pricing it with the user's
override (plain arithmetic, as the old shipped table did) and with genai-prices, side by side.

Run as `python -m bench.prices`. Prints microseconds per answer for each and the ratios to reading
the usage (the work every model answer already paid before prices).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from formats.usage import extract_usage
from recording.prices import PriceTable

URL = "https://api.anthropic.com/v1/messages"
USAGE = {"input_tokens": 12, "cache_creation_input_tokens": 3000, "cache_read_input_tokens": 20000}
ANSWER = json.dumps({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hello! " * 50}], "usage": {**USAGE, "output_tokens": 40},
}).encode()  # fmt: skip


def _us(fn: Callable[[], object], seconds: float = 1.0) -> float:
    """Microseconds per call of fn, best of batches of 100 for about `seconds`."""
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(100):
            fn()
        best = min(best, (time.perf_counter() - start) / 100)
    return best * 1e6


def main() -> None:
    usage = extract_usage(URL, b"{}", ANSWER, "application/json", None)
    assert usage is not None and usage.cache_read == 20000
    at = datetime.now(UTC)
    library = PriceTable.load()
    library.warm()
    with tempfile.TemporaryDirectory() as folder:
        own = Path(folder) / "prices.toml"
        own.write_text('[models]\n"claude-sonnet-4-5" = { input = 3, output = 15, cache_read = 0.3 }\n')
        override = PriceTable.load(own)
    assert library.cost_of(usage, at) is not None and override.cost_of(usage, at) is not None
    read = _us(lambda: extract_usage(URL, b"{}", ANSWER, "application/json", None))
    by_override = _us(lambda: override.cost_of(usage, at))
    by_library = _us(lambda: library.cost_of(usage, at))
    rows = [
        (f"read usage (Anthropic answer, {len(ANSWER)} B)", read, ""),
        ("price with an override entry", by_override, f"  ({by_override / read:.2f}x reading)"),
        ("price with genai-prices", by_library, f"  ({by_library / read:.2f}x reading)"),
    ]
    for name, us, ratio in rows:
        print(f"{name:42} {us:8.1f} us{ratio}")
    print(f"{'genai-prices / override':42} {by_library / by_override:8.1f}x")


if __name__ == "__main__":
    main()
