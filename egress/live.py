"""The policy the proxy judges by, re-read when its file (or the retired-hosts list) changes; failing closed.

A look is two `stat`s; the proxy looks once a second. What a change can do:

- a file that parses is the policy from then on (one line says so, with its rule count);
- a file that does not parse (or names a malformed host), that disappeared, or that is empty (an
  editor truncates before it writes: the proxy may look in between) leaves the last good policy in
  force, and one line says so, once per change: a typo or a deleted file never opens the gate.
  The same holds for a retired-hosts list that was there and disappeared or emptied. To lift a
  policy, write the one wanted (`default = "allow"` and no rules allows everything);
- at start, a file named with `--policy` that is missing or empty, or any file that does not parse,
  is an error instead: the proxy does not start on a policy it cannot read. The default file
  (`FLIGHTLOG_HOME/egress.toml`) may be absent: then there is no policy until it appears.

With `--workers N`, the workers re-read quietly and the supervisor says what changed, once for the
proxy (`quiet`, `addons.workers`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

from egress.errors import PolicyFileError
from egress.policy import Policy
from egress.policy_file import FILE_NAME, load_policy_file, policy_text
from recording.file_stamps import Stamp, stamp

LOG_NAME: Final = "flightlog.egress.policy"
log = logging.getLogger(LOG_NAME)

INTERVAL = 1.0
RETIRED_FILE = "refused_hosts.txt"


def policy_path(named: str, home: Path) -> Path:
    """The policy file: the one named (`--policy FILE`), else `home`'s `egress.toml`."""
    return Path(named).expanduser() if named else home / FILE_NAME


class LivePolicy:
    """The current policy of one file, and the stamps it was read at."""

    def __init__(
        self, path: Path, home: Path | None, *, named: bool = False, say: Callable[[str], None] | None = None
    ) -> None:
        self.path = path
        self.home = home
        self.say = say or (lambda line: log.info("%s", line))
        self._stamps = self._look_at()
        if named:
            text = policy_text(path)
            if text is None:
                raise PolicyFileError(f"egress policy file not found: {path}")
            if not text.strip():
                raise PolicyFileError(f'{path} is empty: write the policy (default = "allow" allows all)')
        self.policy: Policy = load_policy_file(path, home)
        self._present = self._files_present()

    @property
    def retired_path(self) -> Path | None:
        return self.home / RETIRED_FILE if self.home else None

    def _look_at(self) -> tuple[Stamp, Stamp]:
        return stamp(self.path), stamp(self.retired_path)

    def _files_present(self) -> tuple[bool, bool]:
        """Which of the two files had something in them when the policy in force was read."""
        return tuple(s is not None and s[1] > 0 for s in self._stamps)  # type: ignore[return-value]

    def look(self) -> bool:
        """Re-read when a stamp moved; True when a new policy is in force (module docstring)."""
        now = self._look_at()
        if now == self._stamps:
            return False
        self._stamps = now
        try:
            lost = self._lost()
            fresh = load_policy_file(self.path, self.home) if lost is None else None
        except PolicyFileError as e:
            lost = str(e)
            fresh = None
        if fresh is None:
            self.say(f"flightlog: {lost}; keeping the last good egress policy ({self._counts()})")
            return False
        self.policy = fresh
        self._present = self._files_present()
        self.say(f"flightlog: egress policy re-read from {self.path} ({self._counts()})")
        return True

    def _lost(self) -> str | None:
        """Why the files as they are now cannot replace the policy in force: one that was there
        is gone or empty. None when they can be read."""
        had_policy, had_retired = self._present
        for had, path in ((had_policy, self.path), (had_retired, self.retired_path)):
            if not had or path is None:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                return f"{path} is gone"
            except (OSError, UnicodeDecodeError) as e:
                return f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
            if not text.strip():
                return f"{path} is empty"
        return None

    def announce(self) -> None:
        """Say which policy is in force, when there is one (at start)."""
        policy = self.policy
        if not policy.empty:
            self.say(
                f"flightlog: egress policy {policy.source}: {len(policy.rules)} rules, "
                f"{len(policy.budgets)} budgets, {len(policy.rates)} rates, default {policy.default}"
            )

    def _counts(self) -> str:
        policy = self.policy
        return f"{len(policy.rules)} rules, default {policy.default}"

    async def run(self, interval: float = INTERVAL) -> None:
        """Look every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.look()
