"""Records from a mitmproxy flow: the pure parts of the capture hooks, kept out of the hook class.

Each function reads a flow (or its headers) and returns immutable values; the hook class decides
when to call them. mitmproxy is only imported for types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from addons.flow_notes import AS_LISTENER
from addons.wire.departures import ClientConnection
from addons.wire.heads import header_values, response_head
from recording import identity as ident
from recording.records import Exchange, ResponseRecord, StreamChunk, WebSocketRecord

if TYPE_CHECKING:
    from mitmproxy import http, websocket
    from mitmproxy.proxy.mode_specs import ProxyMode

IDENTITY_PREFIX = ident.HEADER_PREFIX.encode()
ANSWER_FIELDS = (b"content-type", b"content-encoding")


def scan_fields(fields: Iterable[tuple[bytes, bytes]]) -> tuple[bytes | None, bool]:
    """(the first Content-Length value, whether any identity or proxy-authorization field is there),
    in one pass: mitmproxy's header lookups lower-case every name on each call."""
    length: bytes | None = None
    identified = False
    for key, value in fields:
        lkey = key.lower()
        if lkey == b"content-length" and length is None:
            length = value
        elif lkey.startswith(IDENTITY_PREFIX) or lkey == b"proxy-authorization":
            identified = True
    return length, identified


def take_identity(request: http.Request, who: ident.Identity) -> ident.Identity:
    """The identity in a request's headers (over `who`), with the identity headers removed."""
    fields = request.headers.fields
    from_auth = ident.from_proxy_authorization(request.headers.get("proxy-authorization"))
    from_headers = ident.from_headers((k.decode("latin-1"), v.decode("latin-1")) for k, v in fields)
    for name in {k.decode("latin-1").lower() for k, _ in fields}:
        if ident.is_identity_header(name):
            del request.headers[name]
    return from_headers.over(from_auth.over(who))


class Delivery:
    """What a teed answer's client got: when its first body chunk went, and how many bytes went
    before the client left (`client`: its connection, None when not held)."""

    __slots__ = ("client", "first", "sent", "total")

    def __init__(self, client: ClientConnection | None) -> None:
        self.client = client
        self.first: float | None = None
        self.sent = 0
        self.total = 0


def tee(
    flow_id: str, put: Callable[[StreamChunk], object], coding: str, delivery: Delivery
) -> Callable[[bytes], bytes]:
    """A `response.stream` callable passing each chunk on unchanged and handing a copy to `put`,
    counting in `delivery` the bytes passed on while the client is there and when the first went.
    Each chunk carries its arrival time: the writer finds the first token among them."""
    client = delivery.client

    def pass_on(chunk: bytes) -> bytes:
        if chunk:
            now = time.time()
            if delivery.first is None:
                delivery.first = now
            delivery.total += len(chunk)
            if client is None or client.left_at is None:
                delivery.sent += len(chunk)
            put(StreamChunk(flow_id, chunk, coding, now))
        return chunk

    return pass_on


def relays_trailers(flow: http.HTTPFlow) -> bool:
    """Whether mitmproxy 12 carries an answer's trailers through: only HTTP/2 (or 3) on both sides
    (its HTTP/1 reader raises on trailers and its HTTP/1 writer has no way to send them)."""
    response = flow.response
    return (
        response is not None
        and not response.http_version.startswith("HTTP/1")
        and not flow.request.http_version.startswith("HTTP/1")
    )


def trailer_error(announced: str) -> str:
    """What an answer announcing HTTP/1 trailers (which mitmproxy cannot relay) was recorded with."""
    return (
        "The answer has HTTP trailers, which mitmproxy cannot relay: the client was sent an error "
        f"instead (announced: Trailer: {announced})"
    )


def trailer_section(response: http.Response) -> bytes:
    """An answer's trailers as the section after its head (`Name: value` lines and an empty line, as
    HTTP/1.1 puts them after the last chunk): the head's readers stop at the first empty line."""
    if not response.trailers:
        return b""
    return b"".join(k + b": " + v + b"\r\n" for k, v in response.trailers.fields) + b"\r\n"


