"""A WebSocket client behind the proxy variables: upgrades to the URL given (absolute-form through
HTTP_PROXY), sends a text and a binary message, prints what came back, one line each, then closes."""

from __future__ import annotations

import base64
import os
import socket
import sys
from urllib.parse import urlsplit

from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, BytesMessage, CloseConnection, Event, Request, TextMessage


def pump(sock: socket.socket, ws: WSConnection) -> list[Event]:
    ws.receive_data(sock.recv(65536) or None)
    return list(ws.events())


def main() -> int:
    target = sys.argv[1]
    proxy = urlsplit(os.environ["HTTP_PROXY"])
    ws = WSConnection(ConnectionType.CLIENT)
    with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as sock:
        extra = []
        if proxy.username:  # the identity `flightlog run` put in the proxy URL, sent as clients do
            token = base64.b64encode(f"{proxy.username}:{proxy.password or ''}".encode())
            extra.append((b"Proxy-Authorization", b"Basic " + token))
        sock.sendall(ws.send(Request(host=urlsplit(target).netloc, target=target, extra_headers=extra)))
        if not any(isinstance(e, AcceptConnection) for e in pump(sock, ws)):
            print("upgrade refused", file=sys.stderr)
            return 1
        for message in (TextMessage(data="hello"), BytesMessage(data=b"\x00\x01\xff")):
            sock.sendall(ws.send(message))
            while not (events := pump(sock, ws)):
                pass
            for e in events:
                print(type(e).__name__, repr(e.data) if hasattr(e, "data") else "")
        sock.sendall(ws.send(CloseConnection(code=1000, reason="done")))
        pump(sock, ws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
