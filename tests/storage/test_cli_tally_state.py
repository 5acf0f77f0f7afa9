"""`flightlog ledger tally|state` and `counts` with several `--by`: the read routes' answers on the
command line, the same objects their `--json` prints (issue 44)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from readback.ledger_routes import handle
from storage.ledger import open_ledger
from tests.storage.factory import batch, event
from tests.storage.test_cli_ledger import flightlog

TOKEN = "t" * 40


def seeded(home: Path) -> None:
    """Six exchanges (twelve events) of two agents, some answered 404, from two collectors."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    first = [
        event(i, agent="alpha" if i < 8 else "beta", status=None if i % 2 == 0 else 200) for i in range(10)
    ]
    ledger.append(batch(first))
    late = [event(i, agent="beta", status=None if i % 2 == 0 else 404) for i in (10, 11)]
    ledger.append(batch(late, collector="other"))
    ledger.close()


def route(home: Path, path: str) -> Any:
    """What the proxy's read route answers for `path` (called in process, with its token)."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        target, _, query = path.partition("?")
        pairs = dict(p.split("=", 1) for p in query.split("&") if p)
        status, _, body = handle(
            "GET", target, pairs, {"authorization": f"Bearer {TOKEN}"}, b"", ledger=ledger, token=TOKEN
        )
    finally:
        ledger.close()
    assert status == 200, body
    return json.loads(body)


def cli_json(home: Path, *args: str) -> Any:
    out = flightlog(home, "ledger", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_tally_on_the_command_line_is_the_routes_answer(home: Path) -> None:
    """`ledger tally --by agent --by kind --json` prints exactly what `GET /api/ledger/tally?by=agent,
    kind` answers, groups and sums alike; a filter narrows both the same way."""
    seeded(home)
    assert cli_json(home, "tally", "--by", "agent", "--by", "kind") == route(
        home, "/api/ledger/tally?by=agent,kind"
    )
    narrowed = cli_json(home, "tally", "--by", "kind", "--agent", "beta")
    assert narrowed == route(home, "/api/ledger/tally?by=kind&agent=beta")
    assert narrowed["events"] == 4 and {g["key"]["kind"] for g in narrowed["groups"]} == {
        "http.request",
        "http.response",
    }


def test_tally_needs_a_key_and_refuses_an_unknown_one_in_one_line(home: Path) -> None:
    """No --by, or a key that is not one, is one `flightlog:` line and exit 1."""
    seeded(home)
    for args in (("tally",), ("tally", "--by", "colour")):
        out = flightlog(home, "ledger", *args)
        said = out.stderr.decode()
        assert out.returncode == 1 and said.startswith("flightlog: ") and said.count("\n") == 1, said


def test_state_on_the_command_line_is_the_routes_answer(home: Path) -> None:
    """`ledger state --json` is `GET /api/ledger/state`'s object (lag aside, which is read at a
    different instant); its text form names each collector."""
    seeded(home)
    shown, answered = cli_json(home, "state"), route(home, "/api/ledger/state")
    for c in (*shown["collectors"], *answered["collectors"]):
        c.pop("lag_seconds")
    assert shown == answered and [c["collector"] for c in shown["collectors"]] == ["other", "test"]
    text = flightlog(home, "ledger", "state").stdout.decode()
    assert text.startswith("other  position 1  batches 1  events 2") and "\ntest  position 1" in text


def test_counts_by_several_keys_groups_by_each_combination(home: Path) -> None:
    """`counts --by agent --by status` counts every (agent, status) pair (before, the last --by won
    silently and this counted by status alone); one --by keeps its own answer."""
    seeded(home)
    both = cli_json(home, "counts", "--by", "agent", "--by", "status")
    assert both == route(home, "/api/ledger/tally?by=agent,status")
    pairs = {(g["key"]["agent"], g["key"]["status"]): g["events"] for g in both["groups"]}
    assert pairs == {
        ("alpha", None): 4,
        ("alpha", "200"): 4,
        ("beta", None): 2,
        ("beta", "200"): 1,
        ("beta", "404"): 1,
    }
    one = cli_json(home, "counts", "--by", "status")
    assert one == route(home, "/api/ledger/counts?by=status") and one["by"] == "status"
    table = flightlog(home, "ledger", "counts", "--by", "agent", "--by", "status").stdout.decode()
    assert table.splitlines()[0].split()[:3] == ["agent", "status", "events"]
