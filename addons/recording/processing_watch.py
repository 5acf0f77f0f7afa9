"""Redaction and prices re-read while the proxy runs, when their files change.

An operator who rotates a secret (or adds one) in the secrets file expects the running proxy to redact
it from the next request on, not after a restart; the door does the same for its own copy
(`addons.door.live_config`). Once a second the proxy stats the secrets file (the named one, or
FLIGHTLOG_HOME/secrets.env, which may appear later) and the price override; when a stamp moved it
builds the processing again and hands it to the writer process. A file that turns unreadable or
malformed keeps the last good values, said once in one line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from addons.errors import AddonError
from addons.recording.capture_setup import processing, processing_files
from addons.recording.events import Processing
from addons.recording.file_stamps import Stamp, stamp

log = logging.getLogger("flightlog.capture")

INTERVAL = 1.0
"""Seconds between two looks: one stat per file, nothing read unless a stamp moved."""


def stamps(opts: Any) -> tuple[tuple[Path | None, Path], tuple[Stamp, Stamp]]:
    """The files processing reads now, and their stamps (the secrets file may appear or go)."""
    files = processing_files(opts)
    return files, (stamp(files[0]), stamp(files[1]))


async def watch(opts: Any, apply: Callable[[Processing], None], interval: float = INTERVAL) -> None:
    """Re-read processing whenever its files change, until cancelled."""
    last = stamps(opts)
    failed = False
    while True:
        await asyncio.sleep(interval)
        now = stamps(opts)
        if now == last:
            continue
        last = now
        try:
            fresh = processing(opts)
        except AddonError as e:
            if not failed:
                log.warning("flightlog: kept the last good secrets and prices: %s", e)
            failed = True
            continue
        failed = False
        apply(fresh)
        log.info("flightlog: secrets and prices re-read (%s)", now[0][0] or "no secrets file")
