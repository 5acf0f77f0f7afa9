"""WebSocket messages after an upgrade: each one a record of the capture's exchange, and the close.

A part of the Flightlog addon beside the capture (whose `requestheaders` made the exchange the
messages belong to): every message, from either side, is numbered in arrival order and in the
writer's pipe before mitmproxy passes it on; once the writer has stopped, a message is dropped
rather than passed on unrecorded.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from addons.capture import Capture
from addons.flow_notes import EXCHANGE, WS_INDEX
from addons.wire.flow_records import close_record
from recording.records import WebSocketRecord

if TYPE_CHECKING:
    from mitmproxy import http


class WebSocketCapture:
    """Records each message and the close of the capture's upgraded exchanges."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture

    def websocket_message(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        exchange = EXCHANGE.get(flow)
        if exchange is None or flow.websocket is None or not flow.websocket.messages:
            return None
        message = flow.websocket.messages[-1]
        if not self.capture.recording:  # the writer stopped: the message is not passed on unrecorded
            message.drop()
            return None
        index = WS_INDEX.put(flow, WS_INDEX.get(flow, 0) + 1)
        origin = "client" if message.from_client else "server"
        self.capture.put(WebSocketRecord(exchange, message.timestamp, index, origin, message.content))
        return self.capture.answered(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> Awaitable[None] | None:
        """How the connection ended: the close code, and the reason as the payload."""
        exchange = EXCHANGE.get(flow)
        ws = flow.websocket
        if exchange is None or ws is None:
            return None
        self.capture.put(close_record(exchange, ws, WS_INDEX.get(flow, 0)))
        return self.capture.answered(flow)
