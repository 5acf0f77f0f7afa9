"""Local upstream servers for tests: plain HTTP and HTTPS (self-signed), recording what they received.

Routes (any method):
  /echo          200, the request body back (Content-Type/-Encoding kept), header names in X-Seen-Headers
  /bytes/N       200, N deterministic bytes (Content-Length)
  /fixed         200, the same 1 KiB JSON every time
  /gzip          200, a gzip-encoded JSON body (Content-Encoding: gzip)
  /sse/N         200, text/event-stream, N events 30 ms apart (chunked); with `?gate=KEY`, the events
                 after the first (`&after=K`: the first K) only once the client opens KEY
                 (tests/support/gates.py)
  /v1/chat/completions   an OpenAI-shaped answer; streamed (SSE, with usage) when the body asks; when
                 the body offers `tools` (see `tool_turn`): a call of the first tool (a fresh `call_` id
                 each time), or, after a tool result, an answer quoting it
  /v1/messages   an Anthropic-shaped streamed answer (message_start ... message_stop)
  ?delay=S       on the two model routes: their stream's events S seconds apart (a slow model)
  anything else  404
`server.received` lists (method, path, head_bytes, body_bytes) of every request, in order.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import ipaddress
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

from tests.support import gates

FIXED = json.dumps({"tools": [f"tool_{i:04d}" for i in range(90)]}).encode()[:1024]


def pattern(n: int) -> bytes:
    """N deterministic, poorly compressible bytes."""
    out = bytearray()
    block = b"seed"
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


@dataclass
class Upstream:
    server: ThreadingHTTPServer
    scheme: str
    received: list[tuple[str, str, bytes, bytes]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base(self) -> str:
        host = "localhost" if self.scheme == "https" else "127.0.0.1"
        return f"{self.scheme}://{host}:{self.port}"


def _chat_answer(request: dict[str, object]) -> dict[str, object]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": request.get("model", "gpt-4o-mini"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def _chat_chunks(request: dict[str, object]) -> Iterator[bytes]:
    model = request.get("model", "gpt-4o-mini")
    for i, word in enumerate(["Hel", "lo", "!"]):
        chunk = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None if i < 2 else "stop"}],
        }
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    usage = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    yield b"data: " + json.dumps(usage).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _message_events(request: dict[str, object]) -> Iterator[bytes]:
    """Anthropic's Messages API stream, event by event, as the SDK reads it."""
    model = request.get("model", "claude-3-5-haiku-latest")
    events: list[tuple[str, dict[str, object]]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hel"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "lo!"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 4},
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    for name, data in events:
        yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def tool_turn(request: dict[str, object]) -> tuple[str | None, str, str]:
    """(tool name or None, tool-call id, text) of an agent-shaped turn: the first offered tool is called
    with the user's last word as `city`; once a tool result is in the messages, it is quoted back."""
    messages = [m for m in request.get("messages") or [] if isinstance(m, dict)]  # type: ignore[attr-defined]
    tools = request.get("tools") or []
    results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
    if results:
        return None, "", f"The tool said: {results[-1]}"
    name = str(tools[0]["function"]["name"])  # type: ignore[index]
    words = str(messages[-1].get("content", "")).rstrip("?.! ").split() if messages else []
    return name, f"call_{uuid.uuid4().hex[:24]}", json.dumps({"city": words[-1] if words else ""})


def _tool_chunks(request: dict[str, object]) -> Iterator[bytes]:
    model = request.get("model", "gpt-4o-mini")
    name, call_id, text = tool_turn(request)

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        doc = {
            "id": "chatcmpl-tools",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    if name is not None:
        head = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        yield chunk({"role": "assistant", "content": None, "tool_calls": [head]})
        for part in (text[: len(text) // 2], text[len(text) // 2 :]):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})
        yield chunk({}, "tool_calls")
    else:
        yield chunk({"role": "assistant", "content": ""})
        for word in text.split(" "):
            yield chunk({"content": word + " "})
        yield chunk({}, "stop")
    usage = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
    doc = {"id": "chatcmpl-tools", "object": "chat.completion.chunk", "created": 1, "model": model}
    yield b"data: " + json.dumps({**doc, "choices": [], "usage": usage}).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _tool_answer(request: dict[str, object]) -> dict[str, object]:
    name, call_id, text = tool_turn(request)
    message: dict[str, object] = {"role": "assistant", "content": text}
    if name is not None:
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        **_chat_answer(request),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if name else "stop"}],
    }


def _handler(up: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _body(self) -> bytes:
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                out = b""
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if not size:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _chunked(
            self,
            status: int,
            chunks: Iterator[bytes],
            headers: dict[str, str],
            delay: float,
            gate: str | None = None,
            after: int = 1,
        ) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i, chunk in enumerate(chunks):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    if gate and i == after - 1:  # the rest only once the client holds these
                        gates.hold(gate)
                    else:
                        time.sleep(delay)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

        def _any(self) -> None:
            body = self._body()
            head = (self.requestline + "\r\n").encode() + bytes(self.headers)
            up.received.append((self.command, self.path, head, body))
            path, _, query = self.path.partition("?")
            pace = float(parse_qs(query).get("delay", ["0"])[0])
            if path == "/echo":
                seen = ",".join(self.headers.keys())
                ctype = self.headers.get("Content-Type", "application/octet-stream")
                headers = {"Content-Type": ctype, "X-Seen-Headers": seen, "X-Mixed-Case": "a"}
                if self.headers.get("Content-Encoding"):
                    headers["Content-Encoding"] = self.headers["Content-Encoding"]
                self._send(200, body, headers)
            elif path.startswith("/bytes/"):
                self._send(
                    200, pattern(int(path.rsplit("/", 1)[1])), {"Content-Type": "application/octet-stream"}
                )
            elif path == "/fixed":
                self._send(200, FIXED, {"Content-Type": "application/json"})
            elif path == "/gzip":
                payload = gzip.compress(
                    json.dumps({"token": self.headers.get("X-Echo", "")}).encode(), mtime=0
                )
                self._send(200, payload, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
            elif path.startswith("/sse/"):
                n = int(path.rsplit("/", 1)[1])
                events = (f"id: {i}\ndata: event {i}\n\n".encode() for i in range(n))
                gate, after = gates.key_of(self.path), int(parse_qs(query).get("after", ["1"])[0])
                self._chunked(200, events, {"Content-Type": "text/event-stream"}, 0.03, gate, after)
            elif path == "/v1/messages":
                request = json.loads(body or b"{}")
                self._chunked(200, _message_events(request), {"Content-Type": "text/event-stream"}, pace)
            elif path == "/v1/chat/completions":
                request = json.loads(body or b"{}")
                if request.get("tools") and request.get("stream"):
                    self._chunked(200, _tool_chunks(request), {"Content-Type": "text/event-stream"}, 0.01)
                elif request.get("tools"):
                    self._send(
                        200, json.dumps(_tool_answer(request)).encode(), {"Content-Type": "application/json"}
                    )
                elif request.get("stream"):
                    self._chunked(200, _chat_chunks(request), {"Content-Type": "text/event-stream"}, pace)
                else:
                    self._send(
                        200, json.dumps(_chat_answer(request)).encode(), {"Content-Type": "application/json"}
                    )
            else:
                self._send(404, b"not found\n", {"Content-Type": "text/plain"})

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _any

    return Handler


def self_signed(directory: Path, addresses: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """A certificate for localhost / 127.0.0.1 (and `addresses`) and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    *(x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", *addresses)),
                ]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "upstream-cert.pem", directory / "upstream-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@contextmanager
def upstream(tls_dir: Path | None = None, port: int = 0, host: str = "127.0.0.1") -> Iterator[Upstream]:
    """An upstream on a free loopback port (or `port`, to come back where a recording expects it;
    `host`, to be reached from elsewhere); HTTPS with a self-signed cert when `tls_dir` is given."""
    server = ThreadingHTTPServer((host, port), BaseHTTPRequestHandler)
    server.daemon_threads = True
    up = Upstream(server, "https" if tls_dir else "http")
    server.RequestHandlerClass = _handler(up)
    if tls_dir is not None:
        cert, key = self_signed(tls_dir, (host,) if host != "127.0.0.1" else ())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield up
    finally:
        server.shutdown()
        server.server_close()
