"""The line between a proxy worker and its supervisor: one socket pair, JSON lines both ways.

The supervisor sends the worker its configuration on it (not on the command line, where `ps`
would show a Ledger URL's password); the worker answers once, with the listeners it bound or the
one line that says why it did not start, and names the files whose change it must hear of (its
secrets and prices: `processing_watch`). After that the socket carries only the supervisor's
`{"look": true}` when one of those files changed; when the supervisor dies, however it dies, the
worker reads end of file and stops (draining its writer), and when a worker dies the supervisor
reads end of file and knows at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import Callable
from typing import Any


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    """One JSON line (blocking: the messages are small and the other side reads them)."""
    sock.sendall(json.dumps(message).encode() + b"\n")


class Lines:
    """Whole JSON lines out of the bytes read so far from a socket."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        *whole, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in whole if line.strip()]


class WorkerLink:
    """The worker's end: read the configuration, report ready or failed, watch for the end."""

    def __init__(self, sock: socket.socket, *, udp: bool = True) -> None:
        self.sock = sock
        self.udp = udp
        """This worker binds the UDP side of the listeners that have one (only one worker does)."""
        self._reported = False

    @classmethod
    def from_fd(cls, fd: int) -> WorkerLink:
        sock = socket.socket(fileno=fd)
        sock.set_inheritable(False)  # the writer process must not hold the supervisor's line open
        return cls(sock)

    def receive(self) -> dict[str, Any]:
        """The first line the supervisor sent (blocking, before the event loop runs)."""
        lines = Lines()
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("the supervisor closed the line before sending a configuration")
            if got := lines.feed(data):
                return got[0]

    def ready(self, listeners: list[dict[str, Any]], watched: list[str]) -> None:
        self._report({"listeners": listeners, "watch": watched})

    def failed(self, line: str) -> None:
        self._report({"error": line})

    def stopped(self, drained: dict[str, Any]) -> None:
        """What this worker's stop drained (`addons.stopping.Drained`), for the supervisor's one line."""
        with contextlib.suppress(OSError):  # the supervisor gone: nobody to say it to
            self.sock.setblocking(True)
            send(self.sock, {"stopped": drained})

    def _report(self, message: dict[str, Any]) -> None:
        if not self._reported:
            self._reported = True
            with contextlib.suppress(OSError):
                send(self.sock, message)

    def watch(
        self, loop: asyncio.AbstractEventLoop, on_end: Callable[[], None], on_look: Callable[[], None]
    ) -> None:
        """Call `on_look` for each nudge the supervisor sends, and `on_end` when its end closes."""
        self.sock.setblocking(False)
        lines = Lines()

        def readable() -> None:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(self.sock.fileno())
                on_end()
                return
            if any(message.get("look") for message in lines.feed(data)):
                on_look()  # once, however many nudges came together

        loop.add_reader(self.sock.fileno(), readable)
