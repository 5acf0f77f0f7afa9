"""What a question to the Ledger is about: the frozen `Filter`, its wire form, and a counted row.

Every screen, route and command names the events it means with one `Filter`, so a question typed in plain
words (`storage.questions.reading`), a filter POSTed as JSON and the TUI's filter bar all mean the same rows.
The SQL that reads them is `storage.queries`; this module only says what is asked, and refuses what cannot be
(an unknown field, a wrong type, an empty range), never ignoring it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal

from storage.errors import StorageError

GroupBy = Literal[
    "hour", "session", "turn", "kind", "agent", "model", "tool", "task", "host", "status", "rule"
]
GROUP_BYS: Final[tuple[str, ...]] = (
    "hour", "session", "turn", "kind", "agent", "model", "tool", "task", "host", "status", "rule",
)  # fmt: skip
"""`rule` is not a column: a refusal's rule or limit, its `error` up to the first colon (`RULE: why`)."""
SORTS: Final[tuple[str, ...]] = ("newest", "oldest", "slowest", "fastest", "costliest", "largest")
"""How a page of events is ordered; only `newest` pages on with a cursor (the others are a top N)."""
STATUS_CLASSES: Final[tuple[str, ...]] = ("errors", "ok", "1xx", "2xx", "3xx", "4xx", "5xx")
"""`errors` is an HTTP status >= 400 or a recorded error; `ok` is the rest that has a status."""

_STATUS = re.compile(r"^(?:[1-5]xx|[1-5]\d\d|errors|ok)$")
Cursor = tuple[datetime, str]


class QueryError(StorageError):
    """A filter or a counted view that cannot be asked (unknown field, bad value)."""


@dataclass(frozen=True, slots=True)
class Filter:
    """Which events a question is about; every field left `None` (or empty) matches everything.

    `kind` `refused` names every kind that records a refusal (`storage.kinds.REFUSED_KINDS`).
    `status` is a code ("404"), a class ("4xx") or a name ("errors": status >= 400 or an error was
    recorded; "ok": a status below 400 and no error). `url` words must all appear in the URL
    (case-insensitive). `since` is inclusive and `until` exclusive, both UTC.
    """

    kind: str | None = None
    direction: str | None = None
    tool: str | None = None
    session: str | None = None
    task: str | None = None
    turn: str | None = None
    agent: str | None = None
    model: str | None = None
    models: tuple[str, ...] = ()
    """Any of these models (a family or provider word: "claude" = every Anthropic model held)."""
    status: str | None = None
    host: str | None = None
    method: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    url: tuple[str, ...] = ()
    min_duration_ms: int | None = None
    max_duration_ms: int | None = None
    sort: str | None = None
    streamed: bool | None = None
    """Streamed model answers only (True: a first token was recorded), or only the rest (False)."""

    def __post_init__(self) -> None:
        if self.sort is not None and self.sort not in SORTS:
            raise QueryError(f"sort is one of {', '.join(SORTS)}, not {self.sort!r}")
        for name in ("min_duration_ms", "max_duration_ms"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise QueryError(f"{name} is a whole number of milliseconds, not {value!r}")
        low, high = self.min_duration_ms, self.max_duration_ms
        if low is not None and high is not None and low >= high:
            raise QueryError(f"min_duration_ms ({low}) is not below max_duration_ms ({high})")
        if self.direction is not None and self.direction not in ("in", "out"):
            raise QueryError(f"direction is 'in' or 'out', not {self.direction!r}")
        if self.status is not None and not _STATUS.match(self.status):
            raise QueryError(f"status is a code (404), a class (4xx), 'errors' or 'ok', not {self.status!r}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=UTC))
        if self.since and self.until and self.since >= self.until:
            raise QueryError(f"since ({iso(self.since)}) is not before until ({iso(self.until)})")

    @property
    def timed(self) -> bool:
        """Whether this filter reads durations: then it matches answers only (see `ANSWER_KINDS`)."""
        return (
            self.min_duration_ms is not None
            or self.max_duration_ms is not None
            or self.sort in ("slowest", "fastest")
        )

    def is_empty(self) -> bool:
        """True when the filter matches every event."""
        return not self.to_json()

    def to_json(self) -> dict[str, Any]:
        """The set fields only, datetimes as ISO 8601 UTC: the stable wire form of a filter."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[f.name] = (
                iso(value)
                if isinstance(value, datetime)
                else list(value)
                if f.name in ("url", "models")
                else value
            )
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Filter:
        """Read the wire form back; unknown fields and wrong types are refused, never ignored."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise QueryError(f"unknown filter field {unknown[0]!r}; known: {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is None:
                continue
            if name in ("since", "until"):
                values[name] = parse_time(value)
            elif name in ("url", "models"):
                words = [value] if isinstance(value, str) else value
                if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                    raise QueryError(f"{name} is a word or a list of words")
                values[name] = tuple(w for w in words if w)
            elif name == "streamed":
                if not isinstance(value, bool):
                    raise QueryError(f"filter field 'streamed' is true or false, not {value!r}")
                values[name] = value
            elif name == "status" and isinstance(value, int):
                values[name] = str(value)
            elif name in ("min_duration_ms", "max_duration_ms"):
                if isinstance(value, str) and value.isdigit():
                    value = int(value)
                if isinstance(value, bool) or not isinstance(value, int):
                    raise QueryError(f"filter field {name!r} takes whole milliseconds, not {value!r}")
                values[name] = value
            elif isinstance(value, str):
                values[name] = value
            else:
                raise QueryError(f"filter field {name!r} takes a string, not {type(value).__name__}")
        return cls(**values)

    def describe(self) -> str:
        """One line a person reads back: what this filter will match."""
        parts = [f"{k}={' '.join(v) if isinstance(v, list) else v}" for k, v in self.to_json().items()]
        return " ".join(parts) if parts else "every event"

    def merged(self, **changes: Any) -> Filter:
        """A copy with some fields changed (a screen narrowing a filter)."""
        return replace(self, **changes)


@dataclass(frozen=True, slots=True)
class Group:
    """One row of a counted view: its key and the figures summed from the events under it."""

    key: str | None
    events: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    unpriced: int = 0
    """Model calls with tokens but no cost (a model no price is known for): `cost_usd` leaves them
    out, so it is a floor, never a total that counted them as $0."""

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "events": self.events,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": round(self.cost_usd, 9),
            "unpriced": self.unpriced,
        }


def parse_time(value: str) -> datetime:
    """An ISO 8601 date or datetime; a value without a zone is UTC."""
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (TypeError, ValueError) as e:
        raise QueryError(f"not an ISO 8601 time: {value!r}") from e
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")
