"""A slow local model API: each streamed answer sends its opening events at once, then holds the
first content delta until released (a gate the caller opens, or a pause), the way real model APIs
answer: the role chunk, `message_start` or `response.created` come at once, the first token later.

Three shapes: OpenAI chat (`/v1/chat/completions`), Anthropic messages (`/v1/messages`) and the OpenAI
Responses API (`/v1/responses`). `released` records (epoch seconds) when each answer's first content
delta was let go, so a test can check causally that a recorded first token is not earlier.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_CHAT = "gpt-4o-mini"
MODEL_ANTHROPIC = "claude-3-5-haiku-latest"


def _sse(data: dict[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def _chat(model: str) -> tuple[list[bytes], list[bytes]]:
    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        doc = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [choice],
        }
        if usage is not None:
            doc = {**doc, "choices": [], "usage": usage}
        return _sse(doc)

    opening = [chunk({"role": "assistant", "content": ""})]
    rest = [
        chunk({"content": "Hel"}),
        chunk({"content": "lo!"}),
        chunk({}, "stop"),
        chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}),
        b"data: [DONE]\n\n",
    ]
    return opening, rest


def _anthropic(model: str) -> tuple[list[bytes], list[bytes]]:
    message = {"id": "m1", "type": "message", "role": "assistant", "model": model, "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    opening = [
        _sse({"type": "message_start", "message": message}, "message_start"),
        _sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
        _sse({"type": "ping"}, "ping"),
    ]
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello!"}}
    rest = [
        _sse(delta, "content_block_delta"),
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
            "message_delta",
        ),
        _sse({"type": "message_stop"}, "message_stop"),
    ]
    return opening, rest


def _responses(model: str) -> tuple[list[bytes], list[bytes]]:
    response = {"id": "r1", "object": "response", "created_at": 1, "model": model, "status": "in_progress"}
    response |= {"output": [], "usage": None}
    item = {"id": "i1", "type": "message", "role": "assistant", "status": "in_progress", "content": []}
    opening = [
        _sse({"type": "response.created", "sequence_number": 0, "response": response}, "response.created"),
        _sse(
            {"type": "response.in_progress", "sequence_number": 1, "response": response},
            "response.in_progress",
        ),
        _sse(
            {"type": "response.output_item.added", "sequence_number": 2, "output_index": 0, "item": item},
            "response.output_item.added",
        ),
    ]
    done_text = {"type": "output_text", "text": "Hello!", "annotations": []}
    done = {
        **response,
        "status": "completed",
        "output": [{**item, "status": "completed", "content": [done_text]}],
    }
    done["usage"] = {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11}
    delta = {
        "type": "response.output_text.delta",
        "sequence_number": 3,
        "item_id": "i1",
        "output_index": 0,
        "content_index": 0,
        "delta": "Hello!",
    }
    rest = [
        _sse(delta, "response.output_text.delta"),
        _sse({"type": "response.completed", "sequence_number": 4, "response": done}, "response.completed"),
    ]
    return opening, rest


SHAPES = {"/v1/chat/completions": _chat, "/v1/messages": _anthropic, "/v1/responses": _responses}


@dataclass
class SlowModel:
    """The server's address, and what it did: `released` (path -> epoch seconds) per answer."""

    server: ThreadingHTTPServer
    pause: float
    gate: threading.Event | None
    released: list[tuple[str, float]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


def _handler(slow: SlowModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
            path = self.path.split("?", 1)[0]
            shape = SHAPES.get(path)
            if shape is None:
                self.send_error(404)
                return
            opening, rest = shape(str(body.get("model") or MODEL_CHAT))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for part in opening:
                self.wfile.write(part)
                self.wfile.flush()
            if slow.gate is not None:
                slow.gate.wait(10)
                slow.gate.clear()
            else:
                time.sleep(slow.pause)
            slow.released.append((path, time.time()))
            for part in rest:
                self.wfile.write(part)
                self.wfile.flush()
            self.close_connection = True

    return Handler


@contextmanager
def slow_model(pause: float = 0.3, gate: threading.Event | None = None) -> Iterator[SlowModel]:
    """A slow model API on loopback: the first content delta waits `pause` seconds after the opening
    events, or until `gate` is set (then the gate is cleared for the next answer)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    slow = SlowModel(server, pause, gate)
    server.RequestHandlerClass = _handler(slow)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield slow
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
