"""A question in plain words, read deterministically into a `Filter` and a counted view; never into SQL.

"errors from agent alpha yesterday", "cost by model this week", "calls to api.openai.com in the last
hour", "requests in session s1", "POST to /v1/chat/completions": each word is either a value for a
field, part of a time phrase, a grouping, or a known filler word. Words it did not understand are not
guessed at: they come back in `Question.unknown` so the answer can name them. Phrases that cannot mean
one filter (two agents, a grouping it cannot count by, a field without a value, SQL) are refused with
a `QuestionError` that says why.

The reading rules, in the order they are tried for each word:
- `field=value` or `field:value`, or a field name followed by its value (`agent alpha`, `in session s1`);
- time: today, yesterday, this/last hour|week|month, (in the) last|past N minutes|hours|days|weeks,
  since|after|until|before DATE, on DATE, a bare DATE (YYYY-MM-DD, whole UTC days);
- grouping: by|per hour|session|turn|kind|agent|model|tool|task (plurals too), hourly;
- status: errors/failed (status >= 400 or an error), ok/successful, 4xx, a code (404, 404s);
- HTTP methods (GET only in capitals, since "get" is an everyday word), inbound/outbound;
- MCP: `MCP calls` are the `mcp.tools/call` events, `MCP tools` the same counted by tool;
- a host (a word with a dot, `to api.openai.com`), a path (`/v1/chat`) or a whole URL;
- filler words (requests, calls, show, the, ...) are understood and change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final
from urllib.parse import urlsplit

from storage.kinds import MCP_TOOL_CALL
from storage.queries import GROUP_BYS, Filter, QueryError

FIELDS: Final = ("kind", "tool", "session", "task", "turn", "agent", "model", "host", "status", "method")
FIELD_ALIASES: Final = {"url": "url", "path": "url", "direction": "direction", "user": "agent"}
METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
FILLER: Final = frozenset(
    [
        "a",
        "all",
        "an",
        "and",
        "any",
        "are",
        "answers",
        "at",
        "calls",
        "count",
        "did",
        "do",
        "events",
        "every",
        "exchanges",
        "for",
        "from",
        "give",
        "had",
        "has",
        "have",
        "how",
        "in",
        "list",
        "many",
        "me",
        "much",
        "of",
        "on",
        "requests",
        "responses",
        "show",
        "the",
        "there",
        "to",
        "total",
        "traffic",
        "was",
        "went",
        "were",
        "what",
        "which",
        "with",
        "cost",
        "costs",
        "spend",
        "spent",
        "tokens",
        "usage",
        "made",
        "sent",
        "get",
        "please",
        "call",
        "called",
        "counts",
    ]
)
MCP_CALL: Final = MCP_TOOL_CALL
"""The event kind of a recorded MCP tool call (stdio through `flightlog mcp-record`, or over HTTP)."""
ERRORS: Final = frozenset({"errors", "error", "failed", "failures", "failure", "failing"})
OK: Final = frozenset({"ok", "successful", "succeeded", "success"})
UNITS: Final = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
NUMBERS: Final = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    )
}
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?z?$")
_SQL = re.compile(
    r"(;|--|\bselect\b.*\bfrom\b|\bdrop\s+table\b|\binsert\s+into\b|\bunion\s+select\b)",
    re.IGNORECASE,
)


class QuestionError(QueryError):
    """A question that cannot be read as one filter; the message says why."""


@dataclass(frozen=True, slots=True)
class Question:
    """What a question was read as: the filter, the counted view if any, and the words not understood."""

    text: str
    filter: Filter
    group_by: str | None = None
    unknown: tuple[str, ...] = ()
    read_as: tuple[str, ...] = field(default=())

    def explain(self) -> str:
        """One line for the answer: what was understood and which words were not."""
        parts = [self.filter.describe()]
        if self.group_by:
            parts.append(f"counted by {self.group_by}")
        line = "read as: " + ", ".join(parts)
        if self.unknown:
            line += "; did not understand: " + ", ".join(repr(w) for w in self.unknown)
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.text,
            "filter": self.filter.to_json(),
            "group_by": self.group_by,
            "unknown": list(self.unknown),
            "read_as": self.explain(),
        }


def _tokens(text: str) -> list[str]:
    """Words, with quoted phrases kept whole and trailing punctuation dropped."""
    out = []
    for quoted, word in re.findall(r'"([^"]*)"|(\S+)', text):
        token = quoted if quoted else word.rstrip("?!,;")
        if not quoted and token.endswith(".") and "." not in token[:-1]:
            token = token[:-1]
        if token:
            out.append(token)
    return out


def _day(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def _parse_date(word: str) -> tuple[datetime, datetime]:
    """A date (the whole UTC day) or a datetime (that instant to the next minute) as [start, end)."""
    try:
        when = datetime.fromisoformat(word.upper().replace("Z", "+00:00"))
    except ValueError as e:
        raise QuestionError(f"{word!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from e
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if len(word) == 10:
        return when, when + timedelta(days=1)
    return when, when + timedelta(minutes=1)


class _Reader:
    """Walks the words once, filling fields; one instance per question."""

    def __init__(self, text: str, now: datetime) -> None:
        self.text = text
        self.now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
        self.words = _tokens(text)
        self.i = 0
        self.values: dict[str, Any] = {}
        self.url: list[str] = []
        self.group_by: str | None = None
        self.unknown: list[str] = []

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

    def set_range(self, since: datetime | None, until: datetime | None) -> None:
        if since is not None:
            self.set("since", since)
        if until is not None:
            self.set("until", until)

    def value_for(self, name: str) -> str:
        value = self.peek()
        if value is None:
            raise QuestionError(f"{name!r} needs a value (e.g. '{name} alpha')")
        self.i += 1
        return value

    def read(self) -> Question:
        if not self.words:
            raise QuestionError("ask a question, e.g. 'errors from agent alpha yesterday'")
        if _SQL.search(self.text):
            raise QuestionError("questions are plain words, never SQL (e.g. 'errors by model today')")
        while self.peek() is not None:
            self.word()
        try:
            flt = Filter(url=tuple(self.url), **self.values)
        except QueryError as e:
            raise QuestionError(str(e)) from e
        return Question(
            text=self.text,
            filter=flt,
            group_by=self.group_by,
            unknown=tuple(self.unknown),
        )

    def word(self) -> None:
        word = self.take()
        low = word.lower()
        if ("=" in word or ":" in word) and self.field_pair(word):
            return
        if self.time(low) or self.grouping(low):
            return
        name = FIELD_ALIASES.get(low, low)
        if name in FIELDS or name in ("url", "direction"):
            self.field(name, self.value_for(low))
        elif low in ERRORS:
            self.set("status", "errors")
        elif low in OK:
            self.set("status", "ok")
        elif re.fullmatch(r"[1-5]xx", low):
            self.set("status", low)
        elif re.fullmatch(r"[1-5]\d\ds?", low):
            self.set("status", low[:3])
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
        elif name == "host":
            self.set("host", value.lower())
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
        name = t if t in GROUP_BYS else t.removesuffix("s") if t.removesuffix("s") in GROUP_BYS else None
        if name is None:
            raise QuestionError(f"cannot count by {target!r}; by one of: {', '.join(GROUP_BYS)}")
        self.group(name)
        return True

    def group(self, name: str) -> None:
        if self.group_by is not None and self.group_by != name:
            raise QuestionError(f"one counted view per question: by {self.group_by} or by {name}?")
        self.group_by = name

    def time(self, low: str) -> bool:
        today = _day(self.now)
        if low == "today":
            self.set_range(today, None)
        elif low == "yesterday":
            self.set_range(today - timedelta(days=1), today)
        elif low in ("this", "last", "past") and self.period(low):
            return True
        elif low in ("since", "after", "until", "before"):
            self.bound(low, self.value_for(low))
        elif low == "on" and _DATE.match((self.peek() or "").lower()):
            self.set_range(*_parse_date(self.take()))
        elif _DATE.match(low):
            self.set_range(*_parse_date(low))
        else:
            return False
        return True

    def period(self, low: str) -> bool:
        """'this week', 'last month', 'last hour', 'last 3 days', 'past two hours'."""
        nxt = (self.peek() or "").lower()
        count = None
        if nxt.isdigit() or nxt in NUMBERS:
            count = int(nxt) if nxt.isdigit() else NUMBERS[nxt]
            unit = (self.peek(1) or "").lower().removesuffix("s")
            if unit not in UNITS:
                raise QuestionError(f"'{low} {nxt}' needs a unit: minutes, hours, days or weeks")
            if count < 1:
                raise QuestionError(f"'{low} {nxt} {unit}s' is an empty time range")
            self.i += 2
            self.set_range(self.now - timedelta(seconds=count * UNITS[unit]), None)
            return True
        unit = nxt.removesuffix("s") if nxt.endswith("s") and low != "this" else nxt
        if unit not in ("minute", "hour", "day", "week", "month"):
            return False
        self.i += 1
        today = _day(self.now)
        if low == "this":
            start = {
                "minute": self.now.replace(second=0, microsecond=0),
                "hour": self.now.replace(minute=0, second=0, microsecond=0),
                "day": today,
                "week": today - timedelta(days=today.weekday()),
                "month": today.replace(day=1),
            }[unit]
            self.set_range(start, None)
        elif unit == "week" and low == "last":
            monday = today - timedelta(days=today.weekday())
            self.set_range(monday - timedelta(days=7), monday)
        elif unit == "month" and low == "last":
            first = today.replace(day=1)
            self.set_range((first - timedelta(days=1)).replace(day=1), first)
        elif unit == "month":
            self.set_range(self.now - timedelta(days=30), None)
        else:
            self.set_range(self.now - timedelta(seconds=UNITS[unit]), None)
        return True

    def bound(self, word: str, value: str) -> None:
        low = value.lower()
        today = _day(self.now)
        if low == "today":
            start, end = today, today + timedelta(days=1)
        elif low == "yesterday":
            start, end = today - timedelta(days=1), today
        elif _DATE.match(low):
            start, end = _parse_date(low)
        else:
            raise QuestionError(f"'{word} {value}': give a date (YYYY-MM-DD), 'today' or 'yesterday'")
        if word in ("since", "after"):
            self.set("since", start if word == "since" else end)
        else:
            self.set("until", start)


def ask(text: str, now: datetime | None = None) -> Question:
    """Read a question in plain words; `now` fixes the clock for 'today', 'last hour' and the like."""
    return _Reader(text, now or datetime.now(UTC)).read()
