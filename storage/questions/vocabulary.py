"""The words a plain-words question is read with: fields, fillers, statuses, durations, sorts, models.

Kept apart from the reader (`storage.questions.reading`) so the vocabulary is one list to read and extend.
Every word here is understood; a word that is in none of these lists is not guessed at, and the question that
holds it is refused naming it.
"""

from __future__ import annotations

import re
from typing import Final

from storage.kinds import REFUSED as REFUSED_KINDS_NAME

FIELDS: Final = ("kind", "tool", "session", "task", "turn", "agent", "model", "host", "status", "method")
FIELD_ALIASES: Final = {"url": "url", "path": "url", "direction": "direction", "user": "agent"}
METHODS: Final = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
FILLER: Final = frozenset(
    """a an and any are at did do does done doing for from had has have in is it me my of on our
    please show list give the there to was were with we us i you they them those these that what which
    how been be ever happen happened anything something all every see saw want wants need needs get gets
    got go goes went made make makes making sent send sends use uses used call called seen hit took take
    takes taking run runs ran try tried return returns returned say says said during everything""".split()
)
"""The listed words that carry no meaning ("show me the ... that were made"): read, and change
nothing. Every other word is read by a construct (a field, a value, a time, a measure, a grouping,
an order, a limit) or the question is refused naming it."""
UNIT_WORDS: Final = {
    "calls": "exchanges", "call": "exchanges", "requests": "exchanges", "request": "exchanges",
    "exchanges": "exchanges", "exchange": "exchanges", "responses": "exchanges",
    "response": "exchanges", "answers": "exchanges", "traffic": "exchanges",
    "events": "events", "event": "events", "rows": "events",
}  # fmt: skip
"""What a count counts: an exchange is one request with everything that answered it (one action);
an event is one row of the Ledger (a request and its answer are two)."""
MEASURE_WORDS: Final = {
    "tokens": "tokens", "token": "tokens", "usage": "tokens",
    "cost": "cost", "costs": "cost", "spend": "cost", "spent": "cost", "spending": "cost",
    "price": "cost", "money": "cost", "dollars": "cost", "usd": "cost",
    "count": "count", "counts": "count", "number": "count", "amount": "count",
}  # fmt: skip
"""The figure a total, a grouping or a superlative is of ("count" is the count unit named or not)."""
MOST: Final = {
    "most": True, "highest": True, "greatest": True, "busiest": True, "more": True,
    "least": False, "fewest": False, "lowest": False, "quietest": False, "less": False,
}  # fmt: skip
"""Superlatives of a grouping ("which agent used the most tokens"): True ranks largest first."""
ERRORS: Final = frozenset(
    {"errors", "error", "errored", "failed", "failures", "failure", "failing", "fail", "fails"}
)
OK: Final = frozenset({"ok", "successful", "succeeded", "success"})
STREAMED: Final = frozenset({"streamed", "streaming", "stream", "streams"})
"""Streamed model answers (the ones a first token was recorded for)."""
REFUSED: Final = frozenset({"refused", "refusals", "refusal", "denied", "blocked", "rejected"})
REFUSED_KIND: Final = REFUSED_KINDS_NAME
"""The filter kind naming every refusal: the door's (`dispatch.refused`) and the egress policy's
(`policy.refused`)."""
STATUS_WORDS: Final = {
    "unauthorized": "401",
    "unauthorised": "401",
    "forbidden": "403",
    "throttled": "429",
    "redirects": "3xx",
    "redirected": "3xx",
}
STATUS_PHRASES: Final = {
    ("server", "errors"): "5xx",
    ("server", "error"): "5xx",
    ("client", "errors"): "4xx",
    ("client", "error"): "4xx",
    ("not", "found"): "404",
    ("rate", "limited"): "429",
}
SORT_WORDS: Final = {
    "slowest": "slowest",
    "fastest": "fastest",
    "quickest": "fastest",
    "costliest": "costliest",
    "priciest": "costliest",
    "expensive": "costliest",
    "largest": "largest",
    "biggest": "largest",
    "oldest": "oldest",
    "earliest": "oldest",
    "newest": "newest",
    "latest": "newest",
    "recent": "newest",
}
TOTAL_WORDS: Final = frozenset({"total", "totals", "sum", "altogether"})
STATS: Final = {
    "average": "avg", "avg": "avg", "mean": "avg", "median": "p50", "typical": "p50",
    "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "max": "max", "maximum": "max",
    "worst": "max", "min": "min", "minimum": "min",
}  # fmt: skip
"""What a figure's summary is: an average, a percentile, the largest or smallest."""
PERCENTILE: Final = re.compile(r"^(50|90|95|99)(?:th)?$")
"""'95th percentile', '99 percentile'."""
METRICS: Final = {
    "latency": "duration", "latencies": "duration", "duration": "duration", "durations": "duration",
    "cost": "cost", "costs": "cost", "spend": "cost", "spent": "cost", "price": "cost",
    "tokens": "tokens", "time": "duration", "times": "duration", "usage": "tokens",
    "spending": "cost", "money": "cost", "dollars": "cost", "usd": "cost", "token": "tokens",
}  # fmt: skip
"""The figure a summary is of: how long answers took (ms), what calls cost (USD), tokens in + out."""
GROUP_NOUNS: Final = {
    "tools": "tool",
    "tool": "tool",
    "session": "session",
    "agent": "agent",
    "kind": "kind",
    "task": "task",
    "turn": "turn",
    "status": "status",
    "rule": "rule",
    "limit": "rule",
    "models": "model",
    "model": "model",
    "hosts": "host",
    "host": "host",
    "sessions": "session",
    "agents": "agent",
    "kinds": "kind",
    "tasks": "task",
    "turns": "turn",
    "statuses": "status",
    "rules": "rule",
    "limits": "rule",
    "hours": "hour",
    "hour": "hour",
}
"""What "which tools" and "tools used" count by."""
USED: Final = frozenset({"used", "called", "seen", "hit", "involved"})
AT_LEAST: Final = frozenset({"over", "above", "slower", "longer", "exceeding"})
AT_MOST: Final = frozenset({"under", "below", "faster", "quicker", "shorter", "within"})
_UNIT_MS: Final = {
    "ms": 1, "msec": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
}  # fmt: skip
_FUSED = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|sec|secs|m|min|mins)$")
UNITS: Final = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
NUMBERS: Final = {
    w: i
    for i, w in enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    )
}
MODEL: Final = re.compile(
    r"^(?:gpt-?\d[\w.-]*|chatgpt-[\w.-]+|o[1-9](?:-[\w.-]+)?|claude-[\w.-]+|gemini-[\w.-]+|llama[\w.-]*"
    r"|mistral[\w.-]*|mixtral[\w.-]*|text-embedding-[\w.-]+|deepseek[\w.-]*|qwen[\w.-]*|grok-[\w.-]+"
    r"|command-[\w.-]+|sonar[\w.-]*)$",
    re.IGNORECASE,
)
"""A bare model name ("how much did gpt-4o cost"): the families the common model APIs serve."""
CLOCK: Final = re.compile(r"^(\d{1,2})(?::(\d{2}))?(am|pm)?$")
"""A time of day: 3pm, 3:30pm, 15:00 (a bare number is one only before am/pm: '3 pm')."""
FAMILIES: Final = {
    "claude": ("claude",), "anthropic": ("claude",), "gpt": ("gpt", "chatgpt"),
    "openai": ("gpt", "chatgpt", "o1", "o3", "o4", "textembedding"), "gemini": ("gemini",),
    "google": ("gemini",), "llama": ("llama",), "mistral": ("mistral", "mixtral"),
    "deepseek": ("deepseek",), "qwen": ("qwen",), "grok": ("grok",),
}  # fmt: skip
"""Provider and family words: the models whose normalised name begins so ("claude" = the Anthropic
models the Ledger holds)."""
DATE: Final = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2})?)?z?$")
SQL: Final = re.compile(
    r"(;|--|\bselect\b.*\bfrom\b|\bdrop\s+table\b|\binsert\s+into\b|\bunion\s+select\b)",
    re.IGNORECASE,
)
FUNCTION_WORDS: Final = (
    FILLER
    | ERRORS
    | OK
    | REFUSED
    | TOTAL_WORDS
    | frozenset(UNIT_WORDS)
    | frozenset(MEASURE_WORDS)
    | frozenset(MOST)
    | frozenset(SORT_WORDS)
    | frozenset(STATS)
    | frozenset(METRICS)
    | frozenset(
        """today yesterday this last past since after until before first hourly grouped slower faster
        longer shorter over under above below than least by per top between streamed cheapest""".split()
    )
)
"""Words that are never a field's value: after `agent`, `model`, ... they leave the field without one
("what did the agent do": the agent, not an agent named "do")."""
RESOLVED: Final = ("agent", "tool", "model", "host", "session", "task")
"""The fields a bare word may name when the Ledger holds it as a value ("tokens alpha used")."""
CHECKED: Final = (*RESOLVED, "turn", "kind")
"""The fields whose value, given after the field's name, must be one the Ledger holds."""
HINT: Final = (
    "ask with fields (agent alpha, model gpt-4o, tool T, host api.example.com, status 404), times "
    "(today, last hour), by X, slowest, slower than 1s"
)


