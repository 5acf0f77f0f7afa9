"""A question in plain words, read deterministically into a `Filter` and a view; never into SQL.

"errors from agent alpha yesterday", "cost by model this week", "slowest calls", "calls slower than
1 second", "how much did gpt-4o cost today", "which tools were used today", "refused calls": each
word is a value for a field, part of a time phrase, a grouping, a duration, an order, or a known
filler word. A word it does not understand is never dropped: the question is refused with one line
naming it, so plain words never silently answer a different question. Phrases that cannot mean one
filter (two agents, a grouping it cannot count by, a field without a value, SQL) are refused too.

The reading rules, in the order they are tried for each word:
- `field=value` or `field:value`, or a field name followed by its value (`agent alpha`, `in session s1`);
- time (`storage.ask_time`): today, yesterday, this/last hour|week|month, last N days, since DATE, ...;
- grouping: by|per hour|session|turn|kind|agent|model|tool|task|host|status, hourly; and "which tools",
  "tools used" (counted by tool);
- durations: slower|longer than, over, at least, more than D (at least D); faster than, under, less
  than D (below D); D is "1s", "500 ms", "two seconds", "a minute";
- order: slowest, fastest, costliest/most expensive, largest, oldest, newest; "top N" keeps N;
- totals: "how much", "how many", total, sum (one sum instead of a list of events);
- status: errors/failed, ok, server/client errors, not found, rate limited, 4xx, a code (404, 404s);
  refused/denied/blocked (the door's refusals);
- HTTP methods (GET only in capitals, since "get" is an everyday word), inbound/outbound;
- MCP: `MCP calls` are the `mcp.tools/call` events, `MCP tools` the same counted by tool;
- a bare model name (gpt-4o, claude-..., o3-mini), a host (a word with a dot, localhost, an IP), a path
  (`/v1/chat`) or a whole URL;
- filler words (requests, calls, show, the, ...) are understood and change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from storage.ask_time import QuestionError, TimeWords
from storage.ask_words import (
    AT_LEAST,
    AT_MOST,
    ERRORS,
    FIELD_ALIASES,
    FIELDS,
    FILLER,
    GROUP_NOUNS,
    HINT,
    METHODS,
    MODEL,
    OK,
    REFUSED,
    REFUSED_KIND,
    SORT_WORDS,
    SQL,
    STATUS_PHRASES,
    STATUS_WORDS,
    TOTAL_WORDS,
    USED,
    duration,
    tokens,
)
from storage.filters import GROUP_BYS, Filter, QueryError
from storage.kinds import MCP_TOOL_CALL as MCP_CALL

__all__ = ["Question", "QuestionError", "ask"]


@dataclass(frozen=True, slots=True)
class Question:
    """What a question was read as: the filter, the view (events, a total, or counted by a key)."""

    text: str
    filter: Filter
    group_by: str | None = None
    total: bool = False
    limit: int | None = None

    @property
    def view(self) -> str:
        """`groups` (counted by a key), `totals` (one sum) or `events` (a page of them)."""
        return "groups" if self.group_by else "totals" if self.total else "events"

    def explain(self) -> str:
        """One line for the answer: what was understood."""
        parts = [self.filter.describe()]
        if self.group_by:
            parts.append(f"counted by {self.group_by}")
        elif self.total:
            parts.append("summed")
        if self.limit is not None:
            parts.append(f"top {self.limit}")
        return "read as: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.text,
            "filter": self.filter.to_json(),
            "group_by": self.group_by,
            "view": self.view,
            "limit": self.limit,
            "read_as": self.explain(),
        }


class _Reader(TimeWords):
    """Walks the words once, filling fields; one instance per question."""

    def __init__(self, text: str, now: datetime) -> None:
        self.text = text
        self.now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
        self.words = tokens(text)
        self.i = 0
        self.values: dict[str, Any] = {}
        self.url: list[str] = []
        self.group_by: str | None = None
        self.unknown: list[str] = []
        self.total = False
        self.limit: int | None = None

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.words[j] if j < len(self.words) else None

    def take(self) -> str:
        word = self.words[self.i]
        self.i += 1
        return word

    def set(self, name: str, value: Any) -> None:
        old = self.values.get(name)
        if old is not None and old != value:
            raise QuestionError(f"one question takes one {name}: {old!r} or {value!r}?")
        self.values[name] = value

    def value_for(self, name: str) -> str:
        value = self.peek()
        if value is None:
            raise QuestionError(f"{name!r} needs a value (e.g. '{name} alpha')")
        self.i += 1
        return value

    def read(self) -> Question:
        if not self.words:
            raise QuestionError("ask a question, e.g. 'errors from agent alpha yesterday'")
        if SQL.search(self.text):
            raise QuestionError("questions are plain words, never SQL (e.g. 'errors by model today')")
        while self.peek() is not None:
            self.word()
        if self.unknown:
            named = ", ".join(repr(w) for w in dict.fromkeys(self.unknown))
            raise QuestionError(f"did not understand {named}: {HINT}")
        try:
            flt = Filter(url=tuple(self.url), **self.values)
        except QueryError as e:
            raise QuestionError(str(e)) from e
        return Question(self.text, flt, self.group_by, total=self.total, limit=self.limit)

    def word(self) -> None:
        word = self.take()
        low = word.lower()
        if ("=" in word or ":" in word) and self.field_pair(word):
            return
        if self.time(low) or self.grouping(low) or self.counted(low) or self.took(low) or self.order(low):
            return
        if self.status_phrase(low):
            return
        name = FIELD_ALIASES.get(low, low)
        if name in FIELDS or name in ("url", "direction"):
            self.field(name, self.value_for(low))
        elif low in ERRORS:
            self.set("status", "errors")
        elif low in OK:
            self.set("status", "ok")
        elif low in STATUS_WORDS:
            self.set("status", STATUS_WORDS[low])
        elif re.fullmatch(r"[1-5]xx", low):
            self.set("status", low)
        elif re.fullmatch(r"[1-5]\d\ds?", low):
            self.set("status", low[:3])
        elif low in REFUSED:
            self.set("kind", REFUSED_KIND)
        elif word.upper() in METHODS and (word.isupper() or low != "get"):
            self.set("method", word.upper())
        elif low == "mcp":  # "MCP calls": tool calls over MCP; "MCP tools": counted by tool
            self.set("kind", MCP_CALL)
            if (self.peek() or "").lower() in ("tool", "tools"):
                self.i += 1
                self.group("tool")
        elif low in ("inbound", "incoming"):
            self.set("direction", "in")
        elif low in ("outbound", "outgoing"):
            self.set("direction", "out")
        elif low in TOTAL_WORDS:
            self.total = True
        elif MODEL.match(word):
            self.set("model", low)
        elif self.place(word):
            return
        elif low not in FILLER:
            self.unknown.append(word)

    def field_pair(self, word: str) -> bool:
        name, _, value = re.split(r"([=:])", word, maxsplit=1)
        name = FIELD_ALIASES.get(name.lower(), name.lower())
        if name.startswith("http") or "/" in name:
            return False
        if name in ("since", "after", "until", "before"):
            self.bound(name, value)
            return True
        if name not in FIELDS and name not in ("url", "direction"):
            return False
        if not value:
            raise QuestionError(f"{name!r} needs a value (e.g. '{name}=alpha')")
        self.field(name, value)
        return True

    def field(self, name: str, value: str) -> None:
        if name == "url":
            self.url.append(value)
        elif name == "status":
            low = value.lower()
            self.set("status", "errors" if low in ERRORS else "ok" if low in OK else low.removesuffix("s"))
        elif name == "method":
            self.set("method", value.upper())
        elif name == "direction":
            self.set("direction", {"inbound": "in", "outbound": "out"}.get(value.lower(), value.lower()))
        elif name in ("host", "model"):
            self.set(name, value.lower())
        else:
            self.set(name, value)

    def place(self, word: str) -> bool:
        """A host, a path or a whole URL, as in 'calls to api.openai.com' or 'POST to /v1/chat'."""
        if re.match(r"^https?://", word, re.IGNORECASE):
            parts = urlsplit(word)
            if parts.hostname:
                self.set("host", parts.hostname.lower())
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            if path not in ("", "/"):
                self.url.append(path)
            return True
        if word.startswith("/") and len(word) > 1:
            self.url.append(word)
            return True
        if re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?", word) and not word[0].isdigit():
            self.set("host", word.lower())
            return True
        if re.fullmatch(r"\d+(\.\d+){3}(:\d+)?|localhost(:\d+)?", word):
            self.set("host", word.lower())
            return True
        return False

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
        if target is None:
            raise QuestionError(f"'{low}' needs what to count by: {', '.join(GROUP_BYS)}")
        self.i += 1
        t = target.lower()
        t = "status" if t == "statuses" else "rule" if t in ("limit", "limits") else t
        name = t if t in GROUP_BYS else t.removesuffix("s") if t.removesuffix("s") in GROUP_BYS else None
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
                raise QuestionError(f"'{low} {nxt}' needs a duration, e.g. '{low} than 1 second' or '500ms'")
            return False
        ms, used = got
        self.i += step + used
        low_bound = low in AT_LEAST or low in ("more", "longer") or (low == "at" and nxt == "least")
        self.set("min_duration_ms" if low_bound else "max_duration_ms", ms)
        return True

    def order(self, low: str) -> bool:
        """'slowest calls', 'most expensive', 'top 10 slowest'."""
        if low in SORT_WORDS:
            self.set("sort", SORT_WORDS[low])
            return True
        nxt = self.peek() or ""
        if low == "top" and nxt.isdigit():
            self.i += 1
            self.limit = max(1, min(int(nxt), 1000))
            return True
        return False

    def status_phrase(self, low: str) -> bool:
        """Two-word statuses: server errors, client errors, not found, rate limited."""
        status = STATUS_PHRASES.get((low, (self.peek() or "").lower()))
        if status is None:
            return False
        self.i += 1
        self.set("status", status)
        return True


def ask(text: str, now: datetime | None = None) -> Question:
    """Read a question in plain words; `now` fixes the clock for 'today', 'last hour' and the like."""
    return _Reader(text, now or datetime.now(UTC)).read()
