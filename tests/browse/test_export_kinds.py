"""Every exchange kind the Ledger holds, exported and read back by the readers people use: HAR
validated against the HAR 1.2 schema, mitmproxy flow files loaded by mitmproxy's own `FlowReader`
and by `mitmdump -nr`, OTLP spans decoded by a receiver with opentelemetry-proto.

The kinds are recorded live, by a real proxy with real clients against local upstreams: a plain
HTTP exchange, a streamed model answer (a slow model API whose first token comes after its opening
events), a CONNECT refused by the egress policy, a CONNECT to a port nobody listens on, a request
refused by the policy, a WebSocket conversation, and an MCP `tools/call` (the MCP SDK's client and
server) through a reverse listener.
"""

from __future__ import annotations

import io
import json
import socket
import ssl
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import jsonschema
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from readback.export import export, export_otlp, plan
from readback.recorded import Selection
from storage.events import StoredEvent
from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.capture.test_websocket import conversation, echo_server
from tests.mcp.support import sdk_server
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.slow_model import MODEL_CHAT, slow_model
from tests.support.upstream import upstream

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "har-1.2.schema.json").read_text())
POLICY = """
[[rule]]
name = "no-denied"
action = "deny"
paths = ["/denied*"]

[[rule]]
name = "blocked-host"
action = "deny"
hosts = ["blocked.example"]
"""
KINDS = ("plain", "streamed", "connect refused", "connect failed", "refused request", "websocket", "mcp")


@dataclass
class Recorded:
    """The Ledger, and each kind's action id (one session per kind)."""

    ledger: Ledger
    actions: dict[str, str]
    closed_port: int


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _mcp_echo(base: str) -> str:
    async with streamable_http_client(f"{base}/mcp") as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        result = await s.call_tool("echo", {"text": "hello"})
    return str(result.content[0].text)  # type: ignore[union-attr]


def _session_client(proxy: LiveProxy, session: str, ca: Path) -> httpx.Client:
    trust = ssl.create_default_context(cafile=str(ca))
    return httpx.Client(proxy=f"http://session={session}:x@127.0.0.1:{proxy.port}", verify=trust, timeout=30)


