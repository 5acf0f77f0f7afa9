"""The read commands' one read path (`storage.reader`): the same answers from a SQLite and a PostgreSQL
Ledger holding the same events, nothing created or migrated by a read, and no ORM imported for it
(issues 42 and 43)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from storage.engine import make_engine
from storage.events import Event
from storage.ledger import open_ledger
from storage.migrate import migrate
from tests.storage.factory import T0, batch, event

Normalize = Callable[[str], str]


def _state(out: str) -> str:
    """`ledger state --json` without what differs by when each engine committed (times, lag)."""
    body = json.loads(out)
    for c in body["collectors"]:
        for volatile in ("updated_at", "last_commit", "lag_seconds"):
            c.pop(volatile)
    return json.dumps(body, sort_keys=True)


def same(out: str) -> str:
    return out


SINCE = (T0 + timedelta(hours=1)).isoformat()
READS: list[tuple[str, list[str], Normalize]] = [
    ("totals", ["counts"], same),
    ("totals --json", ["counts", "--json"], same),
    ("counts by model", ["counts", "--by", "model"], same),
    ("counts by hour", ["counts", "--by", "hour", "--json"], same),
    ("counts by rule", ["counts", "--by", "rule", "--json"], same),
    ("counts by status, errors", ["counts", "--by", "status", "--status", "errors", "--json"], same),
    ("counts of a host since", ["counts", "--host", "API.example.com", "--since", SINCE, "--json"], same),
    ("tally", ["tally", "--by", "agent", "--by", "kind"], same),
    ("tally --json", ["tally", "--by", "model", "--by", "hour", "--json"], same),
    ("query", ["query", "--limit", "7"], same),
    ("query --json", ["query", "--json"], same),
    ("query url words", ["query", "--url", "50%_off", "--json"], same),
    ("query 4xx of beta", ["query", "--status", "4xx", "--agent", "beta", "--json"], same),
    ("query in words", ["query", "errors from agent beta"], same),
    ("row", ["row", "ev-000003"], same),
    ("row --json", ["row", "ev-000003", "--json"], same),
    ("action", ["action", "act-000002", "--json"], same),
    ("state", ["state", "--json"], _state),
    ("ask groups", ["ask", "cost", "by", "model"], same),
    ("ask events", ["ask", "errors", "from", "agent", "beta", "--json"], same),
    ("ask slowest", ["ask", "slowest", "calls", "--json"], same),
    ("ask totals", ["ask", "how", "many", "tokens", "--json"], same),
]
"""Each read command with the options that reach each part of its SQL (filters, keys, durations)."""


def flightlog(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTLOG_")}
    environ.update({"FLIGHTLOG_HOME": str(home), **(env or {})})
    run = [sys.executable, "-m", "flightlog", *args]
    return subprocess.run(run, capture_output=True, text=True, env=environ, timeout=60)


def events() -> list[Event]:
    """Twenty events over three hours: two agents, two models with tokens and cost, 404s, 500s and a
    refused call, URLs holding LIKE's own characters, answers with and without wire timing (whole
    seconds apart: julianday's float arithmetic would order near-ties differently from PostgreSQL's)."""
    out = []
    for i in range(20):
        request = i % 2 == 0
        fields: dict[str, Any] = {
            "at": T0 + timedelta(minutes=9 * i, seconds=0 if request else 7 * i),
            "agent": "alpha" if i < 12 else "beta",
            "url": f"https://api.example.com/v1/{'sale/50%_off' if i % 4 < 2 else 'things'}",
        }
        if not request:
            fields["model"] = "gpt-x" if i % 3 else "claude-y"
            fields["tokens_in"], fields["tokens_out"], fields["cost_usd"] = 10 * i, i, 0.001 * i
            fields["status"] = {5: 404, 13: 404, 15: 500}.get(i, 200)
            fields["last_byte_ms"] = 40.0 * i if i % 4 == 1 else None
        if i == 17:
            fields.update(kind="policy.refused", status=None, error="no-slack: not in the allowlist")
        out.append(event(i, **fields))
    return out


def seed(url: str, blobs: Path) -> str:
    ledger = open_ledger(url, blobs.as_uri())
    try:
        ledger.append(batch(events()[:14]))
        ledger.append(batch(events()[14:], collector="other"))
    finally:
        ledger.close()
    return url


@pytest.fixture
def both(tmp_path: Path, pg_url: str) -> tuple[str, str]:
    """A SQLite and a PostgreSQL Ledger holding the same events."""
    return (
        seed(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path / "blobs"),
        seed(pg_url, tmp_path / "pg-blobs"),
    )


@pytest.mark.parametrize(("name", "args", "normalize"), READS, ids=[r[0] for r in READS])
def test_each_read_command_answers_the_same_on_sqlite_and_postgresql(
    both: tuple[str, str], home: Path, name: str, args: list[str], normalize: Normalize
) -> None:
    """The read path runs one SQL text per question on either engine: every read command prints the
    same bytes from both Ledgers (and says something: an empty answer would compare equal too)."""
    outs = []
    for url in both:
        run = flightlog(home, "ledger", *args, "--ledger", url)
        assert run.returncode == 0, f"{name} on {url.split(':')[0]}: {run.stderr}"
        outs.append(normalize(run.stdout))
    assert outs[0].strip(), name
    assert outs[0] == outs[1], name


def test_the_answers_are_the_events_seeded(both: tuple[str, str], home: Path) -> None:
    """The comparison above compares answers that are right: sums, a refusal's rule, LIKE's own
    characters matched literally, a duration filter reading the join."""
    url = both[1]
    totals = json.loads(flightlog(home, "ledger", "counts", "--json", "--ledger", url).stdout)
    assert totals["events"] == 20 and totals["tokens_in"] == sum(10 * i for i in range(1, 20, 2))
    rules = json.loads(flightlog(home, "ledger", "counts", "--by", "rule", "--json", "--ledger", url).stdout)
    assert {g["key"]: g["events"] for g in rules["groups"]} == {None: 19, "no-slack": 1}
    words = json.loads(
        flightlog(home, "ledger", "query", "--url", "50%_off", "--json", "--ledger", url).stdout
    )
    assert len(words["events"]) == 10 and all("50%_off" in e["url"] for e in words["events"])


# --- reads never create nor migrate ---------------------------------------------------------------

MISSING: list[list[str]] = [
    ["ledger", "counts"],
    ["ledger", "counts", "--by", "model"],
    ["ledger", "tally", "--by", "agent"],
    ["ledger", "query"],
    ["ledger", "query", "errors today"],
    ["ledger", "row", "ev-000001"],
    ["ledger", "action", "act-000001"],
    ["ledger", "state"],
    ["ledger", "ask", "cost", "by", "model"],
    ["ledger", "blob", "0" * 64],
    ["ledger", "verify"],
    ["uses", "some_tool"],
    ["task", "some-task"],
    ["trace", "ev-000001"],
    ["export", "--format", "jsonl"],
    ["browse"],
]
"""Every command that only reads the Ledger."""


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes (folders too, as empty entries)."""
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"" for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("args", MISSING, ids=[" ".join(a[:3]) for a in MISSING])
def test_a_read_on_no_ledger_says_so_and_writes_nothing(tmp_path: Path, args: list[str]) -> None:
    """A read command where no Ledger is exits non-zero with one line naming the path and how one is
    made; the home stays empty, and a mistyped FLIGHTLOG_LEDGER makes neither a file nor its folders."""
    home = tmp_path / "home"
    home.mkdir()
    run = flightlog(home, *args)
    assert run.returncode != 0 and not run.stdout
    assert run.stderr.count("\n") == 1, run.stderr
    assert str(home / "ledger.db") in run.stderr and "flightlog ledger migrate" in run.stderr
    assert tree(home) == {}
    typo = tmp_path / "ledgre" / "ledger.db"
    run = flightlog(home, *args, env={"FLIGHTLOG_LEDGER": f"sqlite:///{typo}"})
    assert run.returncode != 0 and str(typo) in run.stderr
    assert not typo.parent.exists() and tree(home) == {}


