"""mcp-record's relay: a request reaches the inbox before the result that answers it, however the
two relay threads are scheduled (a result first was recorded as an unmatched `mcp.result`)."""

from __future__ import annotations

import os
import threading
import time
from collections import deque

import pytest

from recording.mcp import stdio as mcp_stdio


def test_a_request_is_in_the_inbox_before_its_result_even_when_its_thread_stalls_after_the_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client->server thread is held right after writing the request on (as a busy machine
    deschedules it); the server answers at once and the other thread relays the result. The inbox
    still holds the request first."""
    client_r, client_w = os.pipe()  # the client's stdin
    to_server_r, to_server_w = os.pipe()  # the server's stdin
    from_server_r, from_server_w = os.pipe()  # the server's stdout
    to_client_r, to_client_w = os.pipe()  # our stdout
    real_write = os.write

    def stalling_write(fd: int, data: bytes | memoryview) -> int:
        written = real_write(fd, data)
        if fd == to_server_w:
            time.sleep(0.3)  # held between the write and whatever follows it
        return written

    monkeypatch.setattr(os, "write", stalling_write)
    inbox: deque[tuple[str, float, bytes]] = deque()
    ends: list[str] = []
    pumps = [
        threading.Thread(target=mcp_stdio._pump, args=(client_r, to_server_w, "client", inbox, ends.append)),
        threading.Thread(
            target=mcp_stdio._pump, args=(from_server_r, to_client_w, "server", inbox, ends.append)
        ),
    ]
    for pump in pumps:
        pump.start()
    request = b'{"jsonrpc": "2.0", "id": 7, "method": "prompts/get"}\n'
    real_write(client_w, request)
    assert os.read(to_server_r, 4096) == request  # the server got it, and answers at once
    result = b'{"jsonrpc": "2.0", "id": 7, "result": {}}\n'
    real_write(from_server_w, result)
    assert os.read(to_client_r, 4096) == result
    for fd in (client_w, from_server_w):
        os.close(fd)
    for pump in pumps:
        pump.join(10)
    assert [(origin, chunk) for origin, _, chunk in inbox] == [("client", request), ("server", result)]
    assert sorted(ends) == ["eof", "eof"]
    for fd in (client_r, to_server_r, to_server_w, from_server_r, to_client_r, to_client_w):
        os.close(fd)


def test_each_line_is_stamped_when_its_end_was_read_not_when_the_recorder_got_to_it() -> None:
    """A call split over two reads and its result, taken from the inbox long after they arrived (a
    busy recorder): each line carries the time the relay read the chunk that ended it, so the call
    lasts exactly what it lasted between client and server; a line cut short at the end carries the
    time of its side's last read."""
    from recording.mcp.stdio import Recording, RecordOptions
    from recording.records import StdioRecord

    class Kept:
        def __init__(self) -> None:
            self.items: list[StdioRecord] = []

        def put(self, item: StdioRecord) -> bool:
            self.items.append(item)
            return True

    recording = Recording(RecordOptions(["server"], "sqlite://", "file:///tmp"))
    kept = Kept()
    recording.writer = kept  # type: ignore[assignment]
    recording.inbox.extend(
        [
            ("client", 100.0, b'{"jsonrpc": "2.0", "id": 1, "method": "tools/ca'),
            ("client", 100.5, b'll", "params": {}}\n'),
            ("server", 103.5, b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n{"half'),
        ]
    )
    assert recording.take_inbox() == 3
    call, result = kept.items
    assert (call.origin, call.at) == ("client", 100.5)
    assert (result.origin, result.at) == ("server", 103.5)
    assert result.at - call.at == 3.0
    assert recording.last_at == {"client": 100.5, "server": 103.5}
