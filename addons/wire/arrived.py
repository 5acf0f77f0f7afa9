"""The answer bytes mitmproxy had read when a buffered answer failed part-way (an upstream that
promised N bytes and closed after fewer, a client that left while mitmproxy was still reading).

mitmproxy buffers an answer it does not stream in its `HttpStream` and hands it to the flow only
when the whole body is there: the `error` hook sees `flow.response` with no content, and the bytes
that did arrive would be lost. Streaming every answer to keep them would change what the client
sees (headers before the body, a cut connection instead of mitmproxy's 502), so instead, at error
time only, the flow's `HttpStream` is found from the proxy server's connection handler through its
layers' contexts and its buffer is read. Every attribute used (`connections`, `layer.context.layers`,
`HttpLayer.streams`, `HttpStream.flow`, `.context`, `.response_body_buf`) is a public attribute of
mitmproxy 12; if a later version moves one, nothing is found and the answer is recorded without a
body, as before (tests/capture/test_upstream_failures.py fails then, so the move is noticed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mitmproxy import http


def _find_stream(context: Any, flow: http.HTTPFlow, seen: set[int]) -> Any:
    """The `HttpStream` carrying `flow` among the HTTP layers of `context`, and of the contexts of
    their streams (a CONNECT tunnel's inner layers live in its stream's context)."""
    from mitmproxy.proxy.layers.http import HttpLayer

    for layer in list(getattr(context, "layers", ())):
        if id(layer) in seen or not isinstance(layer, HttpLayer):
            continue
        seen.add(id(layer))
        for stream in list(layer.streams.values()):
            if getattr(stream, "flow", None) is flow:
                return stream
            inner = getattr(stream, "context", None)
            if inner is not None and id(inner) not in seen:
                seen.add(id(inner))
                found = _find_stream(inner, flow, seen)
                if found is not None:
                    return found
    return None


def arrived_body(flow: http.HTTPFlow) -> bytes | None:
    """The body bytes read so far for a flow whose buffered answer failed; None when they cannot be
    found (the connection is gone, or mitmproxy keeps them elsewhere)."""
    from mitmproxy import ctx

    server = ctx.master.addons.get("proxyserver")
    handler = getattr(server, "connections", {}).get(flow.client_conn.id)
    layer = getattr(handler, "layer", None)
    stream = _find_stream(getattr(layer, "context", None), flow, set())
    buffer = getattr(stream, "response_body_buf", None)
    return bytes(buffer) if buffer is not None else None


def cut_short_error(flow: http.HTTPFlow, arrived: int, message: str) -> str:
    """What happened to an answer whose body stopped after `arrived` bytes: who cut it (the client
    still connected means the upstream side did), how much of how much, and mitmproxy's words."""
    from mitmproxy.connection import ConnectionState

    response = flow.response
    length = response.headers.get("content-length", "") if response is not None else ""
    of = f" of {length}" if length.isdigit() else ""
    client_open = flow.client_conn.state & ConnectionState.CAN_WRITE
    who = (
        "The upstream's answer was cut short before it was complete"
        if client_open
        else "The client disconnected before the answer was complete"
    )
    return f"{who}: {arrived}{of} bytes arrived ({message})"
