"""The executable forms run as written: real curl, a real Python process, node, against local servers.

A small recording server stands in for the proxy (it receives absolute-form requests exactly as a
proxy does) and for an upstream service. The dispatch helper runs the same forms against the live
proxy; here the point is that each form is a complete, working command or program that sends the
canonical call's exact bytes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from catalog.contracts import bind_secrets, canonical_json, forms, render_upstream
from catalog.tool import Tool

ROW = Tool.from_frontmatter(
    {
        "name": "send_note",
        "description": "Send a note.",
        "args": {
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "text": {"type": "string"},
                "urgent": {"type": "boolean"},
            },
            "required": ["to", "text"],
        },
        "upstream": {
            "method": "POST",
            "url": "http://127.0.0.1:1/notes/{to}?key=[NOTES_KEY]",
            "headers": {"authorization": "Bearer [NOTES_TOKEN]"},
            "body": {"text": "{text}", "urgent": "{urgent}"},
        },
    }
)
ARGS = {"to": "ana", "text": "Grüße, \"quoted\" & 'single' $HOME `x`", "urgent": True}


@dataclass
class Recorder:
    """What one local server received: (method, target, headers, body) per request."""

    url: str
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    """A local HTTP server that records every request and answers `{"ok": true}`."""
    seen: list[tuple[str, str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_any(self) -> None:
            size = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(size) if size else b""
            seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            answer = b'{"ok":true}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        do_GET = do_POST = do_any

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Recorder(f"http://127.0.0.1:{server.server_address[1]}", seen)
    finally:
        server.shutdown()
        server.server_close()


def door_request(recorder: Recorder) -> tuple[str, str, str, bytes]:
    assert len(recorder.seen) == 1, recorder.seen
    method, target, headers, body = recorder.seen[0]
    return method, target, headers.get("content-type", ""), body


EXPECTED = ("POST", "http://flightlog.local/api/dispatch", "application/json")


def test_the_curl_form_sends_the_canonical_call_through_the_proxy(recorder: Recorder) -> None:
    """Pasted into a shell, the curl form sends the canonical call's exact bytes to the door via the proxy."""
    command = forms(ROW, ARGS, proxy=recorder.url)["curl"]["command"]
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True}
    method, target, kind, body = door_request(recorder)
    assert (method, target, kind) == EXPECTED
    assert body == canonical_json({"tool": "send_note", "args": ARGS}).encode()


def test_the_python_form_sends_the_same_bytes(recorder: Recorder) -> None:
    """The httpx snippet, run as a program, sends exactly what the curl form sends (and the token)."""
    code = forms(ROW, ARGS, proxy=recorder.url, token="flt_t0ken")["python"]["code"]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"ok": True}  # the door's answer, printed as it came
    assert recorder.seen[0][2]["authorization"] == "Bearer flt_t0ken"
    method, target, kind, body = door_request(recorder)
    assert (method, target, kind) == EXPECTED
    assert body == canonical_json({"tool": "send_note", "args": ARGS}).encode()


def test_the_one_line_url_carries_the_call(recorder: Recorder) -> None:
    """The URL form, fetched through the proxy, carries the tool name and the arguments' canonical JSON."""
    url = forms(ROW, ARGS)["url"]["url"]
    httpx.get(url, proxy=recorder.url, timeout=10).raise_for_status()
    method, target, _, _ = door_request(recorder)
    query = parse_qs(urlsplit(target).query)
    assert method == "GET" and target.startswith("http://flightlog.local/api/dispatch?")
    assert query["tool"] == ["send_note"] and query["args"] == [canonical_json(ARGS)]


def test_the_javascript_form_is_a_valid_module(tmp_path: Path) -> None:
    """node accepts the fetch snippet as an ES module, and its body literal is the canonical call."""
    node = shutil.which("node")
    assert node, "node is needed to check the JavaScript form"
    code = forms(ROW, ARGS)["javascript"]["code"]
    (tmp_path / "form.mjs").write_text(code)
    done = subprocess.run([node, "--check", str(tmp_path / "form.mjs")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    literal = next(line for line in code.splitlines() if line.strip().startswith("body:"))
    assert json.loads(literal.split("body:", 1)[1].rstrip(",")) == canonical_json(
        {"tool": "send_note", "args": ARGS}
    )


def test_the_upstream_form_bound_with_secrets_is_the_request_the_service_gets(recorder: Recorder) -> None:
    """render_upstream + bind_secrets give a request that, sent as is, delivers the values to the service."""
    tool = Tool.from_frontmatter(
        {
            **ROW.frontmatter(),
            "upstream": {**ROW.upstream, "url": recorder.url + "/notes/{to}?key=[NOTES_KEY]"},
        }  # type: ignore[dict-item]
    )
    dry = render_upstream(tool, ARGS)
    sent = bind_secrets(dry, {"NOTES_KEY": "k/1", "NOTES_TOKEN": "t-2"})
    assert isinstance(sent, dict) and isinstance(dry, dict)
    httpx.request(
        sent["method"], sent["url"], headers=sent["headers"], content=sent["body"].encode(), timeout=10
    )
    method, target, headers, body = recorder.seen[0]
    assert (method, target) == ("POST", "/notes/ana?key=k%2F1")
    assert headers["authorization"] == "Bearer t-2" and headers["content-type"] == "application/json"
    assert body == dry["body"].encode() == canonical_json({"text": ARGS["text"], "urgent": True}).encode()
