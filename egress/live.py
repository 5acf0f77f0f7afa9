"""The policy the proxy judges by, re-read when its file (or the retired-hosts list) changes.

A look is two `stat`s; the proxy looks once a second. An edit that does not parse (or names a
malformed host) keeps the last good policy and says so in one line, once per edit: a typo never
opens the gate, and never closes it by surprise either. At start a bad file is an error instead
(the proxy does not start on a policy it cannot read).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from egress.errors import PolicyFileError
from egress.policy import Policy
from egress.policy_file import load_policy_file
from recording.file_stamps import Stamp, stamp

log = logging.getLogger("flightlog.egress")

INTERVAL = 1.0
RETIRED_FILE = "refused_hosts.txt"


class LivePolicy:
    """The current policy of one file, and the stamps it was read at."""

    def __init__(self, path: Path, home: Path | None) -> None:
        self.path = path
        self.home = home
        self._stamps = self._look_at()
        self.policy: Policy = load_policy_file(path, home)

    def _look_at(self) -> tuple[Stamp, Stamp]:
        return stamp(self.path), stamp(self.home / RETIRED_FILE if self.home else None)

    def look(self) -> bool:
        """Re-read when a stamp moved; True when a new policy is in force."""
        now = self._look_at()
        if now == self._stamps:
            return False
        self._stamps = now
        try:
            fresh = load_policy_file(self.path, self.home)
        except PolicyFileError as e:
            log.warning("flightlog: %s; keeping the last good egress policy", e)
            return False
        self.policy = fresh
        log.info("flightlog: egress policy re-read from %s (%d rules)", self.path, len(fresh.rules))
        return True

    async def run(self, interval: float = INTERVAL) -> None:
        """Look every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.look()
