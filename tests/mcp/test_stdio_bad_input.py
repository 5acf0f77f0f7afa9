"""Bad input through `mcp-record`: relayed as the client would see it without flightlog, recorded with
an error, nothing lost, and the wrapper exits with the server's code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from storage.events import StoredEvent
from storage.ledger import Ledger, open_ledger
from tests.mcp.support import RAW, lines_of, recorded, session_events


def _call(rpc_id: int, method: str, **params: object) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode() + b"\n"


def _run(command: list[str], sent: bytes) -> tuple[bytes, int]:
    done = subprocess.run(command, input=sent, capture_output=True, timeout=60)
    return done.stdout, done.returncode


@pytest.fixture
def ledger(tmp_path: Path) -> tuple[Ledger, list[str]]:
    url, blobs = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    return open_ledger(url, blobs), ["--ledger", url, "--blobs", blobs]


def _one_session(ledger: Ledger) -> list[StoredEvent]:
    (events,) = session_events(ledger).values()
    return events


def test_a_line_that_is_not_json_is_relayed_and_recorded_as_invalid(ledger: tuple[Ledger, list[str]]) -> None:
    """A non-JSON line from the server reaches the client unchanged and is an `mcp.invalid` event
    with the reason; the messages around it are recorded as usual."""
    db, opts = ledger
    sent = _call(1, "garbage") + _call(2, "echo")
    assert _run(recorded(RAW, *opts), sent) == _run(RAW, sent)
    events = _one_session(db)
    server = lines_of(events, "s")
    assert [e.kind for e in server] == ["mcp.invalid", "mcp.garbage.result", "mcp.echo.result"]
    assert db.payload(server[0].payload_sha256 or "") == b"this is not json"
    assert (server[0].error or "").startswith("not JSON")
    assert server[1].action_id == lines_of(events, "c")[0].action_id


def test_a_message_over_8_mib_is_relayed_whole_and_recorded_without_its_bytes(
    ledger: tuple[Ledger, list[str]],
) -> None:
    """A 9 MiB answer reaches the client byte for byte; its event is `missing` with its size in the
    error, and is still paired with its call; the next message is recorded in full."""
    db, opts = ledger
    sent = _call(1, "big", size=9 * 1024 * 1024) + _call(2, "echo")
    with_flightlog = _run(recorded(RAW, *opts), sent)
    assert with_flightlog == _run(RAW, sent)
    assert len(with_flightlog[0]) > 9 * 1024 * 1024
    events = _one_session(db)
    big, echo = lines_of(events, "s")
    assert big.payload_state == "missing" and big.payload_sha256 is None
    assert f"{len(with_flightlog[0].split(b'\n')[0])} bytes" in (big.error or "")
    assert big.action_id == lines_of(events, "c")[0].action_id
    assert echo.payload_state == "complete" and echo.error is None


def test_a_server_that_dies_mid_call_gives_its_exit_code_and_the_call_is_named_unanswered(
    ledger: tuple[Ledger, list[str]],
) -> None:
    """The server exits with 3 while a call waits: the client sees the same output and exit code
    as without flightlog, and the `mcp.exit` event has the code and names the unanswered call."""
    db, opts = ledger
    sent = _call(1, "echo") + _call(2, "die", code=3)
    out, code = _run(recorded(RAW, *opts), sent)
    assert (out, code) == _run(RAW, sent)
    assert code == 3
    events = _one_session(db)
    (end,) = [e for e in events if e.kind == "mcp.exit"]
    assert end.status == 3
    assert end.error == "the server exited with code 3; 1 call(s) unanswered: die 2"
    assert [e.kind for e in lines_of(events, "c")] == ["mcp.echo", "mcp.die"]


def test_half_a_message_at_the_end_is_recorded_as_cut_short(ledger: tuple[Ledger, list[str]]) -> None:
    """A server that writes half a line and exits 4: the client gets the same bytes and code, the
    half line is recorded with its bytes and says it was cut short."""
    db, opts = ledger
    sent = _call(1, "cut")
    assert _run(recorded(RAW, *opts), sent) == _run(RAW, sent) == (b'{"jsonrpc": "2.0", "id": ', 4)
    (half,) = lines_of(_one_session(db), "s")
    assert db.payload(half.payload_sha256 or "") == b'{"jsonrpc": "2.0", "id": '
    assert half.kind == "mcp.invalid" and "cut short" in (half.error or "")


def test_a_client_that_disconnects_leaves_the_server_as_it_would_without_flightlog(
    ledger: tuple[Ledger, list[str]],
) -> None:
    """The client sends a slow call and goes away (closes both pipes): the server's late answer
    fails to be written as it would without flightlog (EPIPE: it exits 5), the wrapper exits 5, and
    the call and how the session ended (the call unanswered, the client gone) are recorded."""
    db, opts = ledger
    codes = []
    for command in (RAW, recorded(RAW, *opts)):
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_call(1, "late"))
        proc.stdin.flush()
        proc.stdout.close()
        proc.stdin.close()
        codes.append(proc.wait(timeout=30))
    assert codes == [5, 5]
    events = _one_session(db)
    (call,) = lines_of(events, "c")
    assert call.kind == "mcp.late" and lines_of(events, "s") == []
    (end,) = [e for e in events if e.kind == "mcp.exit"]
    assert end.status == 5
    assert end.error == (
        "the server exited with code 5; the client stopped reading the server's output;"
        " 1 call(s) unanswered: late 1"
    )


def test_secrets_in_stdio_messages_are_replaced_by_their_names(
    ledger: tuple[Ledger, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configured secret sent in a call reaches the server as it is (the exchange is the same as
    without flightlog) and is stored as `[NAME]`, the event naming it in `redacted`."""
    db, opts = ledger
    monkeypatch.setenv("DEMO_TOKEN", "tok-9f8e7d6c5b4a")
    sent = _call(1, "echo", token="tok-9f8e7d6c5b4a") + _call(2, "garbage")
    out, code = _run(recorded(RAW, *opts, "--secret-env", "DEMO_TOKEN"), sent)
    assert (out, code) == _run(RAW, sent)
    events = _one_session(db)
    (call,) = [e for e in lines_of(events, "c") if e.kind == "mcp.echo"]
    stored = db.payload(call.payload_sha256 or "")
    assert b"tok-9f8e7d6c5b4a" not in stored and b"[DEMO_TOKEN]" in stored
    assert call.redacted == ("DEMO_TOKEN",)


def test_a_server_that_cannot_start_is_one_clear_line_and_recorded(ledger: tuple[Ledger, list[str]]) -> None:
    """An unknown server command: one line on stderr, exit 1, and the session's start and end are in
    the Ledger saying why."""
    db, opts = ledger
    done = subprocess.run(recorded(["no-such-server-xyz"], *opts), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["flightlog: command not found: no-such-server-xyz"]
    events = _one_session(db)
    assert [e.kind for e in events] == ["mcp.start", "mcp.exit"]
    assert "cannot start the server" in (events[0].error or "") and events[1].status == 127
