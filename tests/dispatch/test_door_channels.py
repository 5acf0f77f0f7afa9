"""The door's other channels (WebSocket, server-sent events, GraphQL) tried the way an untrusted client
of the proxy would: each refuses what `POST /api/dispatch` refuses, by the same limit, recorded as a
Ledger event; and the WebSocket's end inside the proxy cannot be used by going around the proxy."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, RejectConnection, Request, TextMessage

from catalog.graphql_call import request_body
from door.checks import inner_asks
from door.declarations import graphql_route
from door.routes import Routes
from door.websocket_face import TICKET_HEADER, WebSocketDoor
from tests.dispatch.test_attacks_live import (
    credentials,
    directory_state,
    refusals,
    send,
    shell_row,
    world,
)
from tests.support.proxy import LiveProxy

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

__all__ = ["world"]


def test_graphql_needs_the_call_right_like_the_door() -> None:
    """A row whose contract calls the GraphQL door asks the gate for `call` with the caller's token
    (no confused deputy): the route declares it, and the inner door judges it."""
    routes = Routes()
    routes.add(graphql_route(lambda *_: (200, {}, b"")))
    asked = inner_asks({"method": "POST", "url": "http://flightlog.local/api/graphql", "body": {}}, routes)
    assert [(a.verb, a.handler_judges) for a in asked] == [("call", True)]


# ---- the WebSocket's end, without the proxy ---------------------------------------------------------


async def _handshake(address: tuple[str, int], headers: list[tuple[str, str]]) -> Any:
    reader, writer = await asyncio.open_connection(*address)
    ws = WSConnection(ConnectionType.CLIENT)
    writer.write(ws.send(Request(host="flightlog.local", target="/api/dispatch", extra_headers=headers)))
    await writer.drain()
    events: list[Any] = []
    while not events:
        data = await reader.read(65536)
        ws.receive_data(data or None)
        events = list(ws.events())
        if not data:
            break
    first = events[0] if events else None
    if isinstance(first, AcceptConnection):
        writer.write(ws.send(TextMessage(data='{"tool":"x","args":{}}')))
        await writer.drain()
        while True:
            data = await reader.read(65536)
            ws.receive_data(data or None)
            got = [e for e in ws.events() if isinstance(e, TextMessage)]
            if got or not data:
                writer.write(ws.send(CloseConnection(code=1000)))
                writer.close()
                return got[0].data if got else None
    writer.close()
    return first


def test_the_websocket_end_takes_only_a_ticket_it_issued_once() -> None:
    """Reached directly (a local process that found its port): no ticket, a made-up one, or a ticket
    already used is a 403 before any WebSocket exists; a fresh ticket's messages go to its door."""

    async def main() -> list[Any]:
        door = WebSocketDoor()
        calls: list[str] = []
        address = await door.address()
        ticket = door.admit(lambda message: calls.append(message) or b'{"ok":true}')
        out = [
            await _handshake(address, []),
            await _handshake(address, [(TICKET_HEADER, "made-up")]),
            await _handshake(address, [(TICKET_HEADER, ticket)]),
            await _handshake(address, [(TICKET_HEADER, ticket)]),
            calls,
        ]
        door.close()
        return out

    none, made_up, fresh, again, calls = asyncio.run(main())
    assert isinstance(none, RejectConnection) and none.status_code == 403
    assert isinstance(made_up, RejectConnection) and made_up.status_code == 403
    assert fresh == '{"ok":true}' and calls == ['{"tool":"x","args":{}}']
    assert isinstance(again, RejectConnection) and again.status_code == 403


# ---- through the proxy ----------------------------------------------------------------------------