def _record(proxy: LiveProxy, plain: int, model: str, ws: int, mcp: int, closed: int) -> dict[str, str]:
    """One exchange of each kind, each in a session of its own; the session names by kind."""
    sessions = {kind: uuid.uuid4().hex for kind in KINDS}
    with _session_client(proxy, sessions["plain"], proxy.ca) as c:
        assert c.get(f"http://127.0.0.1:{plain}/fixed").status_code == 200
    with _session_client(proxy, sessions["streamed"], proxy.ca) as c:
        body = {"model": MODEL_CHAT, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        assert "[DONE]" in c.post(f"{model}/v1/chat/completions", json=body).text
    with _session_client(proxy, sessions["connect refused"], proxy.ca) as c, pytest.raises(httpx.ProxyError):
        c.get("https://blocked.example/anything")
    with _session_client(proxy, sessions["connect failed"], proxy.ca) as c, pytest.raises(httpx.ProxyError):
        c.get(f"https://127.0.0.1:{closed}/nothing")
    with _session_client(proxy, sessions["refused request"], proxy.ca) as c:
        assert c.get(f"http://127.0.0.1:{plain}/denied/1").status_code == 403
    conversation(proxy.port, ws, sessions["websocket"])
    port = proxy.reverse_port(str(mcp))
    assert anyio.run(_mcp_echo, f"http://127.0.0.1:{port}/_flightlog/session={sessions['mcp']}") == "hello"
    return sessions


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    root = tmp_path_factory.mktemp("export-kinds")
    (root / "egress.toml").write_text(POLICY)
    closed = _closed_port()
    with (
        sdk_server("--http-json") as mcp_port,
        upstream() as plain,
        slow_model(pause=0.2) as model,
        echo_server() as ws,
    ):
        args = [
            "--policy", str(root / "egress.toml"),
            "--mode", f"reverse:http://127.0.0.1:{mcp_port}@0",
        ]  # fmt: skip
        url = f"sqlite:///{root / 'ledger.db'}"
        proxy = start_proxy(root / "home", url, args=args)
        try:
            sessions = _record(proxy, plain.port, model.base, ws, mcp_port, closed)
        finally:
            proxy.stop()
        ledger = ledger_of(url, proxy.blobs_url)
        actions = {}
        for kind, session in sessions.items():
            events = wait_for(ledger, "session = :s", {"s": session}, 2)
            first = "mcp.tools/call" if kind == "mcp" else ("http.request", "connection.attempt")
            opening = [e for e in events if e.kind in first]
            assert opening, (kind, events)
            actions[kind] = opening[0].action_id
        yield Recorded(ledger, actions, closed)
        ledger.close()


def _exported(ledger: Ledger, fmt: str, action: str) -> bytes:
    out = io.BytesIO()
    export(ledger, fmt, plan(ledger, Selection(actions=(action,)), fmt), out)
    return out.getvalue()


def _events(r: Recorded, kind: str) -> dict[str, StoredEvent]:
    return {e.kind: e for e in r.ledger.action(r.actions[kind])}


def _request(r: Recorded, kind: str) -> StoredEvent:
    """The request of a kind's action: its `http.request`, or the attempt of a CONNECT refused before
    any exchange."""
    events = _events(r, kind)
    return events.get("http.request") or events["connection.attempt"]


def _answer(r: Recorded, kind: str) -> StoredEvent | None:
    """The answer of a kind's action: its `http.response`, or the refusal of a refused CONNECT."""
    events = _events(r, kind)
    return events.get("http.response") or (
        events.get("policy.refused") if "http.request" not in events else None
    )


# -- HAR ----------------------------------------------------------------------------------------

HAR_URLS: dict[str, Callable[[Recorded], str]] = {
    "connect refused": lambda r: "https://blocked.example:443/",
    "connect failed": lambda r: f"http://127.0.0.1:{r.closed_port}/",
}


@pytest.mark.parametrize("kind", KINDS)
def test_har_of_every_kind_is_valid_har_1_2_with_absolute_urls_and_byte_timings(
    recorded: Recorded, kind: str
) -> None:
    """Each kind's HAR validates against the HAR 1.2 schema; its URL is absolute (a CONNECT's as its
    tunnel's origin, the authority-form target kept under `_flightlog`); `wait` is the time to the
    answer's first byte and `receive` the rest to its last, and `time` their sum."""
    har = json.loads(_exported(recorded.ledger, "har", recorded.actions[kind]))
    jsonschema.validate(har, SCHEMA)
    (entry,) = har["log"]["entries"]
    url = entry["request"]["url"]
    assert url.split("://", 1)[0] in ("http", "https") and "/" in url.split("://", 1)[1], url
    if kind in HAR_URLS:
        assert entry["request"]["method"] == "CONNECT"
        assert url == HAR_URLS[kind](recorded)
        assert entry["_flightlog"]["target"] == url.split("://", 1)[1].rstrip("/")
    answer = _answer(recorded, kind)
    timings = entry["timings"]
    if answer is not None and answer.first_byte_ms is not None:
        assert timings["wait"] == pytest.approx(answer.first_byte_ms)
        assert timings["receive"] == pytest.approx((answer.last_byte_ms or 0) - answer.first_byte_ms)
    assert entry["time"] == pytest.approx(sum(v for v in timings.values() if v > 0))


def test_har_of_a_stream_waits_for_its_first_byte_and_receives_the_rest(recorded: Recorded) -> None:
    """The streamed answer's first byte came before its first token, which the slow model held back:
    so `wait` ends before the first token and `receive` holds the rest, not zero."""
    har = json.loads(_exported(recorded.ledger, "har", recorded.actions["streamed"]))
    timings = har["log"]["entries"][0]["timings"]
    answer = _events(recorded, "streamed")["http.response"]
    assert answer.first_token_ms is not None
    assert timings["wait"] < answer.first_token_ms <= timings["wait"] + timings["receive"]


# -- mitmproxy ----------------------------------------------------------------------------------


def _flows(r: Recorded, kind: str) -> list[Any]:
    from mitmproxy.io import FlowReader

    return list(FlowReader(io.BytesIO(_exported(r.ledger, "mitmproxy", r.actions[kind]))).stream())


@pytest.mark.parametrize("kind", KINDS)
def test_mitmproxy_reads_every_kind_back_as_recorded(recorded: Recorded, kind: str) -> None:
    """mitmproxy's FlowReader loads each kind's flow: the recorded method and URL (a CONNECT in
    authority-form: no scheme, no path, its authority `host:port`), the status or the error, and a
    WebSocket's messages."""
    (flow,) = _flows(recorded, kind)
    request = _request(recorded, kind)
    assert flow.request.method == request.method
    if request.method == "CONNECT":
        host, port = (request.url or "").rsplit(":", 1)
        assert (flow.request.scheme, flow.request.path) == ("", "")
        assert flow.request.authority == request.url and (flow.request.host, flow.request.port) == (
            host,
            int(port),
        )
    else:
        assert flow.request.url == request.url
    answer = _answer(recorded, kind)
    if answer is not None and answer.status is not None:
        assert flow.response is not None and flow.response.status_code == answer.status
    else:
        assert flow.response is None and flow.error is not None
    if kind == "websocket":
        assert flow.websocket is not None and len(flow.websocket.messages) >= 4


def test_mitmdump_lists_every_kind_as_mitmproxy_writes_it(recorded: Recorded, tmp_path: Path) -> None:
    """`mitmdump -nr` (mitmproxy's own loader) reads the flows of every kind in one file, and shows a
    CONNECT as `CONNECT host:port`, not a URL read out of its authority."""
    path = tmp_path / "all.mitm"
    ids = [recorded.actions[k] for k in KINDS]
    out = io.BytesIO()
    export(
        recorded.ledger, "mitmproxy", plan(recorded.ledger, Selection(actions=tuple(ids)), "mitmproxy"), out
    )
    path.write_bytes(out.getvalue())
    mitmdump = Path(sys.executable).parent / "mitmdump"
    done = subprocess.run(
        [str(mitmdump), "-n", "-r", str(path), "--set", f"confdir={tmp_path / 'conf'}", "--flow-detail", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "CONNECT blocked.example:443" in done.stdout, done.stdout
    assert f"CONNECT 127.0.0.1:{recorded.closed_port}" in done.stdout, done.stdout
    assert "CONNECT :80" not in done.stdout and "/fixed" in done.stdout and "/denied/1" in done.stdout


# -- OTLP ---------------------------------------------------------------------------------------


@contextmanager
def receiver() -> Iterator[tuple[str, list[Any]]]:
    """An OTLP/HTTP receiver decoding what it is sent with opentelemetry-proto."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            request = ExportTraceServiceRequest.FromString(
                self.rfile.read(int(self.headers["Content-Length"]))
            )
            received.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _attributes(span: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


SPAN_NAMES = {
    "plain": "GET",
    "streamed": f"chat {MODEL_CHAT}",
    "connect refused": "CONNECT",
    "connect failed": "CONNECT",
    "refused request": "GET",
    "websocket": "GET",
    "mcp": "tools/call echo",
}


@pytest.mark.parametrize("kind", KINDS)
def test_otlp_of_every_kind_decodes_in_a_receiver(recorded: Recorded, kind: str) -> None:
    """Each kind's spans reach an OTLP receiver and decode: one span for the exchange (with its
    children, for MCP), each with a name, a start no later than its end, and the run's trace."""
    with receiver() as (endpoint, spans):
        sent = export_otlp(recorded.ledger, [recorded.actions[kind]], endpoint, content=True)
    assert sent == len(spans) >= 1
    calls = [s for s in spans if _attributes(s).get("gen_ai.operation.name") != "invoke_agent"]
    assert calls and all(s.start_time_unix_nano <= s.end_time_unix_nano for s in calls)
    assert SPAN_NAMES[kind] in [s.name for s in calls], [s.name for s in calls]


def test_otlp_mcp_tool_span_carries_the_tools_own_arguments_and_result(recorded: Recorded) -> None:
    """The MCP `tools/call echo` span, decoded: its arguments are the tool's own (`params.arguments`),
    its result the tool's content blocks, neither a JSON-RPC frame (no `jsonrpc`, no `method`)."""
    with receiver() as (endpoint, spans):
        export_otlp(recorded.ledger, [recorded.actions["mcp"]], endpoint, content=True)
    (tool,) = [s for s in spans if s.name == "tools/call echo"]
    attrs = _attributes(tool)
    arguments = json.loads(attrs["gen_ai.tool.call.arguments"])
    result = json.loads(attrs["gen_ai.tool.call.result"])
    assert arguments == {"text": "hello"}
    assert result == [{"type": "text", "text": "hello"}]
    assert "jsonrpc" not in attrs["gen_ai.tool.call.arguments"] and "method" not in arguments
