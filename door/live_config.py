"""The door's refused hosts, secrets and the hosts each secret may go to, re-read when their files change.

An operator who adds a host to `refused_hosts.txt` or rotates a secret expects the running proxy to
act on it at once. `LiveConfig.current()` compares each file's (mtime, size, inode) stamp with the
last read, one `stat` per file per call, and reads again only when a stamp moved. A file that turns
unreadable or malformed keeps the last good values and says so once (the door keeps serving).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from catalog import retired_hosts as refused
from catalog.errors import CatalogError
from catalog.secret_hosts import SecretHosts
from recording.errors import RecordingError
from recording.file_stamps import Stamp, stamp
from recording.redaction.secrets import load_secret_hosts, load_secrets

log = logging.getLogger("flightlog.door")

T = TypeVar("T")


@dataclass
class LiveConfig:
    """Refused hosts from `home/refused_hosts.txt`, secrets from `secrets_file` (and `secret_env`),
    plus flightlog's own (`own`, fixed)."""

    home: Path
    secrets_file: Path | None
    secret_env: tuple[str, ...] = ()
    own: Mapping[str, str] = field(default_factory=dict)
    _stamps: tuple[Stamp, Stamp] | None = field(default=None, repr=False)
    _values: tuple[refused.RefusedHosts, dict[str, str]] | None = field(default=None, repr=False)
    _hosts: SecretHosts = field(default_factory=lambda: SecretHosts({}), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def refused_file(self) -> Path:
        return self.home / refused.FILE_NAME

    @property
    def secret_hosts(self) -> SecretHosts:
        """Where each secret may go, as the secrets file read last says (`catalog.secret_hosts`)."""
        return self._hosts

    def current(self) -> tuple[refused.RefusedHosts, dict[str, str], bool]:
        """(refused hosts, secrets, changed since the last call); `secret_hosts` is read with the
        secrets. The first call raises on a bad file (the door does not start on one); later calls
        keep each file's last good values."""
        with self._lock:
            stamps = (stamp(self.refused_file), stamp(self.secrets_file))
            if self._values is not None and stamps == self._stamps:
                return *self._values, False
            first = self._values is None
            old = self._stamps or (None, None)
            hosts, secrets = self._values or (None, None)
            if first or stamps[0] != old[0]:
                hosts = self._read(lambda: refused.load_refused_hosts(self.home), hosts)
            if first or stamps[1] != old[1]:  # the secrets and their hosts: one file, kept together
                secrets, self._hosts = self._read(
                    self._load_secrets, None if first else (secrets, self._hosts)
                )
            assert hosts is not None and secrets is not None
            changed = not first and (stamps != self._stamps)
            self._stamps, self._values = stamps, (hosts, secrets)
            return hosts, secrets, changed

    def _load_secrets(self) -> tuple[dict[str, str], SecretHosts]:
        secrets = dict(self.own) | load_secrets(self.secrets_file, self.secret_env)
        return secrets, SecretHosts(load_secret_hosts(self.secrets_file))

    @staticmethod
    def _read(load: Callable[[], T], last: T | None) -> T:
        try:
            return load()
        except (RecordingError, CatalogError) as e:
            if last is None:
                raise
            log.warning("flightlog: keeping the last good values: %s", e)
            return last
