"""A table of operator questions built from a grammar, each with its exact reading or its refusal, a
recorded Ledger to ask them of, and the plain SQL that answers each one independently (issue 51).

The grammar is shapes (what is asked: a count of calls or of events, tokens, cost, a list, the
slowest, which X the most/least, per X, top N by cost) x values (held by the Ledger, spelled
otherwise, a family word, quoted, not held) x times (days, times of day, ranges) x misspellings. Each
part says the words, the filter it reads as, and its condition in plain SQL written here, not taken
from `storage`; `judge` compares an answer with what that SQL says.

`tests/browse/test_question_table.py` runs the table on SQLite and PostgreSQL; `python -m bench
questions` prints right / refused / wrong for this tree and for another checkout's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import product
from typing import Any

from storage.events import Event

NOW = datetime(2026, 11, 25, 15, 42, tzinfo=UTC)  # a Wednesday
TODAY = datetime(2026, 11, 25, tzinfo=UTC)
YESTERDAY = TODAY - timedelta(days=1)
MONDAY = datetime(2026, 11, 23, tzinfo=UTC)
ANSWERS = "('http.response', 'dispatch.upstream.response', 'dispatch.reply', 'dispatch.refused')"

# --- the recorded Ledger -----------------------------------------------------------------------

HOSTS = {"openai": "api.openai.com", "anthropic": "api.anthropic.com", "slack": "api.slack.com"}
HOSTS |= {"github": "api.github.com"}
MODELS = {"4o": "gpt-4o", "mini": "gpt-4o-mini", "sonnet": "claude-sonnet-4-5", "haiku": "claude-3-5-haiku"}


def t(days_ago: int, clock: str) -> datetime:
    hour, minute = clock.split(":")
    return TODAY - timedelta(days=days_ago) + timedelta(hours=int(hour), minutes=int(minute))


# n, at, agent, session, host, model, status, took ms, tokens in, out, cost, streamed, tool
Row = tuple[
    int, datetime, str, str, str, str | None, int | None, int, int, int, float | None, bool, str | None
]
EXCHANGES: list[Row] = [
    (1, t(0, "09:10"), "alpha", "s1", "openai", "4o", 200, 820, 100, 20, 0.0015, True, None),
    (2, t(0, "09:40"), "alpha", "s1", "openai", "mini", 200, 300, 50, 10, 0.0002, False, None),
    (3, t(0, "10:05"), "alpha", "s1", "slack", None, 200, 120, 0, 0, None, False, "slack.post"),
    (4, t(0, "11:30"), "beta", "s2", "anthropic", "sonnet", 200, 2400, 300, 80, 0.0051, True, None),
    (5, t(0, "12:15"), "beta", "s2", "anthropic", "haiku", 429, 90, 0, 0, None, False, None),
    (6, t(0, "13:05"), "delta", "s4", "openai", "4o", 200, 1500, 400, 100, 0.0060, True, None),
    (7, t(0, "13:20"), "delta", "s4", "openai", "4o", 500, 700, 0, 0, None, False, None),
    (8, t(0, "13:45"), "delta", "s4", "github", None, 404, 200, 0, 0, None, False, "github.get_repo"),
    (9, t(0, "14:10"), "delta", "s4", "anthropic", "sonnet", 200, 3100, 800, 150, 0.0090, False, None),
    (10, t(0, "15:05"), "alpha", "s3", "openai", "4o", 200, 640, 120, 30, 0.0018, True, None),
    (11, t(0, "15:30"), "beta", "s2", "slack", None, None, 0, 0, 0, None, False, "slack.post"),
    (12, t(1, "10:00"), "alpha", "s1", "openai", "4o", 200, 900, 200, 40, 0.0030, False, None),
    (13, t(1, "14:30"), "beta", "s2", "anthropic", "haiku", 200, 450, 150, 60, 0.0004, True, None),
    (14, t(1, "16:00"), "delta", "s4", "openai", "mini", 200, 380, 80, 20, 0.0001, False, None),
    (15, t(1, "16:20"), "beta", "s2", "slack", None, 502, 1000, 0, 0, None, False, "slack.post"),
    (16, t(7, "12:00"), "alpha", "s1", "openai", "4o", 200, 1000, 10, 10, 0.0002, False, None),
    (17, t(0, "14:50"), "alpha", "s3", "anthropic", "sonnet", 200, 1800, 500, 90, 0.0070, True, None),
]  # fmt: skip
"""Exchange 11 is a call the egress policy refused (its request and a `policy.refused`, no answer)."""


def recorded_events() -> tuple[Event, ...]:
    """The Ledger as capture leaves it: a request (who, where; no model), then its answer (status,
    model, usage, cost, timing), or the policy's refusal."""
    out: list[Event] = []
    for n, at, agent, session, host, short, status, took, t_in, t_out, cost, streamed, tool in EXCHANGES:
        model = MODELS[short] if short else None
        url = f"https://{HOSTS[host]}/v1/x{n}"
        common: dict[str, Any] = {"action_id": f"x{n}", "collector": "t", "agent": agent, "session": session}
        common |= {"host": HOSTS[host], "url": url, "method": "POST", "tool": tool, "task": f"t{n % 3}"}
        out.append(
            Event(event_id=f"x{n}-req", kind="http.request", direction="out", at=at, seq=2 * n, **common)
        )
        if status is None:
            refusal = Event(
                event_id=f"x{n}-refused",
                kind="policy.refused",
                direction="in",
                at=at + timedelta(milliseconds=1),
                seq=2 * n + 1,
                error="egress.deny: api.slack.com",
                **common,
            )
            out.append(refusal)
            continue
        usage: dict[str, Any] = {"tokens_in": t_in, "tokens_out": t_out} if model and status < 400 else {}
        answer = Event(
            event_id=f"x{n}-res",
            kind="http.response",
            direction="in",
            at=at + timedelta(milliseconds=took),
            seq=2 * n + 1,
            status=status,
            model=model,
            cost_usd=cost,
            first_byte_ms=min(took, 40),
            last_byte_ms=took,
            first_token_ms=min(took, 200) if streamed else None,
            error="upstream reset" if status == 502 else None,
            **usage,
            **common,
        )
        out.append(answer)
    return tuple(out)


