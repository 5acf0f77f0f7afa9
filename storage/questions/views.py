"""The words that shape a question's answer rather than its filter: counted views (by X, which tools),
totals (how much, how many), summaries (average latency, p95 duration), order (slowest, most
expensive), how many rows (top N, last N, first N) and durations (slower than 1s).

A mixin of the question reader (`storage.questions.reading`), like `storage.questions.times`: it reads words
off the reader's cursor and sets what the reader provides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.filters import GROUP_BYS
from storage.questions.times import QuestionError
from storage.questions.vocabulary import (
    AT_LEAST,
    AT_MOST,
    GROUP_NOUNS,
    METRICS,
    NUMBERS,
    PERCENTILE,
    SORT_WORDS,
    STATS,
    STATUS_PHRASES,
    UNITS,
    USED,
    duration,
)

MOST_ROWS = 1000
"""The most rows 'top N' / 'last N' keeps."""


class ViewWords:
    """Reads the shape of the answer; the reader provides the cursor, `set` and these fields."""

    i: int
    words: list[str]
    group_by: str | None
    total: bool
    limit: int | None
    stat: str | None
    metrics: list[str]
    per_each: bool

    def peek(self, ahead: int = 0) -> str | None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def set(self, name: str, value: Any) -> None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def holds(self, word: str) -> bool:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    if TYPE_CHECKING:

        def by_measure(self, low: str, target: str) -> bool:
            """Provided by `storage.questions.ranks.RankWords`."""

    def grouping(self, low: str) -> bool:
        if low == "hourly":
            self.group("hour")
            return True
        if low == "grouped" and (self.peek() or "").lower() == "by":
            self.i += 1
            low = "by"
        if low not in ("by", "per"):
            return False
        target = self.peek()
        if low == "per" and (target or "").lower() in ("call", "request", "event", "exchange", "answer"):
            self.i += 1  # "average cost per call": a figure per event is what a summary is of
            self.per_each = True  # "cost per call" alone: its average
            return True
        if target is None:
            raise QuestionError(f"'{low}' needs what to count by: {', '.join(GROUP_BYS)}")
        t = target.lower()
        if self.by_measure(low, t):
            return True
        t = "status" if t == "statuses" else "rule" if t in ("limit", "limits") else t
        t = "hour" if t == "hours" else t
        name = t if t in GROUP_BYS else t.removesuffix("s") if t.removesuffix("s") in GROUP_BYS else None
        if name is None and low == "by" and self.holds(target):
            return True  # "calls by alpha": by whom, not counted by; the next word names the agent
        self.i += 1
        if name is None:
            raise QuestionError(f"cannot count by {target!r}; by one of: {', '.join(GROUP_BYS)}")
        self.group(name)
        return True

    def counted(self, low: str) -> bool:
        """'which tools', 'what models', 'tools used', 'hosts called': counted by that key;
        'how much', 'how many': one sum."""
        nxt = (self.peek() or "").lower()
        if low in ("which", "what") and nxt in GROUP_NOUNS:
            self.i += 1
            self.group(GROUP_NOUNS[nxt])
            return True
        if low in GROUP_NOUNS and low.endswith("s") and nxt in USED:
            self.i += 1
            self.group(GROUP_NOUNS[low])
            return True
        if low == "how" and nxt in ("much", "many"):
            self.i += 1
            self.total = True
            return True
        if low == "how" and nxt == "long":  # "how long did calls take": their average duration
            self.i += 1
            self.set_stat("avg")
            self.metrics.append("duration")
            return True
        return False

    def group(self, name: str) -> None:
        if self.group_by is not None and self.group_by != name:
            raise QuestionError(f"one counted view per question: by {self.group_by} or by {name}?")
        self.group_by = name

    def took(self, low: str) -> bool:
        """'slower than 1 second', 'over 500ms', 'at least 2s', 'less than a minute'."""
        nxt = (self.peek() or "").lower()
        step = 0
        comparing = (
            low in ("more", "less", "longer", "shorter", "slower", "faster", "quicker") and nxt == "than"
        )
        if comparing or (low == "at" and nxt in ("least", "most")):
            step = 1
        elif low not in AT_LEAST | AT_MOST:
            return False
        got = duration(self.words[self.i + step :])
        if got is None:
            if step or low in ("slower", "faster", "longer", "shorter", "quicker"):
                given = self.words[self.i + step] if self.i + step < len(self.words) else "nothing"
                raise QuestionError(
                    f"'{low} {nxt}' needs a duration, e.g. '{low} than 1 second' or '500ms', not {given!r}"
                )
            return False
        ms, used = got
        self.i += step + used
        low_bound = low in AT_LEAST or low in ("more", "longer") or (low == "at" and nxt == "least")
        self.set("min_duration_ms" if low_bound else "max_duration_ms", ms)
        return True

    def order(self, low: str) -> bool:
        """'slowest calls', 'most expensive'; 'top 10 slowest', 'last 3 errors', 'first 5 calls today'
        ('last 3 days' is a time phrase: a count followed by a unit of time)."""
        if low in SORT_WORDS:
            self.set("sort", SORT_WORDS[low])
            return True
        nxt = (self.peek() or "").lower()
        sorted_by = (self.peek(1) or "").lower() if nxt == "most" else nxt
        if low.isdigit() and sorted_by in SORT_WORDS:  # "the 10 most expensive calls", "20 slowest"
            self.limit = max(1, min(int(low), MOST_ROWS))
            return True
        if low not in ("top", "last", "first") or not (nxt.isdigit() or nxt in NUMBERS):
            return False
        unit = (self.peek(1) or "").lower().removesuffix("s")
        if low != "top" and unit in (*UNITS, "month"):
            return False
        self.i += 1
        self.limit = max(1, min(int(nxt) if nxt.isdigit() else NUMBERS[nxt], MOST_ROWS))
        if low == "first":
            self.set("sort", "oldest")
        return True

    def summary(self, low: str) -> bool:
        """'average latency', 'p95 duration', '99th percentile', 'median cost': a figure summarized."""
        if low in STATS:
            self.set_stat(STATS[low])
            return True
        percent = PERCENTILE.match(low)
        if percent and (self.peek() or "").lower() in ("percentile", "pct"):
            self.i += 1
            self.set_stat(f"p{percent.group(1)}")
            return True
        if low in METRICS:
            self.metrics.append(METRICS[low])
            return True
        return False

    def set_stat(self, stat: str) -> None:
        if self.stat is not None and self.stat != stat:
            raise QuestionError(f"one summary per question: {self.stat} or {stat}?")
        self.stat = stat

    def metric(self) -> str | None:
        """The figure a summary is of: the last one named ("average cost"), else duration; "latency
        by model" with no summary named is its average."""
        if self.stat is None and "duration" in self.metrics:
            self.stat = "avg"
        if self.stat is None:
            return None
        return self.metrics[-1] if self.metrics else "duration"

    def status_phrase(self, low: str) -> bool:
        """Two-word statuses: server errors, client errors, not found, rate limited."""
        status = STATUS_PHRASES.get((low, (self.peek() or "").lower()))
        if status is None:
            return False
        self.i += 1
        self.set("status", status)
        return True
