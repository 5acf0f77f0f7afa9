"""WebSocket conversations through the proxy: every message from either side is an event with its
exact bytes (secrets replaced), numbered in order under the upgrade's action, and the close is one too.

A real proxy; the upstream is a wsproto echo server the test starts; the client speaks wsproto over a
plain socket to the forward proxy (absolute-form target), as any WebSocket client behind a proxy does.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Request,
    TextMessage,
)

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy

CANARY = "wscanary-" + uuid.uuid4().hex


def _pump(sock: socket.socket, ws: WSConnection) -> list[Event]:
    data = sock.recv(65536)
    ws.receive_data(data or None)
    return list(ws.events())


@contextmanager
def echo_server() -> Iterator[int]:
    """Answers each text message with `echo: TEXT` and each binary one reversed; closes when asked."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        ws = WSConnection(ConnectionType.SERVER)
        with conn:
            while True:
                events = _pump(conn, ws)
                if not events and ws.state.name == "CLOSED":
                    return
                for event in events:
                    if isinstance(event, Request):
                        conn.sendall(ws.send(AcceptConnection()))
                    elif isinstance(event, TextMessage):
                        conn.sendall(ws.send(TextMessage(data="echo: " + event.data)))
                    elif isinstance(event, BytesMessage):
                        conn.sendall(ws.send(BytesMessage(data=bytes(event.data)[::-1])))
                    elif isinstance(event, CloseConnection):
                        conn.sendall(ws.send(event.response()))
                        return

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def conversation(proxy_port: int, upstream_port: int, session: str) -> list[Event]:
    """Upgrade through the proxy, send a text (holding the canary) and a binary message, then close."""
    ws = WSConnection(ConnectionType.CLIENT)
    received: list[Event] = []
    with socket.create_connection(("127.0.0.1", proxy_port), timeout=10) as sock:
        target = f"http://127.0.0.1:{upstream_port}/chat"
        headers = [(b"X-Flightlog-Session", session.encode())]
        sock.sendall(
            ws.send(Request(host=f"127.0.0.1:{upstream_port}", target=target, extra_headers=headers))
        )
        assert any(isinstance(e, AcceptConnection) for e in _pump(sock, ws))
        for message in (TextMessage(data=f"hello, my key is {CANARY}"), BytesMessage(data=b"\x00\x01\xff")):
            sock.sendall(ws.send(message))
            while not (events := _pump(sock, ws)):
                pass
            received += events
        sock.sendall(ws.send(CloseConnection(code=1000, reason="done")))
        received += _pump(sock, ws)
    return received


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Event], list[object]]]:
    base = tmp_path_factory.mktemp("websocket")
    session = uuid.uuid4().hex
    env = {"WS_CANARY": CANARY}
    args = ["--secret-env", "WS_CANARY"]
    with (
        echo_server() as port,
        live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", env=env, args=args) as proxy,
    ):
        received = conversation(proxy.port, port, session)
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        try:
            events = wait_for(ledger, "session = :s", {"s": session}, 7)
            payloads = [ledger.payload(e.payload_sha256) if e.payload_sha256 else None for e in events]
        finally:
            ledger.close()
        yield base, received, [*zip(events, payloads, strict=True)]


def test_every_message_and_the_close_are_events_under_the_upgrade(
    recorded: tuple[Path, list[Event], list[object]],
) -> None:
    """Upgrade request, 101, two messages each way in order, and the close, all one action."""
    _, received, pairs = recorded
    assert [type(e).__name__ for e in received][:2] == ["TextMessage", "BytesMessage"]
    by_id = {e.event_id: (e, p) for e, p in pairs}  # type: ignore[attr-defined]
    action = next(iter(by_id.values()))[0].action_id
    assert {e.action_id for e, _ in by_id.values()} == {action}
    kinds = {i.split(":", 1)[1]: e.kind for i, (e, _) in by_id.items()}
    assert kinds == {
        "request": "http.request",
        "response": "http.response",
        "ws:1": "websocket.client",
        "ws:2": "websocket.server",
        "ws:3": "websocket.client",
        "ws:4": "websocket.server",
        "ws:close": "websocket.close",
    }
    assert by_id[f"{action}:response"][0].status == 101
    assert by_id[f"{action}:ws:2"][1] == b"echo: hello, my key is [WS_CANARY]"
    assert by_id[f"{action}:ws:3"][1] == b"\x00\x01\xff"
    assert by_id[f"{action}:ws:4"][1] == b"\xff\x01\x00"
    close = by_id[f"{action}:ws:close"][0]
    assert close.status == 1000 and close.error is None


