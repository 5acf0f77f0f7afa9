"""A Ledger of MCP traffic for the browser: a stdio session and MCP over HTTP through the proxy.

The events are made by the recording's own functions, as the writer makes them: the stdio lines by
`mcp_stdio_events.stdio_event` (as `flightlog mcp-record` records them), the HTTP messages by
`mcp_messages.derived` from an exchange's request and answer. So the browser reads rows exactly as
recording leaves them.

- stdio session `sess1` of `python server.py`: initialize and its result, the initialized
  notification, `tools/call echo {"text": "hello"}` answered after 12 ms, `tools/call add {"a": 2}`
  answered with a JSON-RPC error after 30 ms, `tools/call slow` never answered, the session's end.
- HTTP `h1`: a POST of `tools/call weather {"city": "Paris"}` answered in its own SSE answer.
- HTTP `h2`: a POST of `tools/call forecast {"days": 3}` answered 202, its result arriving on the
  session's GET stream `h3`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from recording.events import Processing
from recording.identity import Identity
from recording.mcp import http_messages as mcp_messages
from recording.mcp import stdio_events as mcp_stdio_events
from recording.records import StdioRecord
from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

T = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SERVER = "python server.py"
WHO = Identity(agent="alpha", session="s9")


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


STDIO_LINES: list[tuple[float, str, dict[str, Any]]] = [
    (
        0.000,
        "client",
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}},
    ),
    (
        0.004,
        "server",
        {"jsonrpc": "2.0", "id": 0, "result": {"serverInfo": {"name": "demo", "version": "1"}}},
    ),
    (0.005, "client", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    (
        1.000,
        "client",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello"}},
        },
    ),
    (
        1.012,
        "server",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "hello"}], "isError": False},
        },
    ),
    (
        2.000,
        "client",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2}}},
    ),
    (
        2.030,
        "server",
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "missing argument b"}},
    ),
    (
        3.000,
        "client",
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "slow", "arguments": {}}},
    ),
]


def stdio_events(lines: list[tuple[float, str, dict[str, Any]]] = STDIO_LINES) -> list[Event]:
    """A stdio session's events (by default the sample's `STDIO_LINES`), through the writer's own
    `stdio_event`."""
    pairs = mcp_stdio_events.Pairing()
    proc = Processing()
    base = T.timestamp()
    index = {"client": 0, "server": 0}
    start = json.dumps({"command": SERVER.split(), "pid": 42}).encode()
    records = [StdioRecord("sess1", SERVER, WHO, "start", 0, base - 0.5, start, len(start))]
    for offset, origin, value in lines:
        index[origin] += 1
        data = _line(value)
        records.append(
            StdioRecord("sess1", SERVER, WHO, origin, index[origin], base + offset, data, len(data))
        )
    records.append(StdioRecord("sess1", SERVER, WHO, "end", 0, base + 4.0, b"", 0, 0))
    return [
        mcp_stdio_events.stdio_event(proc, rec, collector="mcp-record:sess1", seq=n, pairs=pairs)
        for n, rec in enumerate(records, 1)
    ]


def _head(start: str, *fields: tuple[str, str]) -> bytes:
    return ("\r\n".join([start, *(f"{k}: {v}" for k, v in fields)]) + "\r\n\r\n").encode()


def _exchange(
    flow: str, at: datetime, method: str, request: bytes | None, status: int, ctype: str, answer: bytes | None
) -> tuple[Event, Event]:
    url = "https://tools.example.com/mcp"
    common = {
        "action_id": flow,
        "collector": "proxy",
        "url": url,
        "host": "tools.example.com",
        "method": method,
    }
    common.update(agent="alpha", session="s9")
    req = Event(
        event_id=f"{flow}:request",
        kind="http.request",
        direction="out",
        at=at,
        seq=0,
        head=_head(f"{method} /mcp HTTP/1.1", ("Host", "tools.example.com"), ("Mcp-Session-Id", "web1")),
        payload=request,
        payload_state="complete" if request else "none",
        **common,  # type: ignore[arg-type]
    )
    res = Event(
        event_id=f"{flow}:response",
        kind="http.response",
        direction="in",
        at=at + timedelta(milliseconds=40),
        seq=0,
        status=status,
        head=_head(f"HTTP/1.1 {status} OK", ("Content-Type", ctype), ("Mcp-Session-Id", "web1")),
        payload=answer,
        payload_state="complete" if answer else "none",
        **common,  # type: ignore[arg-type]
    )
    return req, res


def _sse(*values: dict[str, Any]) -> bytes:
    return b"".join(b"event: message\ndata: " + _line(v) + b"\n\n" for v in values)


def http_events() -> list[Event]:
    """Three exchanges and their message events, through the writer's own `derived`."""
    weather = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "weather", "arguments": {"city": "Paris"}},
    }
    sunny = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "sunny, 18 C"}]}}
    forecast = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "tools/call",
        "params": {"name": "forecast", "arguments": {"days": 3}},
    }
    later = {"jsonrpc": "2.0", "id": 8, "result": {"content": [{"type": "text", "text": "rain, then sun"}]}}
    exchanges = [
        _exchange(
            "h1", T + timedelta(seconds=10), "POST", _line(weather), 200, "text/event-stream", _sse(sunny)
        ),
        _exchange("h3", T + timedelta(seconds=19), "GET", None, 200, "text/event-stream", _sse(later)),
        _exchange("h2", T + timedelta(seconds=20), "POST", _line(forecast), 202, "application/json", None),
    ]
    memo = mcp_messages.Memory()
    seq = iter(range(100, 1000))
    out: list[Event] = []
    # the order the writer sees them: h3's GET request, h1 whole, h2 whole, then h3's stream ends
    order = [exchanges[1][0], *exchanges[0], *exchanges[2], exchanges[1][1]]
    for event in order:
        payload = event.payload if isinstance(event.payload, bytes) else None
        event = replace(event, seq=next(seq))
        out.append(event)
        out += mcp_messages.derived(event, lambda p=payload: p, lambda: next(seq), memo)
    # the stream's result came 2 s after the POST that asked for it
    late = T + timedelta(seconds=22)
    return [replace(e, at=late) if e.action_id == "h3" and e.kind != "http.request" else e for e in out]


def fill(ledger: Ledger) -> None:
    ledger.append(Batch(collector="mcp-record:sess1", position=1, events=tuple(stdio_events())))
    ledger.append(Batch(collector="proxy", position=1, events=tuple(http_events())))


@pytest.fixture
def mcp_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """The MCP sample in a SQLite Ledger."""
    opened = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    fill(opened)
    yield opened
    opened.close()