# --- the grammar -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """Words, the filter fields they read as, their plain-SQL condition (with bound times), and
    what the reading says they matched."""

    words: str
    fields: dict[str, Any] = field(default_factory=dict)
    sql: str = ""
    times: tuple[datetime | None, datetime | None] = (None, None)
    matched: tuple[str, ...] = ()
    refused: str | None = None
    """A word the question must be refused naming."""


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def timed(words: str, since: datetime | None, until: datetime | None = None) -> Part:
    fields = {k: iso(v) for k, v in (("since", since), ("until", until)) if v is not None}
    return Part(words, fields, times=(since, until))


CLAUDES = ["claude-3-5-haiku", "claude-sonnet-4-5"]
VALUES: list[Part] = [
    Part(""),
    Part("from agent alpha", {"agent": "alpha"}, "agent = 'alpha'"),
    Part("by delta", {"agent": "delta"}, "agent = 'delta'"),
    Part("to slack", {"host": "api.slack.com"}, "lower(host) = 'api.slack.com'"),
    Part("to api.openai.com", {"host": "api.openai.com"}, "lower(host) = 'api.openai.com'"),
    Part("to gpt4o", {"model": "gpt-4o"}, "model = 'gpt-4o'", matched=("gpt4o = model gpt-4o",)),
    Part("with GPT-4o", {"model": "gpt-4o"}, "model = 'gpt-4o'"),
    Part("with gpt 4o mini", refused="4o"),
    Part(
        "to claude",
        {"models": CLAUDES},
        "model IN ('claude-3-5-haiku', 'claude-sonnet-4-5')",
        matched=("claude = model claude-3-5-haiku or claude-sonnet-4-5",),
    ),
    Part("in session s4", {"session": "s4"}, "session = 's4'"),
    Part(
        "to haiku",
        {"model": "claude-3-5-haiku"},
        "model = 'claude-3-5-haiku'",
        matched=("haiku = model claude-3-5-haiku",),
    ),
    Part("with tool slack.post", {"tool": "slack.post"}, "tool = 'slack.post'"),
    Part("that failed", {"status": "errors"}, "((status >= 400 AND status < 1000) OR error IS NOT NULL)"),
    Part("that were streamed", {"streamed": True}, "first_token_ms IS NOT NULL"),
    Part("refused", {"kind": "refused"}, "kind IN ('dispatch.refused', 'policy.refused')"),
    Part("from agent 'omega'", {"agent": "omega"}, "agent = 'omega'"),
    Part('from agent "beta"', {"agent": "beta"}, "agent = 'beta'"),
    Part("with status 429", {"status": "429"}, "status = 429"),
    # values the Ledger does not hold, and misspellings: refused naming the word
    Part("from agent omega", refused="omega"),
    Part("to gpt-5", refused="gpt-5"),
    Part("to api.example.org", refused="api.example.org"),
    Part("in session s9", refused="s9"),
    Part("from alpah", refused="alpah"),
    Part("to claude-opus-4", refused="claude-opus-4"),
]
TIMES: list[Part] = [
    Part(""),
    timed("today", TODAY),
    timed("yesterday", YESTERDAY, TODAY),
    timed("after 3pm", TODAY + timedelta(hours=15)),
    timed("between 1pm and 2pm", TODAY + timedelta(hours=13), TODAY + timedelta(hours=14)),
    timed("yesterday after 3pm", YESTERDAY + timedelta(hours=15), TODAY),
    timed("before 11am", TODAY, TODAY + timedelta(hours=11)),
    timed("from 9am to 10:30", TODAY + timedelta(hours=9), TODAY + timedelta(hours=10, minutes=30)),
    timed("in the last 2 hours", NOW - timedelta(hours=2)),
    timed("this week", MONDAY),
    Part("yesterdy", refused="yesterdy"),
    Part("aftr 3pm", refused="aftr"),
]


@dataclass(frozen=True)
class Shape:
    """What is asked: the words around a value `{v}` and a time `{t}`, and the reading."""

    words: str
    view: str
    group_by: str | None = None
    rank: str | None = None
    ascending: bool = False
    limit: int | None = None
    measure: str | None = None
    sort: str | None = None
    stat: str | None = None
    refused: str | None = None
    metric: str = "duration"
    """What a `stats` view summarizes: `duration` (answers' last byte) or `cost` (priced events)."""


SHAPES: list[Shape] = [
    Shape("how many calls {v} {t}", "totals", measure="exchanges"),
    Shape("how many requests were made {v} {t}", "totals", measure="exchanges"),
    Shape("how many events {v} {t}", "totals", measure="events"),
    Shape("how many tokens {v} {t}", "totals", measure="tokens"),
    Shape("how much did calls {v} cost {t}", "totals", measure="cost"),
    Shape("total spend {v} {t}", "totals", measure="cost"),
    Shape("list calls {v} {t}", "events"),
    Shape("slowest calls {v} {t}", "events", sort="slowest"),
    Shape("top 3 most expensive calls {v} {t}", "events", sort="costliest", limit=3),
    Shape("which agent used the most tokens {v} {t}", "groups", "agent", "tokens"),
    Shape("which session cost the most {v} {t}", "groups", "session", "cost"),
    Shape("calls per model {v} {t}", "groups", "model", "exchanges"),
    Shape("events by host {v} {t}", "groups", "host", "events"),
    Shape("top 2 agents by cost {v} {t}", "groups", "agent", "cost", limit=2),
    Shape("which tool was called the least {v} {t}", "groups", "tool", "exchanges", ascending=True),
    Shape("which model was slowest {v} {t}", "stats", "model", "avg", stat="avg"),
    Shape("the busiest hour {v} {t}", "groups", "hour", "exchanges"),
    Shape("which session was cheapest {v} {t}", "groups", "session", "cost", ascending=True),
    Shape("cost per call {v} {t}", "stats", stat="avg", metric="cost"),
    Shape("average latency {v} {t}", "stats", stat="avg"),
    # misspelled or unknown words in the shape
    Shape("slowst calls {v} {t}", "events", refused="slowst"),
    Shape("how many tokns {v} {t}", "totals", refused="tokns"),
    Shape("which agent used the most cheese {v} {t}", "groups", refused="cheese"),
]


@dataclass(frozen=True)
class Question:
    """One row of the table: the question, and its reading or the word it is refused for."""

    text: str
    shape: Shape
    value: Part
    time: Part

    @property
    def refused(self) -> str | None:
        return self.shape.refused or self.value.refused or self.time.refused

    def reading(self) -> dict[str, Any]:
        """The exact reading expected: filter, view, grouping, rank, limit, total's measure."""
        flt: dict[str, Any] = {**self.value.fields, **self.time.fields}
        if self.shape.sort:
            flt["sort"] = self.shape.sort
        return {
            "filter": flt,
            "view": self.shape.view,
            "group_by": self.shape.group_by,
            "rank": self.shape.rank,
            "ascending": self.shape.ascending,
            "limit": self.shape.limit,
            "measure": self.shape.measure,
            "stat": self.shape.stat,
            "values_matched": list(self.value.matched),
        }

    def where(self, dialect: str) -> tuple[str, dict[str, Any]]:
        """The plain-SQL condition of the question's rows, with its bound times."""
        conds = [c for c in (self.value.sql,) if c]
        params: dict[str, Any] = {}
        since, until = self.time.times
        for name, op, when in (("since", ">=", since), ("until", "<", until)):
            if when is not None:
                conds.append(f"at {op} :{name}")
                naive = when.astimezone(UTC).replace(tzinfo=None)
                params[name] = naive.isoformat(" ", "microseconds") if dialect == "sqlite" else when
        return " AND ".join(conds) or "1 = 1", params


def table(size: int = 300, seed: int = 51) -> list[Question]:
    """`size` questions drawn from every shape x value x time: each shape and each value at least
    once with no time, the rest a seeded sample of the product."""
    every = {
        q.text: q for q in (Question(_say(s, v, t), s, v, t) for s, v, t in product(SHAPES, VALUES, TIMES))
    }
    first = [
        t for t, q in every.items() if q.time.words == "" and (q.value.words == "" or q.shape is SHAPES[0])
    ]
    first += [t for t, q in every.items() if q.value.words == "" and q.shape is SHAPES[0] and t not in first]
    rest = sorted(set(every) - set(first))
    return [every[t] for t in first + random.Random(seed).sample(rest, size - len(first))]


def _say(shape: Shape, value: Part, time: Part) -> str:
    return " ".join(shape.words.format(v=value.words, t=time.words).split())


# --- the plain SQL answers, and the judge ---------------------------------------------------------


def oracle(q: Question, rows: Any, dialect: str) -> dict[str, Any]:
    """What the answer must say, from plain SQL: `rows(sql, params)` runs one statement."""
    cond, params = q.where(dialect)
    s = q.shape
    if s.view == "totals":
        got = rows(
            "SELECT count(DISTINCT action_id) AS x, count(*) AS e,"
            " coalesce(sum(tokens_in), 0) + coalesce(sum(tokens_out), 0) AS tk,"
            f" coalesce(sum(cost_usd), 0) AS c FROM events WHERE {cond}",
            params,
        )[0]
        return {
            "exchanges": got["x"],
            "events": got["e"],
            "tokens": got["tk"],
            "cost": round(float(got["c"]), 9),
        }
    if s.view == "events":
        if s.sort == "slowest":
            cond += f" AND kind IN {ANSWERS}"
            order = "last_byte_ms DESC, at DESC, event_id DESC"
        elif s.sort == "costliest":
            order = "coalesce(cost_usd, -1) DESC, at DESC, event_id DESC"
        else:
            order = "at DESC, event_id DESC"
        listed = rows(f"SELECT event_id FROM events WHERE {cond} ORDER BY {order}", params)
        ids = [r["event_id"] for r in listed]
        return {"matched": len(ids), "ids": ids[: s.limit or 50]}
    if s.view == "stats":
        figure = "last_byte_ms" if s.metric == "duration" else "cost_usd"
        kinds = f" AND kind IN {ANSWERS}" if s.metric == "duration" else ""
        by = (f"{s.group_by} AS k, ", f" GROUP BY {s.group_by}") if s.group_by else ("NULL AS k, ", "")
        got = rows(
            f"SELECT {by[0]}avg({figure}) AS a FROM events"
            f" WHERE {cond}{kinds} AND {figure} IS NOT NULL{by[1]}",
            params,
        )
        return {"avg": {r["k"]: None if r["a"] is None else round(float(r["a"]), 6) for r in got}}
    key = {
        "hour": "substr(at, 1, 13)"
        if dialect == "sqlite"
        else "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24')",
        # an event is its call's: a request (no model of its own) counts under its answer's model
        "model": "coalesce(model, (SELECT max(o.model) FROM events o"
        " WHERE o.action_id = events.action_id AND o.model IS NOT NULL))",
    }
    k = key.get(s.group_by or "", s.group_by)
    per_key = rows(
        f"SELECT {k} AS k, count(*) AS e, coalesce(sum(tokens_in), 0) + coalesce(sum(tokens_out), 0) AS tk,"
        f" coalesce(sum(cost_usd), 0) AS c FROM events WHERE {cond} GROUP BY {k}",
        params,
    )
    pick = "min" if s.group_by == "hour" else "max"
    per_exchange = rows(
        f"SELECT k, count(*) AS x FROM (SELECT action_id, {pick}({k}) AS k FROM events WHERE {cond}"
        " GROUP BY action_id) AS a GROUP BY k",
        params,
    )
    groups: dict[Any, dict[str, Any]] = {}
    hour = (lambda k: _hour(k)) if s.group_by == "hour" else (lambda k: k)
    for r in per_key:
        groups[hour(r["k"])] = {
            "events": r["e"],
            "tokens": r["tk"],
            "cost": round(float(r["c"]), 9),
            "exchanges": 0,
        }
    for r in per_exchange:
        groups.setdefault(hour(r["k"]), {"events": 0, "tokens": 0, "cost": 0.0, "exchanges": 0})[
            "exchanges"
        ] = r["x"]
    total = oracle(Question(q.text, SHAPES[0], q.value, q.time), rows, dialect)
    return {"groups": groups, "total": total}


def _hour(value: Any) -> Any:
    """An hour key as the answer writes it (`YYYY-MM-DDTHH:00Z`), from either form above."""
    if isinstance(value, str) and len(value) == 13:
        return f"{value[:10]}T{value[11:13]}:00Z"
    return value


def judge(q: Question, reply: dict[str, Any] | None, refusal: str | None, expected: dict[str, Any]) -> str:
    """`right`, `refused` or `wrong`, and why when wrong (`wrong: ...`).

    Right: refused naming the word it should be refused for; or read exactly as expected and
    answering what the plain SQL says. Refused: a readable question refused. Wrong: anything else
    (an answer to another question, a figure that differs, an answer where a refusal was due)."""
    if q.refused is not None:
        if refusal is None:
            return "wrong: answered, where it must refuse naming " + repr(q.refused)
        return (
            "right" if repr(q.refused) in refusal or q.refused in refusal else f"wrong: refused for {refusal}"
        )
    if refusal is not None:
        return "refused"
    assert reply is not None
    want = q.reading()
    got = {k: reply.get(k) for k in want}
    got["values_matched"] = reply.get("values_matched", [])
    if got != want:
        diff = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
        return f"wrong: read as {diff}"
    return _figures(q, reply, expected)


def _figures(q: Question, reply: dict[str, Any], expected: dict[str, Any]) -> str:
    s = q.shape
    if s.view == "totals":
        t = reply["totals"]
        got = {
            "exchanges": t.get("exchanges"),
            "events": t["events"],
            "tokens": t["tokens_in"] + t["tokens_out"],
        }
        got["cost"] = round(t["cost_usd"], 9)
        return "right" if got == expected else f"wrong: totals {got} != {expected}"
    if s.view == "events":
        ids = [e["event_id"] for e in reply["events"]]
        if reply["matched"] != expected["matched"] or ids != expected["ids"]:
            return f"wrong: events {ids} of {reply['matched']} != {expected['ids']} of {expected['matched']}"
        return "right"
    if s.view == "stats":
        got = {r["key"]: None if r["avg"] is None else round(r["avg"], 6) for r in reply["stats"]}
        if got != expected["avg"]:
            return f"wrong: averages {got} != {expected['avg']}"
        ranked = [got[k] for k in got]
        if s.rank and ranked != sorted(ranked, reverse=True):
            return f"wrong: not slowest first {ranked}"
        return "right"
    return _groups(q, reply, expected)


def _groups(q: Question, reply: dict[str, Any], expected: dict[str, Any]) -> str:
    s = q.shape
    rows = reply["groups"]
    got = {
        g["key"]: {
            "events": g["events"],
            "tokens": g["tokens_in"] + g["tokens_out"],
            "cost": round(g["cost_usd"], 9),
        }
        | {"exchanges": g.get("exchanges")}
        for g in rows
    }
    want = expected["groups"]
    if s.limit is not None:
        field = "cost" if s.rank == "cost" else s.rank
        order = sorted(want, key=lambda k: (-want[k][field], k is None, k or ""))
        want = {k: want[k] for k in order[: s.limit]}
    if got != want:
        return f"wrong: groups {got} != {want}"
    field = s.rank or "events"
    ranked = [got[g["key"]][field] for g in rows]
    if ranked != sorted(ranked, reverse=not s.ascending):
        return f"wrong: not ranked by {field}: {ranked}"
    total = reply.get("total") or {}
    if (
        total.get("exchanges") != expected["total"]["exchanges"]
        or total.get("events") != expected["total"]["events"]
    ):
        return f"wrong: total {total} != {expected['total']}"
    return "right"
