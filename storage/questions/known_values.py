"""The Ledger answering `storage.questions.known.Known`: which of its values a question's word names.

Asked per word, never by reading every row: a word is looked up as typed, lower-cased and
upper-cased (`column IN (...)`, a range of the column's `(column, at, event_id)` index), so a
question costs a few index probes however large the Ledger is. A host named by one of its labels
("slack" for api.slack.com) is looked for among the distinct hosts, read by a loose index scan (the
next host above the last one, one probe each), as many as `HOSTS_AT_MOST`; a model spelled otherwise
("gpt4o") or named by its family ("claude") likewise among the distinct models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from storage.escaped import escape, needs_escape
from storage.questions.known import pick
from storage.questions.vocabulary import CHECKED
from storage.reader import Reader, reading

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

HOSTS_AT_MOST: Final = 1000
"""Distinct hosts a label is matched against (the first ones in name order)."""


class LedgerValues:
    """`Known` over a Ledger's events table; answers are kept for the question's life."""

    def __init__(self, source: Engine | Reader) -> None:
        self.source = source
        self._seen: dict[tuple[str, str], tuple[str, ...]] = {}
        self._distinct: dict[str, list[str]] = {}

    def matches(self, name: str, word: str) -> tuple[str, ...]:
        """The stored values `word` names (a word holding a non-UTF-8 byte is looked up, and given
        back, in the escaped form the writer stored it in: `storage.escaped`)."""
        if name not in CHECKED:
            return ()
        word = escape(word) if needs_escape(word) else word
        key = (name, word.lower())
        if key not in self._seen:
            forms = sorted({word, word.lower(), word.upper()})
            text = f"SELECT DISTINCT {name} FROM events WHERE {name} IN ({', '.join('?' * len(forms))})"
            found = pick(name, word, self._read(text, forms))
            if not found and name in ("host", "model"):
                found = pick(name, word, self.distinct(name))
            self._seen[key] = found
        return self._seen[key]

    def hosts(self) -> list[str]:
        """The distinct hosts in name order (`distinct`)."""
        return self.distinct("host")

    def distinct(self, name: str) -> list[str]:
        """The distinct values of `host` or `model` in name order, one index probe each (a loose
        index scan): what a label or a spelling is matched against."""
        if name not in self._distinct:
            found = list[str]()
            while len(found) < HOSTS_AT_MOST:
                if found:
                    nxt = self._read(f"SELECT min({name}) FROM events WHERE {name} > ?", [found[-1]])
                else:
                    nxt = self._read(f"SELECT min({name}) FROM events WHERE {name} IS NOT NULL", [])
                if not nxt:
                    break
                found.append(nxt[0])
            self._distinct[name] = found
        return self._distinct[name]

    def _read(self, text: str, params: list[Any]) -> list[str]:
        with reading(self.source) as r:
            rows = r.rows(text, params, "read the Ledger's values")
        return [str(v) for row in rows for v in row.values() if v is not None]
