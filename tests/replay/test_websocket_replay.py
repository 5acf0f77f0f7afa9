"""A recorded WebSocket conversation played back by `run --replay` with its server gone."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.capture.test_websocket import echo_server
from tests.replay.conftest import flightlog

CLIENT = str(Path(__file__).with_name("ws_client.py"))


def test_websocket_conversation_replays_with_the_server_closed(home: Path) -> None:
    """Recorded through `run` against an echo server, then replayed after it closed: the client gets
    the same server messages, in order, text and binary; nothing diverged, nothing went live."""
    with echo_server() as port:
        url = f"http://127.0.0.1:{port}/chat"
        recorded = flightlog(home, "run", "--session", "ws", "--", sys.executable, CLIENT, url)
        assert recorded.code == 0, recorded.err
    assert recorded.out.splitlines() == [
        "TextMessage 'echo: hello'",
        "BytesMessage b'\\xff\\x01\\x00'",
    ]
    report = home.parent / "report.json"
    replayed = flightlog(
        home, "run", "--replay", "session ws", "--report-json", str(report), "--", sys.executable, CLIENT, url
    )
    assert replayed.code == 0, replayed.err
    assert replayed.out == recorded.out
    assert replayed.report is not None
    assert replayed.report["websocket_diverged"] == [] and replayed.report["live_calls"] == 0
    assert replayed.report["upstream_connections_blocked"] == 0
