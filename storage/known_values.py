"""The Ledger answering `storage.ask_known.Known`: which of its values a question's word names.

Asked per word, never by listing every value up front: a lookup reads only rows holding the word
(equal ignoring case, or for hosts containing it), so a question costs a few indexed reads however
large the Ledger is.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.ask_known import pick
from storage.ask_words import CHECKED
from storage.filters import QueryError
from storage.schema import EventRow

EVENTS: Final = EventRow.__table__  # type: ignore[attr-defined]
MATCHES_AT_MOST: Final = 50
"""Candidate values read per word: more than this many hosts under one label is no single answer."""


class LedgerValues:
    """`Known` over a Ledger's events table; answers are kept for the question's life."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._seen: dict[tuple[str, str], tuple[str, ...]] = {}

    def matches(self, name: str, word: str) -> tuple[str, ...]:
        if name not in CHECKED:
            return ()
        key = (name, word.lower())
        if key not in self._seen:
            self._seen[key] = pick(name, word, self._candidates(name, word))
        return self._seen[key]

    def _candidates(self, name: str, word: str) -> list[str]:
        column = EVENTS.c[name]
        low = word.lower()
        cond = (
            func.lower(column).contains(low, autoescape=True) if name == "host" else func.lower(column) == low
        )
        stmt = select(column).where(cond).distinct().limit(MATCHES_AT_MOST)
        try:
            with self.engine.connect() as conn:
                return [str(v) for v in conn.execute(stmt).scalars() if v is not None]
        except SQLAlchemyError as e:
            raise QueryError(f"cannot read the Ledger's values: {e}".splitlines()[0]) from e
