"""WebSocket messages after an upgrade: each one a record of the capture's exchange, and the close.

A part of the Flightlog addon beside the capture (whose `requestheaders` made the exchange the
messages belong to): every message, from either side, is numbered in arrival order and in the
writer's pipe before mitmproxy passes it on; once the writer has stopped, a message is dropped
rather than passed on unrecorded.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from addons.capture import META_EXCHANGE, Capture
from addons.wire.flow_records import close_record
from recording.records import WebSocketRecord

if TYPE_CHECKING:
    from mitmproxy import http

META_WS_INDEX = "flightlog.ws_index"


class WebSocketCapture:
    """Records each message and the close of the capture's upgraded exchanges."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def websocket_message(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        exchange = flow.metadata.get(META_EXCHANGE)
        if exchange is None or flow.websocket is None or not flow.websocket.messages:
            return None
        message = flow.websocket.messages[-1]
        if not self.capture.recording:  # the writer stopped: the message is not passed on unrecorded
            message.drop()
            return None
        index = flow.metadata[META_WS_INDEX] = flow.metadata.get(META_WS_INDEX, 0) + 1
        origin = "client" if message.from_client else "server"
        self.capture.put(WebSocketRecord(exchange, message.timestamp, index, origin, message.content))
        return self.capture.answered(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """How the connection ended: the close code, and the reason as the payload."""
        exchange = flow.metadata.get(META_EXCHANGE)
        ws = flow.websocket
        if exchange is None or ws is None:
            return None
        self.capture.put(close_record(exchange, ws, flow.metadata.get(META_WS_INDEX, 0)))
        return self.capture.answered(flow)
