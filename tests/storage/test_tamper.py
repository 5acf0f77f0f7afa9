"""Tampering past the triggers is found by `ledger verify`: the batch chain, on both engines.

Each case rewrites the ledger the way someone with the database file (SQLite: the `sqlite3` CLI,
after dropping the trigger in the way) or superuser rights (PostgreSQL: `session_replication_role
= replica`) could, then checks that verify names exactly what was done, one line each, exit 1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storage.chain.rederive import verify_chain
from storage.engine import make_engine
from storage.ledger import Ledger, open_ledger
from storage.migrate import migrate
from storage.rows import COLUMNS
from tests.storage.factory import batch, event, legacy_append
from tests.storage.tamper import Tamperer, heads, held, rechain, roots, signing_key, verify_cli

PER_BATCH = 3
COLS = ", ".join(COLUMNS)


def copy_of(source: str, **changes: str) -> str:
    """A SELECT list copying one event's row with some columns changed."""
    values = ", ".join(changes.get(c, c) for c in COLUMNS)
    return f"SELECT {values} FROM events WHERE event_id = '{source}'"


def record(ledger: Ledger, batches: int, start: int = 0) -> None:
    """`batches` batches of 3 events each: batch k (1-based) holds ev-(3k-3) .. ev-(3k-1)."""
    for b in range(start, start + batches):
        ledger.append(batch([event(b * PER_BATCH + i) for i in range(PER_BATCH)], position=b + 1))


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    record(opened, 6)
    yield opened
    opened.close()


def problems(ledger: Ledger, anchors: tuple[str, ...] = ()) -> list[str]:
    with ledger.engine.connect() as conn:
        return verify_chain(conn, anchors, keys=held(ledger), roots=roots(ledger)).problems


def replace_sql(tamper: Tamperer) -> str:
    """Rewrite ev-000001 in place: INSERT OR REPLACE (SQLite), ON CONFLICT DO UPDATE (PostgreSQL)."""
    if tamper.sqlite:
        return f"INSERT OR REPLACE INTO events ({COLS}) {copy_of('ev-000001', status='599')}"
    upsert = "ON CONFLICT (event_id) DO UPDATE SET status = 599"
    return f"INSERT INTO events ({COLS}) {copy_of('ev-000001')} {upsert}"


