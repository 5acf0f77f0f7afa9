"""Records from a mitmproxy flow: the pure parts of the capture hooks, kept out of the hook class.

Each function reads a flow (or its headers) and returns immutable values; the hook class decides
when to call them. mitmproxy is only imported for types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from addons.wire.heads import header_values, response_head
from recording import identity as ident
from recording.records import Exchange, ResponseRecord, StreamChunk, WebSocketRecord

if TYPE_CHECKING:
    from mitmproxy import http, websocket

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


def tee(
    flow_id: str, put: Callable[[StreamChunk], object], coding: str
) -> tuple[Callable[[bytes], bytes], list[float]]:
    """A `response.stream` callable passing each chunk on unchanged and handing a copy to `put`, and
    the list that gets the arrival time of the first chunk (a streamed answer's first token)."""
    first: list[float] = []

    def pass_on(chunk: bytes) -> bytes:
        if chunk:
            if not first:
                first.append(time.time())
            put(StreamChunk(flow_id, chunk, coding))
        return chunk

    return pass_on, first


def relays_trailers(flow: http.HTTPFlow) -> bool:
    """Whether mitmproxy 12 carries an answer's trailers through: only HTTP/2 (or 3) on both sides
    (its HTTP/1 reader raises on trailers and its HTTP/1 writer has no way to send them)."""
    response = flow.response
    return (
        response is not None
        and not response.http_version.startswith("HTTP/1")
        and not flow.request.http_version.startswith("HTTP/1")
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
    teed: bool,
    first_chunk: float | None,
    arrived: bytes | None = None,
) -> ResponseRecord:
    """The answer (or the failure in `error`) of a flow mitmproxy handled itself; `arrived` is the
    body read before a buffered answer failed part-way (recorded `partial`)."""
    response = flow.response
    ctype, coding = (
        header_values(response.headers.fields, ANSWER_FIELDS) if response is not None else ("", "")
    )
    timing = (
        flow.request.timestamp_start,
        response.timestamp_start if response is not None else None,
        response.timestamp_end if response is not None else None,
        first_chunk,
    )
    return ResponseRecord(
        exchange=exchange,
        at=time.time(),
        status=response.status_code if response is not None else None,
        head=response_head(response) + trailer_section(response) if response is not None else b"",
        body=arrived if arrived is not None else None if teed or response is None else response.raw_content,
        content_type=ctype or "",
        content_encoding=coding or "",
        error=error,
        streamed=teed,
        partial=(teed or arrived is not None) and error is not None,
        request_body=flow.request.raw_content if not flow.request.stream else None,
        timing=timing,
    )


def close_record(exchange: Exchange, ws: websocket.WebSocketData, index: int) -> WebSocketRecord:
    """How a WebSocket connection ended: the close code, and the reason as the payload."""
    reason = (ws.close_reason or "").encode()
    at = ws.timestamp_end or time.time()
    code = int(ws.close_code) if ws.close_code is not None else None  # wsproto's IntEnum, as a number
    return WebSocketRecord(exchange, at, index, "close", reason, code)


def is_reverse(flow: http.HTTPFlow) -> bool:
    """Whether the flow came in on a reverse listener."""
    from mitmproxy.proxy.mode_specs import ReverseMode

    return isinstance(flow.client_conn.proxy_mode, ReverseMode)


def direction(flow: http.HTTPFlow, outbound: frozenset[str]) -> str:
    """`in` for traffic a reverse listener receives for our own service; `out` for the rest
    (forward traffic, and reverse listeners in front of the model APIs named in `outbound`, by host
    or by `host:port` for an AI listener pointed at a gateway)."""
    from mitmproxy.proxy.mode_specs import ReverseMode

    mode = flow.client_conn.proxy_mode
    if not isinstance(mode, ReverseMode):
        return "out"
    host, port = mode.address
    return "out" if host in outbound or f"{host}:{port}" in outbound else "in"
