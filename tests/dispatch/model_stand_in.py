"""A local stand-in for the OpenAI and Anthropic APIs: keeps each request, answers with a tool call of
the first tool it was given (the public APIs cannot be reached here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ARGS = {"city": "Bern"}


class StandIn:
    """Chat completions, Responses and Messages, each answering one call of its first tool with ARGS."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stand_in.seen.append((self.path, body))
                tool = body["tools"][0]
                name = tool.get("name") or tool["function"]["name"]
                raw = json.dumps(stand_in.answer(self.path, name)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, name: str) -> dict[str, Any]:
        args = json.dumps(ARGS)
        if path.endswith("/chat/completions"):
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            }
        if path.endswith("/responses"):
            item = {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": name,
                "arguments": args,
                "status": "completed",
            }
            return {
                "id": "r1",
                "object": "response",
                "created_at": 0,
                "model": "m",
                "status": "completed",
                "output": [item],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
            }
        use = {"type": "tool_use", "id": "tu_1", "name": name, "input": ARGS}
        return {
            "id": "m1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [use],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }


@contextmanager
def stand_in() -> Iterator[StandIn]:
    s = StandIn()
    try:
        yield s
    finally:
        s.server.shutdown()
        s.server.server_close()
