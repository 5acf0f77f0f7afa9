"""`sqlite_time` writes every SQLite event's time and the chain's canonical time: it must give
exactly SQLAlchemy's text (naive UTC `isoformat` to the microsecond), whatever second or offset."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone

from storage.sqlite_setup import sqlite_time


def expected(at: datetime) -> str:
    utc = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return utc.replace(tzinfo=None).isoformat(" ", "microseconds")


def test_every_time_reads_as_isoformat_across_seconds_and_offsets() -> None:
    rng = random.Random(14)
    start = datetime(1, 1, 2, tzinfo=UTC)
    times = [start + timedelta(microseconds=rng.randrange(10**17)) for _ in range(12_000)]
    edge = datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    times += [edge, edge + timedelta(microseconds=1), datetime(1969, 12, 31, 23, 59, 59, 5, tzinfo=UTC)]
    times += [datetime(1970, 1, 1, tzinfo=UTC), datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)]
    for at in times:
        assert sqlite_time(at) == expected(at)
    east = timezone(timedelta(hours=5, minutes=30))
    for at in times[:200]:
        local = at.astimezone(east) if 2 < at.year < 9998 else at
        assert sqlite_time(local) == expected(at), "an offset is turned to UTC, not cut off"
    naive = datetime(2026, 12, 5, 11, 3, 4, 120)
    assert sqlite_time(naive) == "2026-12-05 11:03:04.000120", "a naive time is taken as UTC"


def test_neighbouring_seconds_never_share_a_text() -> None:
    """The last microsecond of one second and the first of the next (a day boundary) differ."""
    at = datetime(2026, 12, 5, 0, 0, 0, tzinfo=UTC)
    for step in range(5):
        before = at + timedelta(days=step) - timedelta(microseconds=1)
        after = at + timedelta(days=step)
        assert sqlite_time(before) == expected(before)
        assert sqlite_time(after) == expected(after)
        assert sqlite_time(before)[:19] != sqlite_time(after)[:19]