CASES: dict[str, tuple[object, tuple[str, ...], list[str]]] = {
    "insert-or-replace": (
        replace_sql,
        ("events_no_reinsert",),
        ["forged: event ev-000001 (batch #1 of test): its row is not the one recorded"],
    ),
    "delete": (
        "DELETE FROM events WHERE event_id = 'ev-000004'",
        ("events_no_delete",),
        ["deleted: event ev-000004 (batch #2 of test inserted it)"],
    ),
    "edited-row": (
        "UPDATE events SET url = 'https://evil.example/' WHERE event_id = 'ev-000007'",
        ("events_no_update",),
        ["forged: event ev-000007 (batch #3 of test): its row is not the one recorded"],
    ),
    "edited-time-reorders": (
        "UPDATE events SET seq = 999 WHERE event_id = 'ev-000006'",
        ("events_no_update",),
        ["forged: event ev-000006 (batch #3 of test): its row is not the one recorded"],
    ),
    "removed-batch": (
        "DELETE FROM events WHERE event_id IN ('ev-000009', 'ev-000010', 'ev-000011');"
        " DELETE FROM batches WHERE collector = 'test' AND chain_index = 4",
        ("events_no_delete", "batches_no_delete"),
        ["missing: batch #4 of test was removed"],
    ),
    "batch-row-kept-events-gone": (
        "DELETE FROM batches WHERE collector = 'test' AND chain_index = 2",
        ("batches_no_delete",),
        [
            "missing: batch #2 of test was removed",
            "inserted: event ev-000003 was inserted by no batch of the chain",
            "inserted: event ev-000004 was inserted by no batch of the chain",
            "inserted: event ev-000005 was inserted by no batch of the chain",
        ],
    ),
    "inserted": (
        f"INSERT INTO events ({COLS}) {copy_of('ev-000013', event_id="'ev-forged'")}",
        (),
        ["inserted: event ev-forged was inserted by no batch of the chain"],
    ),
    "moved-between-batches": (
        'UPDATE batches SET event_ids = \'["ev-000012","ev-000013"]\','
        " event_leaves = substr(event_leaves, 1, 32) WHERE collector = 'test' AND chain_index = 5",
        ("batches_no_update",),
        [
            "inserted: event ev-000014 was inserted by no batch of the chain",
            "forged: batch #5 of test: its batch row or its order does not match its digest"
            " (chained to the one before)",
        ],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_tampering_is_named_once(ledger: Ledger, ledger_url: str, case: str) -> None:
    """A sound ledger verifies clean; after the tampering, verify reports exactly the lines that
    name it (no more, no fewer), whatever the triggers said."""
    assert problems(ledger) == []
    sql, drop, expected = CASES[case]
    tamper = Tamperer(ledger_url)
    tamper.run(sql(tamper) if callable(sql) else str(sql), drop=drop)
    assert sorted(problems(ledger)) == sorted(expected)


def test_reordered_batches_break_their_links(ledger: Ledger, ledger_url: str) -> None:
    """Swapping two batches' places in the chain is found at both places and at the link after."""
    Tamperer(ledger_url).run(
        "UPDATE batches SET chain_index = -1 WHERE collector = 'test' AND chain_index = 3;"
        " UPDATE batches SET chain_index = 3 WHERE collector = 'test' AND chain_index = 4;"
        " UPDATE batches SET chain_index = 4 WHERE collector = 'test' AND chain_index = -1",
        drop=("batches_no_update",),
    )
    found = problems(ledger)
    assert [line.split(":")[1].strip() for line in found] == [
        "batch #3 of test",
        "batch #4 of test",
        "batch #5 of test",
    ]


def test_the_cli_reports_every_tampering_one_line_each(ledger_url: str, tmp_path: Path) -> None:
    """Five different tamperings of one ledger: `flightlog ledger verify` exits 1 and prints five
    problem lines, one per tampering (the goal: 100% found)."""
    blobs = (tmp_path / "blobs").as_uri()
    opened = open_ledger(ledger_url, blobs)
    record(opened, 6)
    opened.close()
    code, lines, _ = verify_cli(ledger_url, blobs)
    assert (code, lines) == (0, [])
    tamper = Tamperer(ledger_url)
    for case in ("insert-or-replace", "delete", "edited-row", "removed-batch", "inserted"):
        sql, drop, _expected = CASES[case]
        tamper.run(sql(tamper) if callable(sql) else str(sql), drop=drop)
    code, lines, _ = verify_cli(ledger_url, blobs)
    assert code == 1
    assert sorted(lines) == sorted(
        [
            "forged: event ev-000001 (batch #1 of test): its row is not the one recorded",
            "deleted: event ev-000004 (batch #2 of test inserted it)",
            "forged: event ev-000007 (batch #3 of test): its row is not the one recorded",
            "missing: batch #4 of test was removed",
            "inserted: event ev-forged was inserted by no batch of the chain",
        ]
    )


def test_a_removed_tail_is_found_against_a_printed_head(ledger_url: str, tmp_path: Path) -> None:
    """Removing the newest batches with their events leaves a consistent chain (verify alone cannot
    tell), but the head printed before no longer is in it: `--head` makes verify exit 1."""
    blobs = (tmp_path / "blobs").as_uri()
    opened = open_ledger(ledger_url, blobs)
    record(opened, 3)
    _, _, out = verify_cli(ledger_url, blobs)
    early = heads(out)["test"]
    record(opened, 2, start=3)
    opened.close()
    code, lines, out = verify_cli(ledger_url, blobs, "--head", early)
    assert (code, lines) == (0, []), "an anchored head stays valid while the chain grows"
    late = heads(out)["test"]
    assert late != early and f"head test #5 {late}" in out
    Tamperer(ledger_url).run(
        "DELETE FROM events WHERE event_id IN ('ev-000009', 'ev-000010', 'ev-000011', 'ev-000012',"
        " 'ev-000013', 'ev-000014'); DELETE FROM batches WHERE collector = 'test' AND chain_index > 3;"
        " UPDATE positions SET position = 3 WHERE collector = 'test'",
        drop=("events_no_delete", "batches_no_delete"),
    )
    assert verify_cli(ledger_url, blobs)[:2] == (0, [])
    code, lines, _ = verify_cli(ledger_url, blobs, "--head", early, "--head", late)
    assert code == 1
    assert lines == [
        f"truncated: head {late} is no longer in any chain"
        " (batches were removed or rewritten since it was printed)"
    ]


def test_batches_from_before_the_chain_are_counted_and_sealed(ledger_url: str, tmp_path: Path) -> None:
    """A ledger recorded before migration 0004: its events are counted, not chained (verify is ok
    and says how many); the first chained batch seals the old batch rows, so rewriting one is
    found, and so is an event slipped in among the old ones."""
    engine = make_engine(ledger_url)
    migrate(engine, "0003")
    legacy_append(engine, [event(0, payload=None), event(1, payload=None)])
    engine.dispose()
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    opened.append(batch([event(i) for i in range(2, 5)], position=2))
    with opened.engine.connect() as conn:
        report = verify_chain(conn, keys=held(opened), roots=roots(opened))
    assert (report.problems, report.legacy_events, report.chained_events) == ([], 2, 3)
    tamper = Tamperer(ledger_url)
    tamper.run("UPDATE batches SET position = 7 WHERE chain_index IS NULL", drop=("batches_no_update",))
    tamper.run(f"INSERT INTO events ({COLS}) {copy_of('ev-000001', event_id="'ev-slipped'")}")
    assert problems(opened) == [
        "forged: batch #1 of test: its batch row or its order does not match its digest"
        " (chained to the one before)",
        "inserted: a batch row from before the chain was added, removed or rewritten after signed"
        " chains began (then 1 rows, now 1)",
        "inserted: 1 events outside the chain beyond the 2 recorded before it began",
        "forged: collector test's delivered position (2) is not its newest batch's (7)",
    ]
    opened.close()


def test_every_column_reads_back_to_the_digest_it_was_written_with(ledger_url: str, tmp_path: Path) -> None:
    """The writer hashes rows as it inserts them and verify hashes them as the engine gives them
    back: every column set (odd text, binary head, floats, booleans, NULLs) agrees on both engines."""
    opened = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    full = event(
        0,
        payload=b"\xff\x00binary",
        tool="t\u00e9l\u00e9",
        session="s",
        task="\U0001f680 launch",
        turn="3",
        agent='a "quoted" \\ agent',
        model="gpt-4o",
        tokens_in=2**40,
        tokens_out=0,
        cost_usd=1.0,
        error="line\nbreak\ttab",
        parent="act-x",
        redacted=("B_KEY", "A_KEY"),
        head=b"GET /\xff\x00 HTTP/1.1\r\nX: \xe9",
        escaped=True,
        first_byte_ms=12.5,
        last_byte_ms=20,
        first_token_ms=0.001,
    )
    opened.append(batch([full, event(1, payload=None, cost_usd=0.1 + 0.2), event(2, payload=b"")]))
    with opened.engine.connect() as conn:
        report = verify_chain(conn, keys=held(opened), roots=roots(opened))
    assert (report.problems, report.chained_events) == ([], 3)
    opened.close()


def test_a_chain_rewritten_without_the_key_is_found_by_verify_alone(ledger: Ledger, ledger_url: str) -> None:
    """A superuser edits a row and recomputes every digest from there on, as the chain's algorithm
    says but without the collector's signing key: every signature over a digest it recomputed is
    refused (the issue: such a chain verified "ok" before its digests were keyed)."""
    tamper = Tamperer(ledger_url)
    tamper.run("UPDATE events SET status = 201 WHERE event_id = 'ev-000005'", drop=("events_no_update",))
    rechain(ledger, tamper, "test", 2)
    assert problems(ledger) == [
        f"forged: batch #{i} of test: its signature does not verify with test's registered key"
        for i in range(2, 7)
    ]


def test_a_chain_rewritten_with_the_key_is_found_against_a_kept_head(ledger: Ledger, ledger_url: str) -> None:
    """An attacker holding the database and the collector's key rewrites a row and recomputes every
    digest from there on: each link checks out (verify alone cannot tell, as README says), but the
    head printed before is no longer in the chain."""
    with ledger.engine.connect() as conn:
        kept = verify_chain(conn, keys=held(ledger), roots=roots(ledger)).heads[0].digest
    tamper = Tamperer(ledger_url)
    tamper.run("UPDATE events SET status = 201 WHERE event_id = 'ev-000005'", drop=("events_no_update",))
    rechain(ledger, tamper, "test", 2, sign_with=signing_key(ledger, "test"))
    assert problems(ledger) == []
    assert problems(ledger, (kept,)) == [
        f"truncated: head {kept} is no longer in any chain"
        " (batches were removed or rewritten since it was printed)"
    ]


def test_a_head_that_is_not_a_digest_is_one_clear_error(ledger_url: str, tmp_path: Path) -> None:
    """`--head` takes the 64 hex digits verify prints; anything else is refused in one line."""
    code, lines, out = verify_cli(ledger_url, (tmp_path / "blobs").as_uri(), "--head", "nonsense")
    assert code == 1 and lines == [] and "Traceback" not in out