def test_a_normally_closed_websocket_is_not_an_error(
    recorded: tuple[Path, list[Event], list[object]],
) -> None:
    """Closed with 1000: no event of the connection has an error, and asking for errors finds none
    of them (the close code in `status` is not an HTTP status)."""
    from storage.engine import make_engine
    from storage.event_reads import select_events
    from storage.filters import Filter

    base, _, pairs = recorded
    session = pairs[0][0].session  # type: ignore[attr-defined]
    assert all(e.error is None for e, _ in pairs)  # type: ignore[attr-defined]
    engine = make_engine(f"sqlite:///{base / 'ledger.db'}")
    assert select_events(engine, Filter(session=session, status="errors")) == []
    ok = select_events(engine, Filter(session=session, status="ok"))
    assert sorted(e.kind for e in ok) == ["http.response", "websocket.close"]  # the 101 and the close
    engine.dispose()


def test_secrets_in_messages_are_replaced_and_named(recorded: tuple[Path, list[Event], list[object]]) -> None:
    """The canary sent in a message (and echoed back) is `[WS_CANARY]` in both events, named on
    them, and not one byte of it is in the database file."""
    base, _, pairs = recorded
    by_suffix = {e.event_id.split(":", 1)[1]: (e, p) for e, p in pairs}  # type: ignore[attr-defined]
    sent, sent_payload = by_suffix["ws:1"]
    assert sent_payload == b"hello, my key is [WS_CANARY]"
    assert sent.redacted == ("WS_CANARY",) and by_suffix["ws:2"][0].redacted == ("WS_CANARY",)
    for path in base.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path


def test_exports_carry_the_messages(recorded: tuple[Path, list[Event], list[object]], tmp_path: Path) -> None:
    """HAR has `_webSocketMessages` in Chrome's shape (send/receive, opcode 1 text, 2 binary in base64);
    the mitmproxy flow file holds `flow.websocket` with every message and the close, read back by
    mitmproxy's own reader and opened by `mitmdump -nr`."""
    import base64
    import io
    import json
    import subprocess
    import sys

    from mitmproxy.io import FlowReader

    from readback.export import export, plan
    from readback.recorded import Selection
    from storage.filters import Filter

    base, _, pairs = recorded
    session = pairs[0][0].session  # type: ignore[attr-defined]
    ledger = ledger_of(f"sqlite:///{base / 'ledger.db'}", (base / "home" / "blobs").as_uri())
    try:
        selection = Selection(filter=Filter(session=session))
        har, flows = io.BytesIO(), io.BytesIO()
        export(ledger, "har", plan(ledger, selection, "har"), har)
        export(ledger, "mitmproxy", plan(ledger, selection, "mitmproxy"), flows)
    finally:
        ledger.close()
    (entry,) = json.loads(har.getvalue())["log"]["entries"]
    assert entry["_resourceType"] == "websocket"
    messages = [(m["type"], m["opcode"], m["data"]) for m in entry["_webSocketMessages"]]
    assert messages == [
        ("send", 1, "hello, my key is [WS_CANARY]"),
        ("receive", 1, "echo: hello, my key is [WS_CANARY]"),
        ("send", 2, base64.b64encode(b"\x00\x01\xff").decode()),
        ("receive", 2, base64.b64encode(b"\xff\x01\x00").decode()),
    ]
    (flow,) = list(FlowReader(io.BytesIO(flows.getvalue())).stream())
    assert flow.websocket is not None  # type: ignore[attr-defined]
    got = [(m.from_client, m.is_text, m.content) for m in flow.websocket.messages]  # type: ignore[attr-defined]
    assert got == [
        (True, True, b"hello, my key is [WS_CANARY]"),
        (False, True, b"echo: hello, my key is [WS_CANARY]"),
        (True, False, b"\x00\x01\xff"),
        (False, False, b"\xff\x01\x00"),
    ]
    assert flow.websocket.close_code == 1000  # type: ignore[attr-defined]
    path = tmp_path / "ws.flows"
    path.write_bytes(flows.getvalue())
    mitmdump = Path(sys.executable).with_name("mitmdump")
    shown = subprocess.run(
        [str(mitmdump), "-nr", str(path), "--flow-detail", "3"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert "echo: hello, my key is [WS_CANARY]" in shown.stdout
