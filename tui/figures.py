"""How figures are written in the browser: cost with its significant digits, sizes, durations, tokens.

Pure functions, so every format is tested without a terminal. A cost is never rounded to zero: a call
that cost $0.000042 reads `$0.000042`, not `$0.0000`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

SPARKS: Final = "▁▂▃▄▅▆▇█"


def cost(value: float | None) -> str:
    """Dollars: at least four decimals, and enough more to show two significant digits."""
    if value is None:
        return ""
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    decimals = min(12, max(4, 1 - math.floor(math.log10(abs(value)))))
    return f"${value:.{decimals}f}"


def spend(value: float, unpriced: int) -> str:
    """A summed cost and the calls in it no price is known for: `$0.0123 + ? (3 unknown)`, never a
    sum that read them as $0; empty when nothing was priced or unpriced."""
    if not unpriced:
        return cost(value) if value else ""
    unknown = f"? ({unpriced:,} unknown)"
    return f"{cost(value)} + {unknown}" if value else unknown


def size(value: int | None) -> str:
    """Bytes as a short figure: 512 B, 1.2 KiB, 5.0 MiB."""
    if value is None:
        return ""
    if value < 1024:
        return f"{value} B"
    scaled, unit = float(value), "B"
    for unit in ("KiB", "MiB", "GiB"):  # noqa: B007 - the unit the loop stops at is the one shown
        scaled /= 1024
        if scaled < 1024:
            break
    return f"{scaled:.1f} {unit}" if scaled < 100 else f"{scaled:.0f} {unit}"


def duration(ms: float | None) -> str:
    """Milliseconds below a second, seconds below a minute, then minutes and seconds."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f}ms"
    if ms < 10_000:
        return f"{ms / 1000:.2f}s"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    return f"{int(ms // 60_000)}m{int(ms % 60_000 // 1000):02d}s"


def tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return ""
    return f"{tokens_in or 0:,}→{tokens_out or 0:,}"


def token_details(
    cache_read: int | None, cache_write: int | None, reasoning: int | None, cache_write_1h: int | None = None
) -> str:
    """The parts of a call's tokens that prices treat apart, those its answer stated (a provider that
    says nothing of its cache is not shown as reading none): `cache read 1,200 · reasoning 50`."""
    hour = f" (1h {cache_write_1h:,})" if cache_write and cache_write_1h else ""  # priced above 5-minute ones
    parts = [("cache read", cache_read, ""), ("cache write", cache_write, hour), ("reasoning", reasoning, "")]
    return " · ".join(f"{name} {n:,}{more}" for name, n, more in parts if n is not None)


def spark(values: Sequence[float], width: int) -> str:
    """A text sparkline of `values` squeezed (each cell the sum of its share) into `width` cells."""
    if not values or width <= 0:
        return ""
    cells = [0.0] * min(width, len(values))
    for i, v in enumerate(values):
        cells[i * len(cells) // len(values)] += v
    top = max(cells)
    if top <= 0:
        return SPARKS[0] * len(cells)
    return "".join(" " if v <= 0 else SPARKS[min(7, int(v / top * 7.999))] for v in cells)
