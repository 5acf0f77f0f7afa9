"""MCP over HTTP through a live proxy: the official client and an SDK server, each message an event."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text

from recording.mcp.http_messages import message_at
from storage.events import StoredEvent
from storage.ledger import Ledger, open_ledger
from tests.mcp.support import sdk_server
from tests.support.proxy import live_proxy


@pytest.fixture(params=["--http", "--http-json", "--sse"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    """The SDK server over streamable HTTP (SSE answers, JSON answers) or the old HTTP+SSE transport."""
    with sdk_server(request.param) as port:
        yield request.param, port


async def _scenario(mode: str, base: str) -> list[Any]:
    got: list[Any] = []
    transport = sse_client(f"{base}/sse") if mode == "--sse" else streamable_http_client(f"{base}/mcp")
    with anyio.fail_after(60):
        async with transport as streams, ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            got.append(sorted(t.name for t in (await s.list_tools()).tools))
            got.append((await s.call_tool("add", {"a": 2, "b": 3})).model_dump(mode="json"))
            got.append((await s.call_tool("fail", {"why": "sk-live-1234567890"})).model_dump(mode="json"))
            got.append((await s.call_tool("count", {"n": 2})).model_dump(mode="json"))
    return got


def _mcp_events(ledger: Ledger) -> list[StoredEvent]:
    """Every MCP event, read once: the proxy was stopped, and stopping drains its queue into the
    Ledger, so nothing is still on its way (waiting for a count here only waited out a timeout)."""
    with ledger.engine.connect() as c:
        ids = [r[0] for r in c.execute(text("SELECT event_id FROM events WHERE kind LIKE 'mcp.%'"))]
    return sorted(ledger.events(ids), key=lambda e: (e.at, e.seq))


def test_official_client_over_http_through_the_proxy_gets_each_message_recorded(
    server: tuple[str, int], tmp_path: Path
) -> None:
    """Through the proxy the client gets the same answers as direct; every JSON-RPC message of the
    exchanges is one event under its exchange's action, an `artifact` pointing at its bytes in the
    exchange's payload (or, made while a GET stream was open, carrying those same bytes); each call
    and its result share `parent` (the old transport's results arrive on the GET stream, another
    exchange); tools/call events name the tool; the failing call's result
    carries the error, with the configured secret replaced in it as in the exchange's bytes."""
    mode, port = server
    direct = anyio.run(_scenario, mode, f"http://127.0.0.1:{port}")
    secrets = tmp_path / "secrets.env"
    secrets.write_text("DEMO_KEY=sk-live-1234567890\n")
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    args = ["--mode", f"reverse:http://127.0.0.1:{port}@0", "--secrets", str(secrets)]
    with live_proxy(tmp_path / "home", ledger_url, args=args) as proxy:
        through = anyio.run(_scenario, mode, f"http://127.0.0.1:{proxy.reverse_port(str(port))}")
    assert through == direct
    ledger = open_ledger(ledger_url, proxy.blobs_url)
    events = _mcp_events(ledger)
    # initialize, notifications/initialized, tools/list and three tools/call, each call with its result
    assert len(events) == 11, [e.kind for e in events]
    by_kind: dict[str, list[StoredEvent]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    calls, results = by_kind["mcp.tools/call"], by_kind["mcp.tools/call.result"]
    assert [c.tool for c in calls] == ["add", "fail", "count"]
    assert [r.tool for r in results] == ["add", "fail", "count"]
    assert [r.parent for r in results] == [c.parent for c in calls]
    assert len({c.parent for c in calls}) == 3
    assert results[1].error == "tool error: Error executing tool fail: [DEMO_KEY]"
    for kind in ("mcp.initialize", "mcp.tools/list"):
        assert [r.parent for r in by_kind[kind + ".result"]] == [c.parent for c in by_kind[kind]]
    assert len(by_kind["mcp.notifications/initialized"]) == 1
    ids = [e.event_id for e in events]
    assert len(ids) == len(set(ids))
    for e in events:
        exchange_id, n = e.event_id.rsplit(":mcp:", 1)
        (exchange,) = ledger.events([exchange_id])
        assert exchange.action_id == e.action_id
        data = message_at(ledger.payload(exchange.payload_sha256 or ""), exchange.head, int(n))
        if e.payload_state == "complete":  # made while its GET stream was open: it carries its bytes
            assert exchange.method == "GET" and ledger.payload(e.payload_sha256 or "") == data
        else:
            assert e.payload_state == "artifact" and e.payload_sha256 is None
        assert b"sk-live-1234567890" not in data
        if e.tool:
            assert f'"{e.tool}"'.encode() in data or e.kind.endswith(".result")
    if mode == "--sse":
        assert {r.action_id for r in results}.isdisjoint({c.action_id for c in calls})
    else:
        assert [r.action_id for r in results] == [c.action_id for c in calls]