def answer_record(
    flow: http.HTTPFlow,
    exchange: Exchange,
    error: str | None,
    *,
    ended: bool,
    delivery: Delivery | None,
    client: ClientConnection | None,
    arrived: bytes | None = None,
) -> ResponseRecord:
    """The answer (or the failure in `error`) of a flow: `ended` when the whole answer was read,
    `delivery` for a teed one (its body is the `StreamChunk`s already put), `arrived` the body read
    before a buffered answer failed part-way (recorded `partial`). What its client got comes from
    `client` (its connection): the bytes passed on before it left, and when it left."""
    response = flow.response
    ctype, coding = (
        header_values(response.headers.fields, ANSWER_FIELDS) if response is not None else ("", "")
    )
    teed = delivery is not None
    timing = (
        flow.request.timestamp_start,
        response.timestamp_start if response is not None else None,
        response.timestamp_end if response is not None and ended else None,
        delivery.first if delivery is not None else None,
    )
    left = client.left_at if client is not None else None
    body = arrived if arrived is not None else None if teed or response is None else response.raw_content
    return ResponseRecord(
        exchange=exchange,
        at=time.time(),
        status=response.status_code if response is not None else None,
        head=response_head(response) + trailer_section(response) if response is not None else b"",
        body=body,
        content_type=ctype or "",
        content_encoding=coding or "",
        error=error,
        streamed=teed,
        partial=not ended and (teed or arrived is not None),
        request_body=flow.request.raw_content if not flow.request.stream else None,
        timing=timing,
        client_bytes=_client_bytes(response is not None, ended, delivery, body, left),
        client_left=left,
    )


def _client_bytes(
    answer: bool, ended: bool, delivery: Delivery | None, body: bytes | None, left: float | None
) -> int | None:
    """Body bytes the client was passed (None: no answer came): a teed answer's count; a buffered
    one goes out whole after its `response` hook, so all of it unless the client had left, and none
    when it failed (the client got mitmproxy's error answer, or a closed connection)."""
    if not answer:
        return None
    if delivery is not None:
        return delivery.sent
    return len(body or b"") if ended and left is None else 0


def close_record(exchange: Exchange, ws: websocket.WebSocketData, index: int) -> WebSocketRecord:
    """How a WebSocket connection ended: the close code, and the reason as the payload."""
    reason = (ws.close_reason or "").encode()
    at = ws.timestamp_end or time.time()
    code = int(ws.close_code) if ws.close_code is not None else None  # wsproto's IntEnum, as a number
    return WebSocketRecord(exchange, at, index, "close", reason, code)


def listener_mode(flow: http.HTTPFlow) -> ProxyMode:
    """The listener the flow is served as: the one it came in on, or the reverse listener a forward
    request for it is taken as."""
    return AS_LISTENER.get(flow) or flow.client_conn.proxy_mode


def is_reverse(flow: http.HTTPFlow) -> bool:
    """Whether the flow is served as a reverse listener's."""
    from mitmproxy.proxy.mode_specs import ReverseMode

    return isinstance(listener_mode(flow), ReverseMode)


def direction(flow: http.HTTPFlow, outbound: frozenset[str]) -> str:
    """`in` for traffic a reverse listener receives for our own service; `out` for the rest
    (forward traffic, and reverse listeners in front of the model APIs named in `outbound`, by host
    or by `host:port` for an AI listener pointed at a gateway)."""
    return mode_direction(listener_mode(flow), outbound)


def mode_direction(mode: ProxyMode, outbound: frozenset[str]) -> str:
    """`direction` of traffic served by a listener of `mode`."""
    from mitmproxy.proxy.mode_specs import ReverseMode

    if not isinstance(mode, ReverseMode):
        return "out"
    host, port = mode.address
    return "out" if host in outbound or f"{host}:{port}" in outbound else "in"