def websocket_call(proxy: LiveProxy, headers: dict[str, str], messages: list[str]) -> tuple[int, list[Any]]:
    """An upgrade to ws://flightlog.local/api/dispatch through the proxy (absolute form, as a client
    set to an HTTP proxy sends it), `messages` sent one by one; (status, replies)."""
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=30)
    ws = WSConnection(ConnectionType.CLIENT)
    extra = [(k, v) for k, v in headers.items() if k.lower() not in ("host", "content-type")]
    wanted_host = headers.get("host", "flightlog.local")
    raw = ws.send(Request(host=wanted_host, target="/api/dispatch", extra_headers=extra))
    sock.sendall(raw.replace(b"GET /api/dispatch ", b"GET http://flightlog.local/api/dispatch ", 1))

    def events() -> list[Any]:
        data = sock.recv(65536)
        ws.receive_data(data or None)
        return list(ws.events())

    first = events()
    try:
        if not first or not isinstance(first[0], AcceptConnection):
            status = getattr(first[0], "status_code", 0) if first else 0
            return status, []
        replies = []
        for message in messages:
            sock.sendall(ws.send(TextMessage(data=message)))
            got: list[Any] = []
            while not got:
                got = [e for e in events() if isinstance(e, TextMessage)]
            replies.append(json.loads(got[0].data))
        sock.sendall(ws.send(CloseConnection(code=1000)))
        return 101, replies
    finally:
        sock.close()


@pytest.fixture
def calls(world: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """What an attacker would run: the command row, flightlog's own Ledger and Directory rows."""
    evil = shell_row("PWN", world["marker"])
    yield [
        {"tool": "local_touch", "args": {}},
        {"tool": "LEDGER_COUNTS", "args": {}},
        {"tool": "DIRECTORY_WRITE", "args": {"bundle": "tool", "path": "PWN.md", "content": evil}},
    ]


def test_every_channel_refuses_every_untrusted_caller(
    world: dict[str, Any], calls: list[dict[str, Any]]
) -> None:
    """Every credential an attacker has (none, wrong, forged, spent, another tool's, a foreign page's,
    a rebound name) on every call, over the WebSocket, as server-sent events and as GraphQL: refused,
    each refusal a Ledger event (an upgrade a browser shaped is refused before it is one, and recorded
    once); nothing in the Directory changed and no command ran."""
    proxy: LiveProxy = world["proxy"]
    before, recorded = directory_state(world), len(refusals(world))
    tried, accepted = 0, []
    for who, headers in credentials(world).items():
        if who == "text/plain body":
            continue  # a message has no content type; the POST channels are tried with it below
        status, replies = websocket_call(proxy, headers, [json.dumps(c) for c in calls])
        tried += len(replies) if status == 101 else 1
        if status == 101:
            accepted += [f"{who}: websocket {r}" for r in replies if r.get("ok") is not False]
        elif status not in (401, 403):
            accepted.append(f"{who}: websocket upgrade answered {status}")
    for who, headers in credentials(world).items():
        for call in calls:
            streamed = send(proxy, "POST", "/api/dispatch", {**headers, "accept": "text/event-stream"}, call)
            graphql = send(proxy, "POST", "/api/graphql", headers, request_body(call))
            tried += 2
            for channel, answer in (("sse", streamed), ("graphql", graphql)):
                if answer.status_code < 400:
                    accepted.append(
                        f"{who}: {channel} {call['tool']} -> {answer.status_code} {answer.text[:200]}"
                    )
    assert accepted == [], "\n".join(accepted)
    limits = refusals(world)[recorded:]
    assert len(limits) == tried, "every refusal is a Ledger event"
    assert {"token", "signature", "uses", "tools", "origin", "host", "content_type"} <= set(limits), limits
    assert directory_state(world) == before and not world["marker"].exists()


def test_a_refused_stream_and_a_foreign_document_say_why(world: dict[str, Any]) -> None:
    """A refusal asked for as server-sent events comes as the `reply` event; a GraphQL document other
    than the door's one operation is refused by name (limit `graphql`) and recorded."""
    proxy: LiveProxy = world["proxy"]
    streamed = send(
        proxy,
        "POST",
        "/api/dispatch",
        {"content-type": "application/json", "accept": "text/event-stream"},
        {"tool": "weather", "args": {}},
    )
    assert streamed.status_code == 401 and streamed.headers["content-type"] == "text/event-stream"
    assert streamed.text.startswith("event: reply\ndata: {") and streamed.text.endswith("}\n\n")
    assert json.loads(streamed.text.split("data: ", 1)[1])["refused"]["limit"] == "token"
    recorded = len(refusals(world))
    introspect = send(
        proxy,
        "POST",
        "/api/graphql",
        {"content-type": "application/json"},
        {"query": "{ __schema { types { name } } }"},
    )
    assert introspect.status_code == 403
    assert "serves one GraphQL operation" in introspect.json()["errors"][0]["message"]
    assert refusals(world)[recorded:] == ["graphql"]
