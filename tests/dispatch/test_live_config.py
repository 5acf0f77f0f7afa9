"""The door re-reads refused hosts and secrets when their files change (no restart)."""

from __future__ import annotations

import os
from pathlib import Path

from door.assembly import open_dispatcher, open_rows
from storage.ledger import open_ledger
from tests.dispatch.conftest import HOSTS_LINE, weather
from tests.dispatch.upstreams import raw_upstream

CALL = {"tool": "weather", "args": {"city": "Bern"}}


def bump(path: Path, text: str) -> None:
    """Write `text` so the file's stamp surely moves (same-size rewrites within one mtime tick)."""
    path.write_text(text)
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def test_refused_hosts_and_secrets_are_taken_up_when_their_files_change(tmp_path: Path) -> None:
    """A host added to refused_hosts.txt refuses the next call; a rotated secret is what the next
    call sends; a malformed secrets file keeps the last good values (the door keeps serving)."""
    home, folder = tmp_path / "home", tmp_path / "dir"
    (folder / "tool").mkdir(parents=True)
    home.mkdir()
    secrets = home / "secrets.env"
    secrets.write_text("WEATHER_KEY=first-secret\n" + HOSTS_LINE)
    with raw_upstream() as (base, received):
        (folder / "tool" / "weather.md").write_text(weather(base).to_document())
        url = f"sqlite:///{tmp_path / 'l.db'}"
        door = open_dispatcher(
            home, open_ledger(url, (tmp_path / "b").as_uri()), open_rows(url, folder, network=False), secrets
        )
        assert door.dispatch(CALL, door="cli", token=None).status == 200
        assert b"first-secret" in received.requests[-1][0]
        bump(secrets, "WEATHER_KEY=second-secret\n" + HOSTS_LINE)
        assert door.dispatch(CALL, door="cli").status == 200
        assert b"second-secret" in received.requests[-1][0]
        bump(secrets, "this is not NAME=value\n")
        assert door.dispatch(CALL, door="cli").status == 200
        assert b"second-secret" in received.requests[-1][0]
        sent = len(received.requests)
        bump(home / "refused_hosts.txt", "127.0.0.1\n")
        refused = door.dispatch(CALL, door="cli")
        assert refused.status == 403 and refused.reply["refused"]["limit"] == "refused_host"
        assert len(received.requests) == sent
        door.close()
