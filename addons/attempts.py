"""Every attempt is an event: a connection that failed before (or instead of) an exchange is recorded.

The capture records exchanges, and mitmproxy makes an exchange (a flow) for almost everything; what
it does not are exactly the failures an agent meets first, where the flight recorder stayed silent:

- a CONNECT whose upstream cannot be reached (refused, DNS, timeout): mitmproxy answers it 502 itself
  and calls `http_connect_error`, never `requestheaders`. It is recorded as an exchange like any
  other: the CONNECT request as the client sent it, and the failure as its answer.
- a client connection that ends with no exchange on it after a failure: the client refused the
  proxy's certificate (`tls_failed_client`), or a reverse listener's upstream connection, opened as
  the client connects, could not be made (`server_connect_error`: the client sees its connection
  closed). At `client_disconnected`, such a connection is one `connection.error` event, under an
  action of its own, naming the target and why.

A connection that merely opens and closes (a port probe), or sends bytes that are not HTTP
(mitmproxy answers 400 and makes no flow), is not an attempt to reach anything and is not recorded.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from addons.wire.flow_records import mode_direction
from addons.wire.heads import pretty_target, request_head
from recording import identity as ident
from recording.action_ids import action_id
from recording.records import AttemptRecord, Exchange, Record, RequestRecord, ResponseRecord

if TYPE_CHECKING:
    from mitmproxy import connection, http, tls
    from mitmproxy.proxy import server_hooks


class Attempts:
    """Records failed CONNECTs, and client connections that failed with no exchange on them."""

    def __init__(
        self,
        sink: Callable[[Record], object],
        identity_of: Callable[[connection.Client], ident.Identity],
        outbound: Callable[[], frozenset[str]],
        ignored: Callable[[str], bool],
    ) -> None:
        self._sink = sink
        self._identity_of = identity_of
        self._outbound = outbound
        self._ignored = ignored
        self._failed: weakref.WeakKeyDictionary[connection.Client, tuple[str, str, str]] = (
            weakref.WeakKeyDictionary()
        )
        """client -> (url, host, why) of a failure seen on it, until it has an exchange."""
        self._served: weakref.WeakSet[connection.Client] = weakref.WeakSet()

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        """The connection carries an exchange: its failures are that exchange's to record."""
        self._served.add(flow.client_conn)

    def http_connect_error(self, flow: http.HTTPFlow) -> None:
        """A CONNECT mitmproxy answered itself with an error: the request and the failure."""
        request = flow.request
        if self._ignored(request.host) or not flow.server_conn.error:
            return  # no upstream connection failed: the proxy answered it (an egress refusal, recorded)
        self._served.add(flow.client_conn)
        url, host = pretty_target(request)
        who = self._identity_of(flow.client_conn)
        who = ident.from_proxy_authorization(request.headers.get("proxy-authorization")).over(who)
        exchange = Exchange(
            flow_id=action_id(flow.id, flow.timestamp_created),
            direction=mode_direction(flow.client_conn.proxy_mode, self._outbound()),
            method=request.method,
            url=url,
            host=host,
            identity=who,
        )
        server = flow.server_conn
        why = server.error
        where = f"{server.address[0]}:{server.address[1]}" if server.address else host
        self._sink(RequestRecord(exchange, request.timestamp_start, request_head(request), b""))
        self._sink(
            ResponseRecord(
                exchange,
                time.time(),
                None,
                b"",
                None,
                error=f"Cannot connect to {where}: {why}",
                timing=(request.timestamp_start, None, None, None),
            )
        )

    def tls_failed_client(self, data: tls.TlsData) -> None:
        client = data.context.client
        target = data.context.server.address
        sni = getattr(client, "sni", None)
        host = sni or (str(target[0]) if target else "")
        port = f":{target[1]}" if target and target[1] != 443 else ""
        self._note(client, f"https://{host}{port}", host, client.error or "TLS handshake failed")

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        address = data.server.address
        if address is None:
            return
        host, port = str(address[0]), int(address[1])
        scheme = "https" if data.server.tls else "http"
        url = f"{scheme}://{host}:{port}"
        self._note(data.client, url, host, f"Cannot connect to {host}:{port}: {data.server.error}")

    def _note(self, client: connection.Client, url: str, host: str, why: str) -> None:
        if client not in self._served and client not in self._failed and not self._ignored(host):
            self._failed[client] = (url, host, why)

    def client_disconnected(self, client: connection.Client) -> None:
        failure = self._failed.pop(client, None)
        if failure is None or client in self._served:
            return
        url, host, why = failure
        exchange = Exchange(
            flow_id=action_id(client.id, client.timestamp_start),
            direction=mode_direction(client.proxy_mode, self._outbound()),
            method="",
            url=url,
            host=host,
            identity=self._identity_of(client),
        )
        self._sink(AttemptRecord(exchange, time.time(), why))
