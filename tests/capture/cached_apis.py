"""A local stand-in for Anthropic's and OpenAI's model APIs whose answers carry cache and reasoning
usage, streamed or not, as the providers send them; a model named `busy-model` gets a 429.

    with cached_apis() as api:  # api.base: http://127.0.0.1:PORT
        ...

Every answer uses the same counts (`ANTHROPIC_USAGE`, `CHAT_USAGE`, `RESPONSES_USAGE`), so a test
computes the provider's formula by hand from them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_USAGE = {
    "input_tokens": 12,
    "cache_creation_input_tokens": 3000,
    "cache_read_input_tokens": 20000,
    "output_tokens": 40,
}
CHAT_USAGE = {
    "prompt_tokens": 2000,
    "completion_tokens": 300,
    "total_tokens": 2300,
    "prompt_tokens_details": {"cached_tokens": 1536, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 256, "audio_tokens": 0},
}
RESPONSES_USAGE = {
    "input_tokens": 5000,
    "input_tokens_details": {"cached_tokens": 4096},
    "output_tokens": 700,
    "output_tokens_details": {"reasoning_tokens": 640},
    "total_tokens": 5700,
}
BUSY = "busy-model"


@dataclass
class Api:
    port: int
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = b""
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out += (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
    return out


def anthropic_answer(request: dict[str, Any]) -> tuple[str, bytes]:
    model = request.get("model", "claude-sonnet-4-5")
    text = [{"type": "text", "text": "Hello!"}]
    if not request.get("stream"):
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": text,
                   "stop_reason": "end_turn", "stop_sequence": None, "usage": ANTHROPIC_USAGE}  # fmt: skip
        return "application/json", json.dumps(message).encode()
    start = {**ANTHROPIC_USAGE, "output_tokens": 1}
    return "text/event-stream", _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hello!"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": ANTHROPIC_USAGE["output_tokens"]}}),
        ("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip


def chat_answer(request: dict[str, Any]) -> tuple[str, bytes]:
    model = request.get("model", "gpt-5")
    if not request.get("stream"):
        answer = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                  "choices": [{"index": 0, "finish_reason": "stop",
                               "message": {"role": "assistant", "content": "Hello!"}}],
                  "usage": CHAT_USAGE}  # fmt: skip
        return "application/json", json.dumps(answer).encode()
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    return "text/event-stream", _sse([
        (None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello!"},
                                      "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        (None, {**base, "choices": [], "usage": CHAT_USAGE}),
        (None, "[DONE]"),
    ])  # fmt: skip


def responses_answer(request: dict[str, Any]) -> tuple[str, bytes]:
    model = request.get("model", "gpt-5")
    done = {"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": model,
            "output": [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]}],
            "usage": RESPONSES_USAGE}  # fmt: skip
    if not request.get("stream"):
        return "application/json", json.dumps(done).encode()
    created = {**done, "status": "in_progress", "output": [], "usage": None}
    return "text/event-stream", _sse([
        ("response.created", {"type": "response.created", "sequence_number": 0, "response": created}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1,
                                        "item_id": "msg_1", "output_index": 0, "content_index": 0,
                                        "delta": "Hello!"}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": done}),
    ])  # fmt: skip


ROUTES = {
    "/v1/messages": anthropic_answer,
    "/v1/chat/completions": chat_answer,
    "/v1/responses": responses_answer,
}


def _handler(api: Api) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, status: int, ctype: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.partition("?")[0]
            try:
                request = json.loads(body or b"{}")
            except ValueError:
                request = {}
            api.received.append((path, request))
            if path.endswith("/count_tokens"):
                self._send(200, "application/json", b'{"input_tokens": 10}')
            elif request.get("model") == BUSY:
                error = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
                self._send(429, "application/json", json.dumps(error).encode())
            elif path in ROUTES:
                self._send(200, *ROUTES[path](request))
            else:
                self._send(404, "text/plain", b"not found\n")

        def do_GET(self) -> None:
            self._send(404, "text/plain", b"not found\n")

        do_HEAD = do_GET

    return Handler


@contextmanager
def cached_apis() -> Iterator[Api]:
    """The stand-in on a free port of 127.0.0.1, until the block ends."""
    api = Api(0)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    api.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
