"""CPU time of a process from /proc, as every load benchmark reads it (Linux)."""

from __future__ import annotations

import os
from pathlib import Path


def process_cpu(pid: int, *, reaped: bool = False) -> float | None:
    """CPU seconds (user + system) of `pid`, with `reaped` those of the children it waited for too;
    None when the process is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = fields[11:15] if reaped else fields[11:13]
    return sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK")
