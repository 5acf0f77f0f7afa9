"""Redaction and prices re-read while the proxy runs, when their files change.

An operator who rotates a secret (or adds one) in the secrets file expects the running proxy to redact
it from the next request on, not after a restart; the door does the same for its own copy
(`door.live_config`). A look stats the secrets file (the named one, or
FLIGHTLOG_HOME/secrets.env, which may appear later) and the price override; when a stamp moved it
builds the processing again and hands it to the writer process. A file that turns unreadable or
malformed keeps the last good values, said once in one line.

A lone proxy looks once a second itself (`ProcessingWatch.run`). One of `--workers N` does not: its
supervisor stats the files (`watched`, which the worker reports) once a second for all of them and
nudges every worker to look only when a stamp moved: an idle proxy wakes once a second, not N times.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from recording.capture_setup import processing, processing_files
from recording.errors import RecordingError
from recording.events import Processing
from recording.file_stamps import Stamp, stamp
from storage.locations import flightlog_home, secrets_path

log = logging.getLogger("flightlog.capture")

INTERVAL = 1.0
"""Seconds between two looks: one stat per file, nothing read unless a stamp moved."""


def stamps(opts: Any) -> tuple[tuple[Path | None, Path], tuple[Stamp, Stamp]]:
    """The files processing reads now, and their stamps (the secrets file may appear or go)."""
    files = processing_files(opts)
    return files, (stamp(files[0]), stamp(files[1]))


def watched(opts: Any) -> list[Path]:
    """Every file whose change means a look: the secrets file named, else the default one whether
    it exists or not (it may appear), and the price override."""
    secrets, prices = processing_files(opts)
    return [secrets or secrets_path(flightlog_home()), prices]


class ProcessingWatch:
    """The last stamps seen and what to do when they move: re-read, or keep the last good values."""

    def __init__(self, opts: Any, apply: Callable[[Processing], None]) -> None:
        self.opts = opts
        self.apply = apply
        self.last = stamps(opts)
        self.failed = False

    def look(self) -> None:
        """Stat the files; re-read and apply the processing when a stamp moved since the last look."""
        now = stamps(self.opts)
        if now == self.last:
            return
        self.last = now
        try:
            fresh = processing(self.opts)
        except RecordingError as e:
            if not self.failed:
                log.warning("flightlog: kept the last good secrets and prices: %s", e)
            self.failed = True
            return
        self.failed = False
        self.apply(fresh)
        log.info("flightlog: secrets and prices re-read (%s)", now[0][0] or "no secrets file")

    async def run(self, interval: float = INTERVAL) -> None:
        """Look every `interval` seconds, until cancelled (a lone proxy, which nobody nudges)."""
        while True:
            await asyncio.sleep(interval)
            self.look()