def test_a_read_on_an_empty_postgresql_schema_finds_no_ledger(pg_url: str, home: Path) -> None:
    """A PostgreSQL database holding no flightlog schema is no Ledger: said, and left without tables."""
    run = flightlog(home, "ledger", "counts", "--ledger", pg_url)
    assert run.returncode != 0 and "no Ledger at" in run.stderr and "flightlog ledger migrate" in run.stderr
    search_path = pg_url.rsplit("%3D", 1)[1]
    with psycopg.connect(pg_url.replace("+psycopg", "")) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (search_path,)
        ).fetchone()
    assert tables == (0,)


@pytest.mark.parametrize("args", MISSING, ids=[" ".join(a[:3]) for a in MISSING])
def test_a_read_on_an_older_schema_says_to_migrate_and_leaves_it(tmp_path: Path, args: list[str]) -> None:
    """A Ledger of an older schema version is not migrated by a read: the command says it needs
    migrating and how, and the database still holds the older version."""
    home = tmp_path / "home"
    home.mkdir()
    engine = make_engine(f"sqlite:///{home / 'ledger.db'}")
    migrate(engine, "0009")
    engine.dispose()
    run = flightlog(home, *args)
    assert run.returncode != 0 and "schema 0009" in run.stderr and "migrate" in run.stderr, run.stderr
    with sqlite3.connect(home / "ledger.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == ("0009",)
    assert flightlog(home, "ledger", "migrate").returncode == 0
    assert flightlog(home, "ledger", "counts").returncode == 0  # what migrate was for


# --- what a read imports ------------------------------------------------------------------------------

HEAVY = ("sqlalchemy", "sqlmodel", "alembic", "mitmproxy", "textual", "httpx")
PROBE = """
import sys
from flightlog.cli import main
sys.argv = ["flightlog", *sys.argv[1:]]
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
heavy = sorted({m.split(".")[0] for m in sys.modules} & HEAVY_NAMES)
print("heavy=" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [r[1] for r in READS], ids=[r[0] for r in READS])
def test_a_sqlite_read_imports_no_orm_nor_proxy_nor_ui(tmp_path: Path, args: list[str]) -> None:
    """After a read command ran on a SQLite Ledger, in process, neither SQLAlchemy (nor SQLModel,
    alembic) nor mitmproxy, textual or httpx is in `sys.modules`: a read pays for none of them."""
    home = tmp_path / "home"
    seed(f"sqlite:///{home / 'ledger.db'}", home / "blobs")
    probe = f"HEAVY_NAMES = {set(HEAVY)!r}\n{PROBE}"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLIGHTLOG_")}
    run = subprocess.run(
        [sys.executable, "-c", probe, "ledger", *args],
        capture_output=True,
        text=True,
        env={**environ, "FLIGHTLOG_HOME": str(home)},
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "heavy=\n" in run.stderr, run.stderr
