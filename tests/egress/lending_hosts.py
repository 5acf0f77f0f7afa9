"""Test hosts that check the real key, and one that collects whatever it is sent.

`KeyHost` answers like the provider whose key it checks: OpenAI's chat completions (a bearer),
Anthropic's messages (`x-api-key`), or a code host (a bearer on `/api/user`, HTTP basic auth on a git
repository served the dumb-HTTP way); a wrong key is a 401. Every host keeps each request's head and
body (its log), which the tests search for the real values.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

Kind = Literal["openai", "anthropic", "code", "sink"]


@dataclass
class KeyHost:
    kind: Kind
    key: str
    repo: Path | None = None
    log: list[bytes] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def saw(self, text: str) -> bool:
        return any(text.encode() in entry for entry in self.log)

    def authorized(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        if self.kind == "anthropic" and "x-api-key" in headers:  # older SDKs; newer send a bearer
            return headers["x-api-key"] == self.key
        if auth.lower().startswith("basic "):
            pair = base64.b64decode(auth[6:]).decode()
            return pair.partition(":")[2] == self.key or pair.partition(":")[0] == self.key
        return auth in (f"Bearer {self.key}", f"token {self.key}")


def _answer(host: KeyHost, path: str, body: bytes) -> tuple[int, bytes, str]:
    if host.kind == "sink":
        return 200, b"thanks\n", "text/plain"
    if host.kind == "openai" and path.startswith("/v1/chat/completions"):
        model = json.loads(body or b"{}").get("model", "m")
        answer = {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello from openai"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        }  # fmt: skip
        return 200, json.dumps(answer).encode(), "application/json"
    if host.kind == "anthropic" and path.startswith("/v1/messages"):
        model = json.loads(body or b"{}").get("model", "m")
        answer = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": "hello from anthropic"}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }  # fmt: skip
        return 200, json.dumps(answer).encode(), "application/json"
    if host.kind == "code" and path.startswith("/api/user"):
        return 200, b'{"login": "octo"}', "application/json"
    if host.kind == "code" and host.repo is not None and path.startswith("/repo.git/"):
        file = (host.repo / path[len("/repo.git/") :].partition("?")[0]).resolve()
        if file.is_file() and file.is_relative_to(host.repo.resolve()):
            return 200, file.read_bytes(), "application/octet-stream"
    return 404, b"not found\n", "text/plain"


def _handler(host: KeyHost) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _any(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            host.log.append((self.requestline + "\r\n").encode() + bytes(self.headers) + body)
            headers = {k.lower(): v for k, v in self.headers.items()}
            if host.kind != "sink" and not host.authorized(headers):
                status, payload, ctype = 401, b'{"error": "bad key"}', "application/json"
            else:
                status, payload, ctype = _answer(host, self.path, body)
            self.send_response(status)
            if status == 401 and host.kind == "code":
                self.send_header("WWW-Authenticate", 'Basic realm="code"')
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _any

    return Handler


@contextmanager
def key_host(
    kind: Kind,
    key: str,
    repo: Path | None = None,
    tls: tuple[Path, Path] | None = None,
    address: str = "127.0.0.1",
) -> Iterator[KeyHost]:
    """A host on a free port of `address` (HTTPS with `tls`: certificate and key files)."""
    host = KeyHost(kind, key, repo)
    server = ThreadingHTTPServer((address, 0), _handler(host))
    server.daemon_threads = True
    if tls is not None:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    host.server = server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()


def bare_repo(root: Path) -> Path:
    """A bare git repository with one commit (a README), ready to be served the dumb-HTTP way."""
    work, bare = root / "work", root / "repo.git"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "README").write_text("lent, not given\n")
    subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)
    return bare
