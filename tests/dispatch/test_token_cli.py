"""`flightlog token mint|attenuate|inspect` on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def flightlog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, timeout=60
    )


def test_mint_attenuate_inspect(home: Path) -> None:
    """Mint with limits, narrow without the key, inspect readable limits; the key is made 0600. A
    minted token holds only the right to call (`grants = call`) unless told otherwise, and stays
    link-sized with four limits besides."""
    out = flightlog(
        "token", "mint", "--tool", "weather", "--uses", "3", "--expires", "1h", "--task", "T1", "--json"
    )
    assert out.returncode == 0, out.stderr
    minted = json.loads(out.stdout)
    assert minted["limits"]["tools"] == ["weather"] and minted["limits"]["uses"] == 3
    assert minted["limits"]["task"] == ["T1"] and minted["length"] <= 180
    assert minted["limits"]["grants"] == ["call"]
    assert (home / "token.key").stat().st_mode & 0o777 == 0o600
    out = flightlog("token", "attenuate", minted["token"], "--uses", "1", "--door", "cli", "--json")
    assert out.returncode == 0, out.stderr
    child = json.loads(out.stdout)
    assert child["identifier"] == minted["identifier"] and child["limits"]["uses"] == 1
    out = flightlog("token", "inspect", child["token"], "--verify")
    assert out.returncode == 0, out.stderr
    assert "uses <= 1" in out.stdout and "doors = cli" in out.stdout


def test_widening_and_tampering_fail_in_one_line(home: Path) -> None:
    """A widening attenuation and a tampered token each fail with one clear line and exit 1."""
    token = json.loads(flightlog("token", "mint", "--uses", "2", "--json").stdout)["token"]
    out = flightlog("token", "attenuate", token, "--uses", "5")
    assert out.returncode == 1 and out.stderr.startswith("flightlog: ") and "narrow" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    forged = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    out = flightlog("token", "inspect", forged, "--verify")
    assert out.returncode == 1 and out.stderr.startswith("flightlog: ") and "signature" in out.stderr
    out = flightlog("token", "mint", "--caveat", "colour = blue")
    assert out.returncode == 1 and "unknown caveat" in out.stderr


def test_minted_token_alone_on_captured_stdout(home: Path) -> None:
    """`tok=$(flightlog token mint ...)` captures the token alone: with stdout not a terminal the
    description lines go to stderr; `--quiet` leaves them out; the captured token inspects."""
    out = flightlog("token", "mint", "--uses", "3")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 1
    token = out.stdout.strip()
    assert "uses <= 3" in out.stderr and "identifier:" in out.stderr
    assert flightlog("token", "inspect", token, "--verify").returncode == 0
    quiet = flightlog("token", "attenuate", token, "--uses", "1", "--quiet")
    assert quiet.returncode == 0 and len(quiet.stdout.splitlines()) == 1 and quiet.stderr == ""
    assert "uses <= 1" in flightlog("token", "inspect", quiet.stdout.strip()).stdout


def test_minted_token_described_on_a_terminal(home: Path) -> None:
    """On a terminal, mint prints the token and its description lines on stdout, as before."""
    import os
    import pty

    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "token", "mint", "--uses", "2"],
        stdout=child,
        stderr=subprocess.PIPE,
    )
    os.close(child)
    seen = b""
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the terminal closes when the child exits
            break
        if not data:
            break
        seen += data
    os.close(main)
    assert proc.wait(timeout=60) == 0
    assert proc.stderr is not None and proc.stderr.read() == b""
    assert b"uses <= 2" in seen and b"identifier:" in seen


def test_a_row_calling_flightlogs_own_route_spends_one_use_a_call(home: Path) -> None:
    """`--uses 3` on LEDGER_ROW (whose contract calls flightlog.local's Ledger route with the
    caller's token) allows three calls: the inner call is part of the one the door spent a use
    for; the fourth is refused by `uses`."""
    token = flightlog(
        "token",
        "mint",
        "--tool",
        "LEDGER_ROW",
        "--grant",
        "call",
        "--grant",
        "ledger",
        "--uses",
        "3",
        "--quiet",
    ).stdout.strip()
    for n in range(3):
        out = flightlog("call", "LEDGER_ROW", "--args", '{"event_id": "none-such"}', "--token", token)
        assert "no event 'none-such'" in out.stdout, (n, out.stdout, out.stderr)
    out = flightlog("call", "LEDGER_ROW", "--args", '{"event_id": "none-such"}', "--token", token)
    assert out.returncode == 1 and "use(s) are spent" in out.stderr
