"""The proxy's shell over `egress.credential_swap`: lent placeholders become real keys, after the verdict.

`Egress` calls `Swaps.swap(flow, exchange)` once a request is allowed (and only then: a refused
request never carries a real value). The loans in force are the loan book's (`egress.loan_book`,
read again when a run registers or ends); the values and hosts are the secrets file's, read again
when it changes. A swap is recorded as a `credential.swapped` event naming the secrets (never their
values); a misplaced placeholder is returned for the caller to refuse under the rule `credential`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.secret_hosts import Place, SecretHosts
from egress.credential_swap import Lent, Misplaced, Swapped, swap
from egress.loan_book import LoanBook
from recording.capture_setup import processing_files
from recording.errors import SecretsError
from recording.records import Exchange, Record, SwapRecord
from recording.redaction.secrets import load_secret_hosts, load_secrets
from storage.locations import flightlog_home

if TYPE_CHECKING:
    from mitmproxy import http

RULE = "credential"


class Swaps:
    """The loans, the secrets they stand for, and where each swap is recorded."""

    def __init__(self, put: Callable[[Record], bool]) -> None:
        self.put = put
        self.book: LoanBook | None = None
        self._file: Path | None = None
        self._env: tuple[str, ...] = ()
        self._stamp: object = None
        self._values: dict[str, str] = {}
        self._hosts = SecretHosts({})

    def configure(self, opts: Any) -> None:
        """Where the book and the secrets are (the proxy's options; read at once, so a bad file fails
        here as capture's redaction does)."""
        self.book = LoanBook(flightlog_home())
        self._file = processing_files(opts)[0]
        self._env = tuple(opts.flightlog_secret_env)
        self._stamp = None

    def _secrets(self) -> tuple[dict[str, str], SecretHosts]:
        """The secrets file's values and hosts, read again when it changed (a stat while lending)."""
        try:
            st = os.stat(self._file) if self._file is not None else None
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino) if st is not None else None
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                file = self._file if stamp is not None else None
                self._values = load_secrets(file, self._env)
                self._hosts = SecretHosts(load_secret_hosts(file))
            except SecretsError:  # keep the last good ones: capture's watch says what is wrong
                pass
        return self._values, self._hosts

    def swap(self, flow: http.HTTPFlow, exchange: Exchange) -> Misplaced | None:
        """Swap the placeholders `flow` carries for their real values (it goes to their host), or
        say what is misplaced (the caller refuses the request)."""
        loans = self.book.current() if self.book is not None else {}
        if not loans:
            return None
        values, hosts = self._secrets()
        request = flow.request
        place = Place(request.host.lower(), request.port)
        body = b"" if request.stream else (request.raw_content or b"")
        outcome = swap(request.headers.fields, request.path, body, place, Lent(loans, values, hosts.of))
        if isinstance(outcome, Swapped):
            request.headers.fields = outcome.fields
            if outcome.path != request.path:
                request.path = outcome.path
            if outcome.names:
                self.put(SwapRecord(exchange, time.time(), outcome.names))
            return None
        return outcome
