"""`mcp-record` with a gate: a client's `tools/call` line the egress policy refuses never reaches the
server; the client gets a JSON-RPC error line instead, and the refusal is recorded.

Without a gate the relay stays the byte pump of `recording.mcp.stdio`. With one (`flightlog
mcp-record` passes the egress policy's, `egress.stdio`), the client's side is cut into lines (MCP's
stdio framing): every line goes to the inbox as read (it is what the client sent, recorded as
before), lines are forwarded whole and in order, and a line naming `"tools/call"` is first asked of
the gate, which may hold it (an `ask`) before answering (`might_call`: also a line that escapes a
character, as a JSON-escaped slash in the method does, or is too large to look into). A refused line
is not forwarded; its answer must reach the client between the server's lines, never inside one: the
server's side notes whether its last byte ended a line, and an answer waits for that under the same
lock.
"""

from __future__ import annotations

import os
import select
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from formats.jsonrpc import READ_MAX
from recording.identity import Identity
from recording.mcp.stdio_events import STDIO_HOST, call_action
from recording.records import Exchange, RefusalRecord

READ_SIZE = 65536
CALL_MARK = b"tools/call"


def might_call(line: bytes) -> bool:
    """Whether a client's line may hold a `tools/call`: it names one, escapes a character in a
    string (`tools\\/call`, `\\u0074ools/call` name it too), or is too long to look into."""
    return CALL_MARK in line or b"\\" in line or len(line) > READ_MAX


@dataclass(frozen=True, slots=True)
class Refused:
    """A gate's refusal of one line: the line to answer with, and what refused it."""

    answer: bytes
    rule: str
    limit: str
    tool: str | None
    rpc_id: str | None
    """The call's JSON-RPC id as JSON text (its action's key), None for a notification."""


LineGate = Callable[[bytes], Refused | None]


class ClientOut:
    """The client's stdout, shared by the server's relay and the gate's answers."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()
        self.at_line_start = True
        self.waiting: list[bytes] = []

    def server_wrote(self, chunk: bytes) -> None:
        """Under `lock`, after the server's chunk went out: send answers waiting for a line's end."""
        self.at_line_start = chunk.endswith(b"\n")
        if self.at_line_start and self.waiting:
            for line in self.waiting:
                _write_all(self.fd, line)
            self.waiting.clear()

    def answer(self, line: bytes) -> None:
        """Send a gate's answer now if the server is between lines, else once its line ends."""
        with self.lock:
            if self.at_line_start:
                _write_all(self.fd, line)
            else:
                self.waiting.append(line)


def client_pump(
    src: int,
    dst: int,
    inbox: deque[tuple[str, float, bytes]],
    on_end: Callable[[str], None],
    gate: LineGate,
    out: ClientOut,
    refused: Callable[[Refused], None],
) -> None:
    """Relay the client's lines to the server, asking `gate` about each `tools/call`."""
    keep, now = inbox.append, time.time
    pending = bytearray()
    how = "eof"
    while True:
        try:
            chunk = os.read(src, READ_SIZE)
        except OSError:
            how = "read-error"
            break
        if not chunk:
            break
        keep(("client", now(), chunk))
        pending += chunk
        forward = bytearray()
        while (nl := pending.find(b"\n")) >= 0:
            line = bytes(pending[: nl + 1])
            del pending[: nl + 1]
            said = gate(line) if might_call(line) else None
            if said is None:
                forward += line
                continue
            if forward and not _send(dst, bytes(forward)):
                how = "write-error"
                break
            forward.clear()
            refused(said)
            if said.answer:  # a notification has no answer
                out.answer(said.answer)
        if how == "eof" and forward and not _send(dst, bytes(forward)):
            how = "write-error"
        if how != "eof":
            break
    if how == "eof" and pending:
        _send(dst, bytes(pending))  # a last line without its newline, as the client sent it
    on_end(how)


def server_pump(
    src: int, out: ClientOut, inbox: deque[tuple[str, float, bytes]], on_end: Callable[[str], None]
) -> None:
    """Relay the server's output to the client, noting where its lines end (for `ClientOut.answer`)."""
    keep, now = inbox.append, time.time
    how = "eof"
    while True:
        try:
            chunk = os.read(src, READ_SIZE)
        except OSError:
            how = "read-error"
            break
        if not chunk:
            break
        keep(("server", now(), chunk))
        with out.lock:
            try:
                _write_all(out.fd, chunk)
            except OSError:
                how = "write-error"
                break
            out.server_wrote(chunk)
    on_end(how)


def refusal_record(refused: Refused, session: str, server: str, identity: Identity) -> RefusalRecord:
    """The refusal as a record joined to the call's action (`mcp:SESSION:call:c:ID`)."""
    action = (
        call_action(session, "client", refused.rpc_id)
        if refused.rpc_id
        else f"mcp:{session}:refused:{uuid.uuid4().hex}"  # a notification: no call to join
    )
    exchange = Exchange(action, "out", "tools/call", f"stdio:{server}", STDIO_HOST, identity)
    return RefusalRecord(
        exchange, time.time(), refused.rule, refused.limit, None, refused.tool, refused.answer
    )


def _send(fd: int, data: bytes) -> bool:
    try:
        _write_all(fd, data)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [])
            continue
        view = view[written:]
