"""The Ledger answering `storage.ask_known.Known`: which of its values a question's word names.

Asked per word, never by reading every row: a word is looked up as typed, lower-cased and
upper-cased (`column IN (...)`, a range of the column's `(column, at, event_id)` index), so a
question costs a few index probes however large the Ledger is. A host named by one of its labels
("slack" for api.slack.com) is looked for among the distinct hosts, read by a loose index scan (the
next host above the last one, one probe each), as many as `HOSTS_AT_MOST`.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.ask_known import pick
from storage.ask_words import CHECKED
from storage.filters import QueryError
from storage.schema import EventRow

EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]
HOSTS_AT_MOST: Final = 1000
"""Distinct hosts a label is matched against (the first ones in name order)."""


class LedgerValues:
    """`Known` over a Ledger's events table; answers are kept for the question's life."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._seen: dict[tuple[str, str], tuple[str, ...]] = {}
        self._hosts: list[str] | None = None

    def matches(self, name: str, word: str) -> tuple[str, ...]:
        if name not in CHECKED:
            return ()
        key = (name, word.lower())
        if key not in self._seen:
            column = EVENTS.c[name]
            forms = sorted({word, word.lower(), word.upper()})
            found = pick(name, word, self._read(select(column).where(column.in_(forms)).distinct()))
            if not found and name == "host":
                found = pick(name, word, self.hosts())
            self._seen[key] = found
        return self._seen[key]

    def hosts(self) -> list[str]:
        """The distinct hosts in name order, one index probe each (a loose index scan)."""
        if self._hosts is None:
            column, found = EVENTS.c.host, list[str]()
            while len(found) < HOSTS_AT_MOST:
                above = column > found[-1] if found else column.is_not(None)
                nxt = self._read(select(func.min(column)).where(above))
                if not nxt:
                    break
                found.append(nxt[0])
            self._hosts = found
        return self._hosts

    def _read(self, stmt: Any) -> list[str]:
        try:
            with self.engine.connect() as conn:
                return [str(v) for v in conn.execute(stmt).scalars() if v is not None]
        except SQLAlchemyError as e:
            raise QueryError(f"cannot read the Ledger's values: {e}".splitlines()[0]) from e
