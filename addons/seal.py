"""A sealed command's identity is the run's: what its requests claim is kept, never used.

`flightlog run --sealed --agent A` starts a proxy of its own for the command with
`flightlog_sealed` and `flightlog_sealed_identity` set. This addon runs before every other part
(`addons.master`), on every request and CONNECT, whatever the listener: it takes every field a
client may name itself with (`Proxy-Authorization`, `X-Flightlog-*`, a reverse listener's
`/_flightlog/USER/` path prefix) off the request, and puts in their place one
`Proxy-Authorization` carrying the run's identity. So every part that reads identity (capture,
the egress judge's rules, budgets and rates, the attempts, the lent token's caveats) reads the
seal's, from the one place it always read it, and none has a path that reads the client's.

The seal fixes agent, session and task (what rules, budgets and tokens scope by); the turn is the
caller's to say when the run named none. A claim that differs from the seal is kept on the
request's event: the recorded head carries it as one field, `X-Flightlog-Claim: agent=beta`
(an `X-Flightlog-` field, so no proxy forwards it; nothing reads identity from it).
"""

from __future__ import annotations

import base64
import weakref
from typing import TYPE_CHECKING, Final

from addons.flow_notes import CLAIM
from addons.wire.flow_records import is_reverse
from recording import identity as ident

if TYPE_CHECKING:
    from mitmproxy import connection, http
    from mitmproxy.addonmanager import Loader

CLAIM_FIELD: Final = b"X-Flightlog-Claim"
SEALED_FIELDS: Final = ("agent", "session", "task")


class Seal:
    """Replaces whatever identity a sealed command's request names with the run's."""

    def __init__(self) -> None:
        self.sealed = False
        self.identity = ident.EMPTY
        self._connects: weakref.WeakKeyDictionary[connection.Client, ident.Identity] = (
            weakref.WeakKeyDictionary()
        )

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "flightlog_sealed", bool, False, "This proxy serves one sealed command (`run --sealed`)."
        )
        loader.add_option(
            "flightlog_sealed_identity",
            str,
            "",
            "The sealed command's identity (agent=A;session=S;task=T): every request's, whatever it claims.",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        if updated & {"flightlog_sealed", "flightlog_sealed_identity"}:
            self.sealed = ctx.options.flightlog_sealed
            self.identity = ident.parse_user(ctx.options.flightlog_sealed_identity)

    def http_connect(self, flow: http.HTTPFlow) -> None:
        if self.sealed:
            claim = _take(flow.request, reverse=False)
            if claim != ident.EMPTY:
                self._connects[flow.client_conn] = claim
            self._seal(flow, claim)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self.sealed:
            claim = _take(flow.request, reverse=is_reverse(flow))
            tunnel = self._connects.get(flow.client_conn) if self._connects else None
            self._seal(flow, claim.over(tunnel) if tunnel is not None else claim)

    def _seal(self, flow: http.HTTPFlow, claim: ident.Identity) -> None:
        who = self.identity.over(ident.Identity(turn=claim.turn))
        if who != ident.EMPTY:
            token = base64.b64encode(f"{who.userinfo()}:".encode()).decode()
            flow.request.headers["Proxy-Authorization"] = f"Basic {token}"
        if differs(claim, self.identity):
            CLAIM.put(flow, claim.userinfo())


def _take(request: http.Request, reverse: bool) -> ident.Identity:
    """Every identity the request names (as capture reads them: the path prefix, then the proxy
    credentials, then the headers over both), taken off the request."""
    fields = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.fields]
    claim = ident.from_proxy_authorization(request.headers.get("proxy-authorization"))
    claim = ident.from_headers(fields).over(claim)
    if reverse and request.path.startswith(ident.PATH_PREFIX):
        in_path, request.path = ident.from_path(request.path)
        claim = claim.over(in_path)
    for name in {k.lower() for k, _ in fields}:
        if ident.is_identity_header(name):
            del request.headers[name]
    return claim


def differs(claim: ident.Identity, seal: ident.Identity) -> bool:
    """Whether a claim names an agent, session or task other than the seal's."""
    return any(
        (said := getattr(claim, name)) is not None and said != getattr(seal, name) for name in SEALED_FIELDS
    )


def claimed_head(head: bytes, claim: str | None) -> bytes:
    """A recorded request head with the set-aside claim (if any) as its last field."""
    if claim is None:
        return head
    return head[:-2] + CLAIM_FIELD + b": " + claim.encode("utf-8", "backslashreplace") + b"\r\n\r\n"
