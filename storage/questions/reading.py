"""A question in plain words, read deterministically into a `Filter` and a view; never into SQL.

"errors from agent alpha yesterday", "which agent used the most tokens", "slowest calls", "calls slower
than 1 second", "how much did gpt4o cost after 3pm", "how many calls did delta make": every word is
read by a construct (a field, a value the Ledger holds, a time, a measure, a grouping, an order, a
limit) or is one of the listed words that carry no meaning (`vocabulary.FILLER`). Any other word is
never dropped: the question is refused with one line naming it, so plain words never silently answer
a different question (a refused phrase further on is named after it). Phrases that cannot mean one
reading (two agents, a grouping it cannot count by, most and least, SQL) are refused too.

The reading rules, in the order they are tried for each word:
- `field=value` or `field:value`, or a field name followed by its value (`agent alpha`, `in session s1`);
- time (`storage.questions.times`): today, yesterday, this/last hour|week|month, last N days, since DATE,
  and times of day (after 3pm, between 1pm and 2pm) on the day the other words name;
- grouping: by|per hour|session|turn|kind|agent|model|tool|task|host|status, hourly; "which tools",
  "tools used"; by a measure ("agents by cost": ranked by it);
- durations: slower|longer than, over, at least, more than D (at least D); faster than, under, less
  than D (below D); D is "1s", "500 ms", "two seconds", "a minute";
- order: slowest, fastest, costliest/most expensive, largest, oldest, newest; "top N" keeps N;
- ranks (`storage.questions.ranks`): most, least, busiest, cheapest, "top" before a grouping; units
  (calls, requests, exchanges count exchanges; events count events) and the count;
- totals: "how much", "how many", total, sum, and a measure of no grouping ("cost of session s4");
- status: errors/failed, ok, server/client errors, not found, rate limited, 4xx, a code (404, 404s);
  refused/denied/blocked (the door's refusals); streamed (a first token was recorded);
- HTTP methods (GET only in capitals, since "get" is an everyday word), inbound/outbound;
- MCP: `MCP calls` are the `mcp.tools/call` events, `MCP tools` the same counted by tool;
- a model's name as the Ledger holds it or spelled otherwise (gpt4o), a family or provider (claude),
  a host (a word with a dot, localhost, an IP, or a label the Ledger holds), a path (`/v1/chat`) or a
  whole URL: a model or host the Ledger does not hold is refused unless quoted;
- the listed words that carry no meaning (the, show, did, ...) are read and change nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from storage.filters import Filter, QueryError
from storage.kinds import MCP_TOOL_CALL as MCP_CALL
from storage.questions.known import Known, spelled
from storage.questions.ranks import RankWords
from storage.questions.times import QuestionError, TimeWords, clock_range
from storage.questions.views import ViewWords
from storage.questions.vocabulary import (
    CHECKED,
    ERRORS,
    FIELD_ALIASES,
    FIELDS,
    FILLER,
    FUNCTION_WORDS,
    GROUP_NOUNS,
    HINT,
    METHODS,
    MODEL,
    OK,
    REFUSED,
    REFUSED_KIND,
    RESOLVED,
    SQL,
    STATUS_WORDS,
    STREAMED,
    TOTAL_WORDS,
    quoted_tokens,
)

__all__ = ["Question", "QuestionError", "ask"]

READ_AFTER = frozenset({"am", "pm", "and", "to", "percentile", "pct", "ago"})
"""Words read only after another ('3 pm', 'between 1pm and 2pm'): after a refused phrase they are
its own, not words of their own to name."""


@dataclass(frozen=True, slots=True)
class Question:
    """What a question was read as: the filter, the view (events, a total, counted by a key, or a
    figure summarized), how many rows at most, what a count counts (`unit`: exchanges or events),
    what counted rows are ranked by (`rank`, largest first unless `ascending`) and the spellings of
    values the Ledger holds that its words matched (`matched`)."""

    text: str
    filter: Filter
    group_by: str | None = None
    total: bool = False
    limit: int | None = None
    stat: str | None = None
    metric: str | None = None
    unit: str = "events"
    rank: str | None = None
    ascending: bool = False
    matched: tuple[str, ...] = ()
    measure: str | None = None
    """What a total was asked of: `exchanges`, `events`, `tokens` or `cost` (None: all of it)."""

    @property
    def view(self) -> str:
        """`stats` (a figure summarized, per key if grouped), `groups` (counted by a key), `totals`
        (one sum) or `events` (a page of them)."""
        if self.metric:
            return "stats"
        return "groups" if self.group_by else "totals" if self.total else "events"

    def explain(self) -> str:
        """One line for the answer: what was understood, what is counted, and how it is ordered."""
        parts = [self.filter.describe(), *self.matched]
        order = ("least" if self.ascending else "most") + " first"
        if self.metric:
            unit = {"duration": "duration_ms", "cost": "cost_usd", "tokens": "tokens in+out"}[self.metric]
            parts.append(f"{self.stat} of {unit}" + (f" by {self.group_by}" if self.group_by else ""))
            if self.rank:
                parts.append(f"ranked by {self.stat}, {order}")
        elif self.group_by:
            parts.append(f"{self.unit} counted by {self.group_by} with their total")
            if self.rank:
                parts.append(f"ranked by {self.rank}, {order}")
        elif self.total:
            parts.append(f"summed: {self.measure or 'exchanges, events, tokens and cost'}")
        else:
            parts.append("events listed (a request and its answer are two)")
        if self.limit is not None:
            parts.append(f"at most {self.limit}")
        return "read as: " + ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.text,
            "filter": self.filter.to_json(),
            "group_by": self.group_by,
            "view": self.view,
            "limit": self.limit,
            "stat": self.stat,
            "metric": self.metric,
            "counting": self.unit,
            "rank": self.rank,
            "ascending": self.ascending,
            "values_matched": list(self.matched),
            "measure": self.measure,
            "read_as": self.explain(),
        }


class _Reader(TimeWords, ViewWords, RankWords):
    """Walks the words once, filling fields; one instance per question."""

    def __init__(self, text: str, now: datetime, known: Known | None) -> None:
        self.text = text
        self.now = now.astimezone(UTC) if now.tzinfo else now.replace(tzinfo=UTC)
        pairs = quoted_tokens(text)
        self.words = [w for w, _ in pairs]
        self.quoted = [q for _, q in pairs]
        self.i = 0
        self.known = known
        self.values: dict[str, Any] = {}
        self.url: list[str] = []
        self.group_by: str | None = None
        self.unknown: list[str] = []
        self.notes: dict[str, str] = {}
        self.total = False
        self.limit: int | None = None
        self.stat: str | None = None
        self.metrics: list[str] = []
        self.clock: dict[str, int] = {}
        self.units: list[str] = []
        self.counting = False
        self.most: bool | None = None
        self.matched: list[str] = []
        self.last_field: str | None = None
        self.per_each = False

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.words[j] if j < len(self.words) else None

    def take(self) -> str:
        word = self.words[self.i]
        self.i += 1
        return word

    def set(self, name: str, value: Any) -> None:
        old = self.values.get(name)
        if name == "status" and old is not None:
            self.values[name] = narrower(old, value)
            return
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
        refused: QuestionError | None = None
        while self.peek() is not None:
            before = self.i
            try:
                self.word()
            except QuestionError as e:  # read on: a word not understood further on is named first
                refused = refused or e
                self.i = max(self.i, before + 1)
        if refused is not None:  # and the words no construct reads, wherever they stand
            alone = [w for w in self.unknown if not (w.isdigit() or w.lower() in FUNCTION_WORDS | READ_AFTER)]
            named = ", ".join(repr(w) for w in dict.fromkeys(alone))
            raise QuestionError(str(refused) + (f" (and did not understand {named})" if named else ""))
        if self.unknown:
            named = ", ".join(
                repr(w) + (f" ({self.notes[w]})" if w in self.notes else "")
                for w in dict.fromkeys(self.unknown)
            )
            raise QuestionError(f"did not understand {named}: {HINT}")
        if self.clock:
            since, until = clock_range(
                self.values.pop("since", None),
                self.values.pop("until", None),
                self.now,
                self.clock.get("since"),
                self.clock.get("until"),
            )
            self.values.update({k: v for k, v in (("since", since), ("until", until)) if v is not None})
        if self.values.get("model") and self.values.get("models"):
            raise QuestionError(
                f"one question takes one model: {self.values['model']!r} or one of {self.values['models']}?"
            )
        rank, ascending, measure = self.shape()
        metric = self.metric()
        try:
            flt = Filter(url=tuple(self.url), **self.values)
        except QueryError as e:
            raise QuestionError(str(e)) from e
        return Question(
            self.text,
            flt,
            self.group_by,
            total=self.total,
            limit=self.limit,
            stat=self.stat,
            metric=metric,
            unit=self.unit(),
            rank=rank,
            ascending=ascending,
            matched=tuple(dict.fromkeys(self.matched)),
            measure=measure,
        )

    def word(self) -> None:
        word = self.take()
        low = word.lower()
        field = self.last_field
        self.last_field = None
        if ("=" in word or ":" in word) and self.field_pair(word):
            return
        if self.order(low) or self.time(low) or self.grouping(low) or self.counted(low) or self.took(low):
            return
        if self.superlative(low) or self.summary(low) or self.status_phrase(low) or self.counts_in(low):
            return
        if field is not None and GROUP_NOUNS.get(low) == field:
            return  # "claude models", "alpha's calls": the field's noun after its value
        if self.group_noun(low):
            return
        name = FIELD_ALIASES.get(low, low)
        if name in FIELDS or name in ("url", "direction"):
            self.field_word(name, low)
        elif (status := status_value(low)) is not None:
            self.set("status", status)
        elif low in REFUSED:
            self.set("kind", REFUSED_KIND)
        elif low in STREAMED:
            self.set("streamed", True)
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
            self.model_word(word)
        elif self.place(word):
            return
        elif low not in FILLER and not self.resolve(word):
            self.unknown.append(word)

    def model_word(self, word: str) -> None:
        """A model's name ("gpt-4o", "gpt4o"): the Ledger's models spelled alike; one it does not
        hold is refused (without a Ledger at hand, taken as given)."""
        if self.known is None or self.quoted[self.i - 1]:
            self.set("model", word.lower())
            return
        found = self.known.matches("model", word)
        if not found:
            self.not_held("model", word)
            return
        self.set_model(word, found)

    def not_held(self, name: str, word: str) -> None:
        self.unknown.append(word)
        self.notes[word] = f"no {name} of that name in the Ledger; quote it to ask anyway"

    def set_model(self, word: str, found: tuple[str, ...]) -> None:
        """One model, or several a family word names ("claude"): said in the reading when the
        word is spelled otherwise than the value."""
        if len(found) > 1:
            self.set("models", found)
        else:
            self.set("model", found[0])
        if len(found) > 1 or found[0].lower() != word.lower():
            self.matched.append(f"{word} = model {' or '.join(found)}")
        self.last_field = "model"

    def field_word(self, name: str, said: str) -> None:
        """A field's name, then its value: a value the Ledger holds, a quoted one, or a model's name;
        a function word after it leaves the field a plain noun ("what did the agent do"), unless the
        Ledger holds it as that field's value ("session a" where a session is named "a")."""
        nxt = self.peek()
        held = (
            nxt is not None and name in CHECKED and self.known is not None and self.known.matches(name, nxt)
        )
        if nxt is not None and not self.quoted[self.i] and nxt.lower() in FUNCTION_WORDS and not held:
            if name in CHECKED:
                return
            self.field(name, self.value_for(said))
            return
        if nxt is None:
            raise QuestionError(f"{said!r} needs a value (e.g. '{said} alpha')")
        quoted = self.quoted[self.i]
        value = self.take()
        if quoted:
            self.field(name, value)
            return
        if name == "kind" and value.lower() in REFUSED | {REFUSED_KIND}:
            self.set("kind", REFUSED_KIND)
            return
        if name == "method" and value.upper() not in (*METHODS, "CONNECT", "TRACE"):
            self.unknown.append(value)
            self.notes[value] = "not an HTTP method; quote it to ask anyway"
            return
        if name in CHECKED and self.known is not None:
            found = self.known.matches(name, value)
            if not found:
                self.not_held(name, value)
                return
            if name == "model":
                self.set_model(value, found)
                return
            value = self.one(name, value, found)
        self.field(name, value)

    def holds(self, word: str) -> bool:
        """Whether the Ledger holds `word` as a value of a field a bare word may name."""
        return self.known is not None and any(self.known.matches(name, word) for name in RESOLVED)

    def resolve(self, word: str) -> bool:
        """A bare word the Ledger holds as exactly one field's value: 'tokens alpha used' (an agent),
        'calls to slack' (the host api.slack.com), 'LEDGER_COUNTS calls' (a tool), 'claude' (every
        Anthropic model held)."""
        if self.known is None:
            return False
        found = {name: m for name in RESOLVED if (m := self.known.matches(name, word))}
        if not found:
            return False
        if len(found) > 1 and "model" in found and all(spelled(v) != spelled(word) for v in found["model"]):
            del found["model"]  # "anthropic" names the host api.anthropic.com before the models' family
        if len(found) > 1:
            said = " or ".join(f"'{name} {word}'" for name in found)
            raise QuestionError(f"{word!r} is a value of {', '.join(found)}: say {said}")
        ((name, values),) = found.items()
        if name == "model":
            self.set_model(word, values)
            return True
        self.set(name, self.one(name, word, values).lower() if name == "host" else values[0])
        self.last_field = name
        return True

    @staticmethod
    def one(name: str, word: str, values: tuple[str, ...]) -> str:
        if len(values) > 1:
            shown = ", ".join(values[:5]) + (", ..." if len(values) > 5 else "")
            raise QuestionError(f"{word!r} names several {name}s ({shown}): say which")
        return values[0]

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
            status = status_value(value.lower())
            if status is None:
                raise QuestionError(
                    f"did not understand {value!r} as a status (a code such as 404, a class such as 5xx, "
                    "errors, ok or a word such as forbidden)"
                )
            self.set("status", status)
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
        named = re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?", word) and not word[0].isdigit()
        if named or re.fullmatch(r"\d+(\.\d+){3}(:\d+)?|localhost(:\d+)?", word):
            if (
                self.known is not None
                and not self.quoted[self.i - 1]
                and not self.known.matches("host", word)
            ):
                self.not_held("host", word)
                return True
            self.set("host", word.lower())
            self.last_field = "host"
            return True
        return False