_TOKEN = re.compile(
    r'"([^"]*)"'  # "a phrase"
    r"|(?<!\S)['\u2018\u201c]([^'\u2019\u201d]*)['\u2019\u201d](?=[\s?!,;.]|$)"  # 'a phrase', curly quotes
    r"|(\S+)"
)


def quoted_tokens(text: str) -> list[tuple[str, bool]]:
    """Words, each with whether it was quoted: phrases in double, single or curly quotes kept whole
    (an apostrophe inside a word, beta's, is no quote), trailing punctuation dropped."""
    out = []
    for double, single, word in _TOKEN.findall(text):
        quoted = double or single
        token = quoted if quoted else re.sub(r"['\u2019]s$", "", word.rstrip("?!,;"))  # beta's, what's
        if not quoted and token.endswith(".") and "." not in token[:-1]:
            token = token[:-1]
        if token:
            out.append((token, bool(quoted)))
    return out


def tokens(text: str) -> list[str]:
    """Words, with quoted phrases kept whole and trailing punctuation dropped."""
    return [token for token, _ in quoted_tokens(text)]


def duration(words: list[str]) -> tuple[int, int] | None:
    """A duration at the start of `words` ("1s", "500 ms", "two seconds", "a minute"): (ms, words used)."""
    if not words:
        return None
    first = words[0].lower()
    fused = _FUSED.match(first)
    if fused:
        return round(float(fused.group(1)) * _UNIT_MS[fused.group(2)]), 1
    if len(words) < 2:
        return None
    unit = _UNIT_MS.get(words[1].lower())
    if unit is None or words[1].lower() == "m":
        return None
    if re.fullmatch(r"\d+(?:\.\d+)?", first):
        return round(float(first) * unit), 2
    if first in NUMBERS or first in ("a", "an"):
        return NUMBERS.get(first, 1) * unit, 2
    return None
