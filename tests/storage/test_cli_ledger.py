"""`flightlog ledger row|action|blob|verify` as a user runs them: real process, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from storage.ledger import open_ledger
from tests.storage.factory import batch, event
from tests.support.terminal import obeyable

BINARY = bytes(range(256)) * 3


def flightlog(home: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, env=env, timeout=60
    )


def seeded(home: Path) -> str:
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    ledger.append(batch([event(0, payload=BINARY), event(1, redacted=("API_KEY",))]))
    sha = ledger.event("ev-000000").payload_sha256  # type: ignore[union-attr]
    ledger.close()
    assert sha
    return sha


def test_blob_writes_the_exact_bytes_to_stdout(home: Path) -> None:
    """Binary payloads come out byte for byte, nothing added."""
    sha = seeded(home)
    out = flightlog(home, "ledger", "blob", sha)
    assert out.returncode == 0 and out.stdout == BINARY


def test_row_and_action_as_json(home: Path) -> None:
    """--json gives the stored event with its head, and an action's events in order."""
    seeded(home)
    row = json.loads(flightlog(home, "ledger", "row", "ev-000001", "--json").stdout)
    assert row["redacted"] == ["API_KEY"] and row["head"].startswith("POST /v1/things")
    action = json.loads(flightlog(home, "ledger", "action", "act-000000", "--json").stdout)
    assert [e["event_id"] for e in action] == ["ev-000000", "ev-000001"]
    human = flightlog(home, "ledger", "row", "ev-000001").stdout.decode()
    assert "redacted: API_KEY" in human and "X-Dup: a" in human


def test_unknown_ids_fail_in_one_line(home: Path) -> None:
    """A missing event or payload is one line on stderr and a non-zero exit, never a traceback."""
    seeded(home)
    for args in (("ledger", "row", "nope"), ("ledger", "blob", "00" * 32)):
        out = flightlog(home, *args)
        assert out.returncode == 1
        assert out.stderr.decode().count("\n") == 1 and b"Traceback" not in out.stderr


def test_verify_passes_then_fails_on_a_flipped_bit(home: Path) -> None:
    """verify exits 0 on a sound ledger and non-zero, naming the payload, after corruption."""
    sha = seeded(home)
    good = flightlog(home, "ledger", "verify", "--json")
    assert good.returncode == 0 and json.loads(good.stdout)["ok"] is True
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    big = os.urandom(300_000)
    ledger.append(batch([event(2, payload=big)], position=2))
    big_sha = ledger.event("ev-000002").payload_sha256  # type: ignore[union-attr]
    ledger.close()
    path = next((home / "blobs").glob(f"*/{big_sha}.zst"))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    bad = flightlog(home, "ledger", "verify")
    assert bad.returncode == 1
    assert f"corrupted: {big_sha}" in bad.stdout.decode()
    assert sha not in bad.stdout.decode()


def test_verify_sample_checks_about_that_share(home: Path) -> None:
    """--sample 10 on 300 payloads checks a random tenth of them, not all."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    ledger.append(batch([event(i, payload=b"payload %d" % i) for i in range(300)]))
    ledger.close()
    sampled = json.loads(flightlog(home, "ledger", "verify", "--sample", "10", "--json").stdout)
    assert 5 <= sampled["checked"] <= 80 and sampled["ok"] is True


HOSTILE_URL = "https://api.example.com/a\x1b]0;PWNED\x07\x1b[2K\rfine"
"""A URL as a hostile page can make an agent send it (mitmproxy keeps the request line's bytes):
sets the terminal's title, erases the line and starts over with a harmless-looking one."""
HOSTILE_AGENT = "[link=https://evil.example]alpha[/link]\x9b31m"
"""An agent name from a header: Rich markup (a hyperlink in the operator's terminal) and an 8-bit CSI."""


def test_recorded_text_cannot_drive_the_operators_terminal(home: Path) -> None:
    """What the Ledger holds came from the traffic, which anyone may have written. Printed as is,
    a URL's escape sequences set the terminal's title and rewrote the line being read, and an agent
    name's Rich markup became a hyperlink in `counts`. Every text view shows such characters as
    `\\xHH` and markup as the brackets it is; `--json` still gives the exact values."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    head = b"GET /a\x1b]0;PWNED\x07 HTTP/1.1\r\nHost: api.example.com\r\nX-Agent: \x1b[31mred"
    ledger.append(
        batch([event(0, url=HOSTILE_URL, agent=HOSTILE_AGENT, head=head, error="bad\x1b[8mhidden")])
    )
    ledger.close()
    views = {
        "row": flightlog(home, "ledger", "row", "ev-000000"),
        "action": flightlog(home, "ledger", "action", "act-000000"),
        "query": flightlog(home, "ledger", "query"),
        "counts": flightlog(home, "ledger", "counts", "--by", "agent"),
        "totals": flightlog(home, "ledger", "counts"),
        "ask": flightlog(home, "ledger", "ask", "events", "by", "agent"),
    }
    for name, out in views.items():
        assert out.returncode == 0, (name, out.stderr)
        text = out.stdout.decode()
        driving = obeyable(text)
        assert not driving, (name, driving, text)
    for name in ("row", "action", "query"):
        assert "/a\\x1b]0;PWNED\\x07\\x1b[2K\\x0dfine" in views[name].stdout.decode(), name
    assert "[link=https://evil.example]alpha[/" in views["counts"].stdout.decode()  # (80 columns)
    assert "X-Agent: \\x1b[31mred" in views["row"].stdout.decode()
    exact = json.loads(flightlog(home, "ledger", "row", "ev-000000", "--json").stdout)
    assert (exact["url"], exact["agent"]) == (HOSTILE_URL, HOSTILE_AGENT)
    grouped = flightlog(home, "ledger", "counts", "--by", "agent", "--json").stdout.decode()
    assert "\x9b" not in grouped and json.loads(grouped)["groups"][0]["key"] == HOSTILE_AGENT


def test_an_error_naming_recorded_text_is_one_line_that_cannot_drive_the_terminal(home: Path) -> None:
    """Every command's failure is one `flightlog: ...` line, and the line may quote the Ledger:
    replaying an exchange whose URL holds escape sequences printed them to the operator's terminal."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    url = "http://127.0.0.1:9/a\x1b]0;PWNED\x07\x9b2K\nflightlog: all good"
    ledger.append(batch([event(0, url=url), event(1, url=url)]))
    ledger.close()
    out = flightlog(home, "replay", "act-000000")
    said = out.stderr.decode()
    assert out.returncode == 1 and said.startswith("flightlog: ") and said.count("\n") == 1, said
    assert "/a\\x1b]0;PWNED\\x07\\x9b2K\\x0aflightlog: all good" in said
    assert not obeyable(said, laid_out="\n")
