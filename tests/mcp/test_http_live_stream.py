"""MCP over HTTP through a live proxy while a long-lived event stream is still open: each message
that arrives on it is an event in the Ledger at once, not when the stream ends.

The official client and an SDK server (tests/mcp/sdk_server.py): over streamable HTTP a notification
of the session (`touch`: resources/updated) goes on the client's GET stream, open for the whole
session; over the older HTTP+SSE transport every result goes on its one GET /sse stream.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text

from readback.mcp_bytes import message_bytes
from recording.mcp.http_messages import message_at
from storage.events import StoredEvent
from storage.ledger import Ledger, open_ledger
from tests.mcp.test_http_proxy import server
from tests.support.proxy import live_proxy

__all__ = ["server"]


def _events(ledger: Ledger, kind: str) -> list[StoredEvent]:
    with ledger.engine.connect() as c:
        ids = [r[0] for r in c.execute(text("SELECT event_id FROM events WHERE kind = :k"), {"k": kind})]
    return list(ledger.events(ids))


async def _wait_for(ledger: Ledger, kind: str, timeout: float = 20.0) -> list[StoredEvent]:
    deadline = time.monotonic() + timeout
    while not (found := await anyio.to_thread.run_sync(_events, ledger, kind)):
        if time.monotonic() > deadline:
            return []
        await anyio.sleep(0.1)
    return found


async def _while_open(mode: str, base: str, ledger: Ledger) -> dict[str, Any]:
    """Run a session and, before closing it, read from the Ledger what its open GET stream carried."""
    seen: dict[str, Any] = {}
    notified = anyio.Event()

    async def on_message(message: Any) -> None:
        if "resources/updated" in repr(message) or "ResourceUpdated" in type(message).__name__:
            notified.set()

    transport = sse_client(f"{base}/sse") if mode == "--sse" else streamable_http_client(f"{base}/mcp")
    with anyio.fail_after(60):
        async with (
            transport as streams,
            ClientSession(streams[0], streams[1], message_handler=on_message) as s,
        ):
            await s.initialize()
            if mode == "--sse":
                seen["answer"] = (await s.call_tool("add", {"a": 2, "b": 3})).model_dump(mode="json")
                kind = "mcp.tools/call.result"
            else:
                seen["answer"] = (await s.call_tool("touch", {"uri": "note://greeting"})).model_dump(
                    mode="json"
                )
                await notified.wait()
                kind = "mcp.notifications/resources/updated"
            seen["events"] = await _wait_for(ledger, kind)
            # the stream is still open: its exchange's answer is not recorded yet
            opened = {e.action_id for e in seen["events"]}
            seen["answers_then"] = [
                e
                for e in await anyio.to_thread.run_sync(_events, ledger, "http.response")
                if e.action_id in opened
            ]
    return seen


@pytest.mark.parametrize("server", ["--http", "--sse"], indirect=True)
def test_a_message_on_an_open_stream_is_in_the_ledger_before_the_stream_ends(
    server: tuple[str, int], tmp_path: Path
) -> None:
    """While the GET stream is open, the message that came on it is already an event (its kind, its
    call key, its own bytes) and the stream's exchange has no answer yet; after the stream ended the
    message is there once, the exchange's bytes are stored once, and they hold the same message."""
    mode, port = server
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    args = ["--mode", f"reverse:http://127.0.0.1:{port}@0"]
    with live_proxy(tmp_path / "home", ledger_url, args=args) as proxy:
        ledger = open_ledger(ledger_url, proxy.blobs_url)
        base = f"http://127.0.0.1:{proxy.reverse_port(str(port))}"
        seen = anyio.run(_while_open, mode, base, ledger)
    assert seen["answer"]["is_error"] is False
    (early,) = seen["events"]
    assert seen["answers_then"] == []
    assert early.payload_state == "complete" and early.payload_sha256
    assert ":response:mcp:" in early.event_id
    if mode == "--sse":
        (call,) = [e for e in _events(ledger, "mcp.tools/call") if e.tool == "add"]
        assert early.tool == "add" and early.parent == call.parent and call.action_id != early.action_id
        assert b'"result"' in ledger.payload(early.payload_sha256)
    else:
        assert b'"uri":"note://greeting"' in ledger.payload(early.payload_sha256).replace(b" ", b"")
    # after the stream ended: the message once, and the stream's bytes hold it at its place
    deadline = time.monotonic() + 20
    while not (ends := [e for e in _events(ledger, "http.response") if e.action_id == early.action_id]):
        assert time.monotonic() < deadline, "the stream's exchange was never recorded"
        time.sleep(0.1)
    (end,) = ends
    again = [e for e in _events(ledger, early.kind) if e.action_id == early.action_id]
    assert [e.event_id for e in again] == [early.event_id]
    n = int(early.event_id.rsplit(":mcp:", 1)[1])
    stored = message_at(ledger.payload(end.payload_sha256 or ""), end.head, n)
    assert stored == message_bytes(
        ledger, {"event_id": early.event_id, "payload_sha256": early.payload_sha256}
    )
    ledger.close()