def status_value(low: str) -> str | None:
    """The status a word names ('errors', 'ok', '404', '5xx', 'forbidden' -> '403'), or None."""
    if low in ERRORS:
        return "errors"
    if low in OK:
        return "ok"
    if low in STATUS_WORDS:
        return STATUS_WORDS[low]
    if re.fullmatch(r"[1-5]xx", low):
        return low
    if re.fullmatch(r"[1-5]\d\ds?", low):
        return low[:3]
    return None


def narrower(old: str, new: str) -> str:
    """Two statuses that agree ('5xx errors', 'failed 500s', '4xx 404'): the narrower; others are
    refused."""
    for broad, narrow in ((old, new), (new, old)):
        if broad == narrow or (broad == "errors" and narrow[0] in "45"):
            return narrow
        if broad.endswith("xx") and narrow[0] == broad[0] and narrow.isdigit():
            return narrow
    raise QuestionError(f"one question takes one status: {old!r} or {new!r}?")


def ask(text: str, now: datetime | None = None, known: Known | None = None) -> Question:
    """Read a question in plain words; `now` fixes the clock for 'today', 'last hour' and the like.

    `known` answers which values the Ledger holds: a value after a field's name, and a bare word
    naming one, is taken only when the Ledger holds it. Without it (no Ledger at hand) a value after a
    field's name is taken as given and a bare word is not guessed at."""
    return _Reader(text, now or datetime.now(UTC), known).read()
