"""How the door reaches what a contract names: upstreams over one httpx client, commands with a
timeout, and flightlog.local in-process (`door.local_transport`), through the same declared
routes and the same gate as the proxy's, judged with the caller's own token and identity (`Lent`).

The client is made once for the door's life (thread-safe; its TLS context is slow to make),
with `trust_env=False`: the door calls upstreams directly, never through a proxy named in the
environment, so generic capture never sees (and never stores twice) the door's own calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx

from authority.gate import UseBook
from door.gatekeeper import Gatekeeper, Lent, Record
from door.local_transport import local_mounts, local_routes
from door.routes import Handler, Routes
from door.upstream import Outcome, call_cli, call_http, call_mcp
from storage.ledger import Ledger


class Reach:
    """The door's way out, built on first use."""

    def __init__(
        self,
        ledger: Ledger,
        own_token: str,
        directory: Any,
        own_dispatch: Handler | None,
        gate: tuple[bytes, UseBook, Record],
        caller: Callable[[], Lent],
        timeouts: tuple[float, float],
    ) -> None:
        """`own_token`: the credential flightlog's Ledger rows carry; `own_dispatch`: the door's face
        (the DISPATCH row); `gate`: root key, use book and where inner refusals are filed;
        `timeouts`: (upstream, command) seconds."""
        root_key, book, record = gate
        self.routes: Routes = local_routes(ledger, own_token, directory, own_dispatch)
        self.gatekeeper = Gatekeeper(root_key, book, own_token, record)
        self.caller = caller
        self.upstream_timeout, self.cli_timeout = timeouts
        self._lock = threading.Lock()
        self._http: httpx.Client | None = None

    def client(self) -> httpx.Client:
        with self._lock:
            if self._http is None:
                self._http = httpx.Client(
                    trust_env=False,
                    timeout=self.upstream_timeout,
                    follow_redirects=False,
                    mounts=local_mounts(self.routes, self.gatekeeper, self.caller),
                )
            return self._http

    def run(self, bound: Any) -> Outcome:
        """Every part of a bound contract in order, stopping at the first that fails."""
        parts = bound if isinstance(bound, list) else [bound]
        exchanges: list[Any] = []
        outcome: Outcome | None = None
        for part in parts:
            method = str(part.get("method", "")).upper()
            if method == "MCP":
                outcome = call_mcp(self.client(), part)
            elif method == "CLI":
                outcome = call_cli(part, self.cli_timeout)
            else:
                outcome = call_http(self.client(), part)
            exchanges += outcome.exchanges
            if not outcome.ok:
                break
        assert outcome is not None
        return Outcome(tuple(exchanges), outcome.ok, outcome.result, outcome.status, outcome.error)

    def close(self) -> None:
        with self._lock:
            if self._http is not None:
                self._http.close()
                self._http = None
