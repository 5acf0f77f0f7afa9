"""`flightlog call`, `uses`, `task` and `trace` on the command line, against a Directory folder on disk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from authority import tokens
from tests.dispatch.conftest import HOSTS_LINE, SECRET, flightlog, weather
from tests.dispatch.upstreams import Received, raw_upstream
from tests.support.terminal import obeyable


@pytest.fixture
def cli_world(tmp_path: Path) -> Iterator[tuple[dict[str, str], Received]]:
    """FLIGHTLOG_* variables for a home with secrets.env, a Directory folder, and a raw upstream."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={SECRET}\n" + HOSTS_LINE)
    with raw_upstream() as (base, received):
        (tmp_path / "dir" / "tool").mkdir(parents=True)
        (tmp_path / "dir" / "tool" / "weather.md").write_text(weather(base).to_document())
        yield (
            {
                "FLIGHTLOG_HOME": str(home),
                "FLIGHTLOG_LEDGER": f"sqlite:///{tmp_path / 'ledger.db'}",
                "FLIGHTLOG_BLOBS": (tmp_path / "blobs").as_uri(),
                "FLIGHTLOG_DIRECTORY": str(tmp_path / "dir"),
            },
            received,
        )


def test_call_dry_run_then_real_then_join(cli_world: tuple[dict[str, str], Received]) -> None:
    """--dry-run sends nothing and shows names; the real call is recorded and traces to its contract."""
    env, received = cli_world
    dry = flightlog(env, "call", "weather", "--args", '{"city": "Bern"}', "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert received.requests == [] and "[WEATHER_KEY]" in dry.stdout and SECRET not in dry.stdout
    token = tokens.mint(tokens.root_key(Path(env["FLIGHTLOG_HOME"])), ["task = T1", "doors = cli"]).encode()
    real = flightlog(env, "call", "weather", "--args", '{"city": "Bern"}', "--token", token)
    assert real.returncode == 0, real.stderr
    reply = json.loads(real.stdout)
    assert reply["ok"] and len(received.requests) == 1 and SECRET not in real.stdout
    uses = json.loads(flightlog(env, "uses", "weather", "--json").stdout)
    assert {e["action_id"] for e in uses} >= {reply["action_id"]}
    assert len(json.loads(flightlog(env, "task", "T1", "--json").stdout)) == 4
    trace = flightlog(env, "trace", f"{reply['action_id']}:upstream.0.request")
    assert trace.returncode == 0 and "matches the contract" in trace.stdout, trace.stdout + trace.stderr


def test_call_refusals_are_one_line_and_exit_1(cli_world: tuple[dict[str, str], Received]) -> None:
    """A refused call prints its JSON reply, one `flightlog: ...` line naming the limit, and exits 1."""
    env, received = cli_world
    token = tokens.mint(tokens.root_key(Path(env["FLIGHTLOG_HOME"])), ["doors = http"]).encode()
    out = flightlog(env, "call", "weather", "--args", '{"city": "Bern"}', "--token", token)
    assert out.returncode == 1 and json.loads(out.stdout)["refused"]["limit"] == "doors"
    assert out.stderr.strip().splitlines() == [out.stderr.strip()] and "refused by doors" in out.stderr
    bad = flightlog(env, "call", "weather", "--args", '{"days": "x"}')
    assert bad.returncode == 1 and "refused by args" in bad.stderr
    assert flightlog(env, "call", "weather", "--args", "{nope").stderr.startswith(
        "flightlog: --args is not JSON"
    )
    assert received.requests == []


def test_an_upstreams_answer_is_printed_as_json_that_cannot_drive_the_terminal(
    cli_world: tuple[dict[str, str], Received],
) -> None:
    """The reply holds what the upstream answered, which anyone may have written (here it echoes a
    city holding an 8-bit CSI): printed with every control escaped, and it reads back exactly."""
    env, _ = cli_world
    out = flightlog(env, "call", "weather", "--args", json.dumps({"city": "Bern\x9b2K\x1b]0;PWNED\x07"}))
    assert out.returncode == 0, out.stderr
    assert not obeyable(out.stdout, laid_out="\n")
    assert "\\u009b2K" in out.stdout
    echoed = json.loads(json.loads(out.stdout)["result"]["echo"])
    assert echoed["city"] == "Bern\x9b2K\x1b]0;PWNED\x07"


def test_a_row_outside_tool_is_refused_naming_the_rule(
    cli_world: tuple[dict[str, str], Received], tmp_path: Path
) -> None:
    """A hand-written row under local/: `find` finds it, while `call` and `contracts` refuse it in
    one line naming the rule (only rows in tool/ are callable) and where to move it; moved to
    tool/ it is called."""
    env, received = cli_world
    folder = tmp_path / "dir"
    (folder / "local").mkdir()
    text = (folder / "tool" / "weather.md").read_text().replace("name: weather", "name: local_weather")
    (folder / "local" / "local_weather.md").write_text(text)
    assert "local_weather" in flightlog(env, "find", "local_weather").stdout
    for args in (("call", "local_weather", "--args", '{"city": "Bern"}'), ("contracts", "local_weather")):
        out = flightlog(env, *args)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 1 and len(lines) == 1, out.stderr
        assert "local/local_weather.md" in lines[0] and "only rows in tool/ are callable" in lines[0]
        assert "move its file to tool/local_weather.md" in lines[0]
    assert received.requests == []
    (folder / "local" / "local_weather.md").rename(folder / "tool" / "local_weather.md")
    out = flightlog(env, "call", "local_weather", "--args", '{"city": "Bern"}')
    assert out.returncode == 0 and json.loads(out.stdout)["ok"], out.stderr
