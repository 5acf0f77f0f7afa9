"""The time phrases of a plain-words question: today, yesterday, this/last hour|week|month, (the)
last|past N minutes|hours|days|weeks, N minutes|hours|days ago, since|after|until|before DATE, on
DATE, a bare DATE, a weekday (the most recent one, today included); and times of day, read like
dates: after|since|before|until 3pm, between 1pm and 2pm, from 9am to 11:30 (of the day the other
words name, else today; UTC).

A mixin of the question reader (`storage.questions.reading`): it reads words off the reader's cursor and sets
the filter's `since` and `until` (inclusive, exclusive; UTC; whole days for a date). `time_bound` reads every
command's `--since`/`--until` with the same words, so `--since yesterday` means what "since yesterday" means
in a question, wherever it is typed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from storage.filters import QueryError, parse_time
from storage.questions.vocabulary import CLOCK, DATE, NUMBERS, UNITS, tokens


class QuestionError(QueryError):
    """A question that cannot be read as one filter; the message says why."""


def day(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def weekday(now: datetime, name: str) -> tuple[datetime, datetime]:
    """The most recent day named `name` (today, when today is so named), as a whole UTC day."""
    back = (now.weekday() - WEEKDAYS.index(name.lower())) % 7
    start = day(now) - timedelta(days=back)
    return start, start + timedelta(days=1)


def parse_date(word: str) -> tuple[datetime, datetime]:
    """A date (the whole UTC day) or a datetime (that instant to the next minute) as [start, end)."""
    try:
        when = datetime.fromisoformat(word.upper().replace("Z", "+00:00"))
    except ValueError as e:
        raise QuestionError(f"{word!r} is not a date (YYYY-MM-DD or YYYY-MM-DDTHH:MM)") from e
    when = when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)
    if len(word) == 10:
        return when, when + timedelta(days=1)
    return when, when + timedelta(minutes=1)


def clock(words: list[str]) -> tuple[int, int] | None:
    """A time of day at the start of `words` ("3pm", "3 pm", "3:30pm", "15:00", "noon",
    "midnight"): (minutes after midnight, words used); None when the words are no time of day."""
    if not words:
        return None
    first = words[0].lower()
    if first in ("noon", "midday"):
        return 12 * 60, 1
    if first == "midnight":
        return 0, 1
    used = 1
    if first.isdigit() and len(words) > 1 and words[1].lower() in ("am", "pm"):
        first, used = first + words[1].lower(), 2
    got = CLOCK.match(first)
    if got is None or (got.group(2) is None and got.group(3) is None):
        return None  # a bare number is a count, not a time
    hour, minute, half = int(got.group(1)), int(got.group(2) or 0), got.group(3)
    if half is not None:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if half == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    return hour * 60 + minute, used


def clock_range(
    day_since: datetime | None,
    day_until: datetime | None,
    now: datetime,
    since: int | None,
    until: int | None,
) -> tuple[datetime | None, datetime | None]:
    """Times of day placed on the day the other time words name (a whole day: today, yesterday, a
    date, a weekday), else on today; a range that is not one day cannot take one."""
    today = day(now)
    if day_since is None and day_until is None:
        base, end = today, None
    elif (
        day_since is not None
        and day(day_since) == day_since
        and day_until in (None, day_since + timedelta(days=1))
    ):
        base, end = day_since, day_until
    else:
        raise QuestionError("a time of day needs one day (today, yesterday, a date or a weekday)")
    start = base + timedelta(minutes=since) if since is not None else base
    stop = base + timedelta(minutes=until) if until is not None else end
    return start, stop


class TimeWords:
    """Reads time phrases; the reader provides `now`, `i`, `peek`, `take`, `set` and `value_for`."""

    now: datetime
    i: int
    words: list[str]
    clock: dict[str, int]
    """Times of day read (`since`/`until`: minutes after midnight), placed on a day at the end."""

    def clock_at(self, name: str, said: str) -> None:
        got = clock(self.words[self.i :])
        if got is None:
            raise QuestionError(f"'{said}' needs a time of day (3pm, 15:00), not {self.peek()!r}")
        if name in self.clock and self.clock[name] != got[0]:
            raise QuestionError(f"one question takes one {name}: two times of day")
        self.clock[name] = got[0]
        self.i += got[1]

    def time_of_day(self, low: str) -> bool:
        """'after 3pm', 'before 14:30', 'between 1pm and 2pm', 'from 9am to 11am'."""
        if low not in ("since", "after", "until", "before", "between", "from") or not hasattr(self, "clock"):
            return False
        if clock(self.words[self.i :]) is None:
            return False
        if low in ("since", "after", "until", "before"):
            self.clock_at("since" if low in ("since", "after") else "until", low)
            return True
        self.clock_at("since", low)
        joint = (self.peek() or "").lower()
        ends = ("and",) if low == "between" else ("to", "until", "till")
        if joint not in ends:
            raise QuestionError(
                f"'{low} ...' needs '{ends[0]}' and a second time of day, not {self.peek()!r}"
            )
        self.i += 1
        self.clock_at("until", joint)
        return True

    def peek(self, ahead: int = 0) -> str | None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def take(self) -> str:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def set(self, name: str, value: Any) -> None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def value_for(self, name: str) -> str:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def set_range(self, since: datetime | None, until: datetime | None) -> None:
        if since is not None:
            self.set("since", since)
        if until is not None:
            self.set("until", until)

    def time(self, low: str) -> bool:
        today = day(self.now)
        if self.time_of_day(low):
            return True
        if low == "today":
            self.set_range(today, None)
        elif low == "yesterday":
            self.set_range(today - timedelta(days=1), today)
        elif low in ("this", "last", "past") and self.period(low):
            return True
        elif low in ("since", "after", "until", "before"):
            phrase = self.phrase()
            if phrase is None:
                self.bound(low, self.value_for(low))
            else:
                start, end = phrase
                self.set("since" if low in ("since", "after") else "until", end if low == "after" else start)
        elif low == "on" and DATE.match((self.peek() or "").lower()):
            self.set_range(*parse_date(self.take()))
        elif DATE.match(low):
            self.set_range(*parse_date(low))
        elif low in WEEKDAYS:  # "on tuesday", "tuesday's errors" (never "mondays": every one)
            self.set_range(*weekday(self.now, low))
        else:
            return self.ago(low)
        return True

    def phrase(self) -> tuple[datetime, datetime] | None:
        """A time phrase after since/until ('since last week', 'before 2 hours ago'): its [start,
        end), the end `now` when open; None when the next words are no phrase (a date, today)."""
        nxt = (self.peek() or "").lower()
        if nxt not in ("this", "last", "past") and not (nxt.isdigit() or nxt in NUMBERS):
            return None
        sub = _Bound(self.words[self.i :], self.now)
        if not sub.time(sub.take().lower()) or "since" not in sub.range:
            return None
        self.i += sub.i
        return sub.range["since"], sub.range.get("until", self.now)

    def ago(self, low: str) -> bool:
        """'2 hours ago', 'three days ago': from then on."""
        unit = (self.peek() or "").lower().removesuffix("s")
        if (
            not (low.isdigit() or low in NUMBERS)
            or unit not in UNITS
            or (self.peek(1) or "").lower() != "ago"
        ):
            return False
        self.i += 2
        count = int(low) if low.isdigit() else NUMBERS[low]
        self.set_range(self.now - timedelta(seconds=count * UNITS[unit]), None)
        return True

    def period(self, low: str) -> bool:
        """'this week', 'last month', 'last hour', 'last 3 days', 'past two hours'."""
        nxt = (self.peek() or "").lower()
        if nxt.isdigit() or nxt in NUMBERS:
            count = int(nxt) if nxt.isdigit() else NUMBERS[nxt]
            unit = (self.peek(1) or "").lower().removesuffix("s")
            if unit not in UNITS:
                raise QuestionError(
                    f"'{low} {nxt}' needs a unit: minutes, hours, days or weeks, not {self.peek(1)!r}"
                )
            if count < 1:
                raise QuestionError(f"'{low} {nxt} {unit}s' is an empty time range")
            self.i += 2
            self.set_range(self.now - timedelta(seconds=count * UNITS[unit]), None)
            return True
        unit = nxt.removesuffix("s") if nxt.endswith("s") and low != "this" else nxt
        if unit not in ("minute", "hour", "day", "week", "month"):
            return False
        self.i += 1
        today = day(self.now)
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
        today = day(self.now)
        if low == "today":
            start, end = today, today + timedelta(days=1)
        elif low == "yesterday":
            start, end = today - timedelta(days=1), today
        elif DATE.match(low):
            start, end = parse_date(low)
        elif low in WEEKDAYS:
            start, end = weekday(self.now, low)
        else:
            raise QuestionError(
                f"'{word} {value}': give a date (YYYY-MM-DD), a time of day (3pm), a weekday, 'today' or"
                f" 'yesterday', not {value!r}"
            )
        if word in ("since", "after"):
            self.set("since", start if word == "since" else end)
        else:
            self.set("until", start)


class _Bound(TimeWords):
    """Reads one option's value as time words; what it sets is the range those words name."""

    def __init__(self, words: list[str], now: datetime) -> None:
        self.now = now
        self.words = words
        self.i = 0
        self.range: dict[str, datetime] = {}

    def peek(self, ahead: int = 0) -> str | None:
        j = self.i + ahead
        return self.words[j] if j < len(self.words) else None

    def take(self) -> str:
        self.i += 1
        return self.words[self.i - 1]

    def set(self, name: str, value: Any) -> None:
        self.range[name] = value

    def value_for(self, name: str) -> str:
        if self.peek() is None:
            raise QuestionError(f"{name!r} needs a date, 'today' or 'yesterday'")
        return self.take()


TIME_HELP = (
    "ISO 8601 (UTC) or words: today, yesterday, monday, this week, last 3 days, 2 hours ago, 3pm, 2026-11-01"
)


def time_bound(option: str, value: str, now: datetime | None = None) -> datetime:
    """An option's time (`--since`, `--until`): an ISO 8601 time, or time words as a question reads
    them; words naming a range (yesterday, last week) give its start, for either option; a time of
    day (3pm, 15:30) is today's."""
    try:
        return parse_time(value)
    except QueryError:
        pass
    clock_now = (now or datetime.now(UTC)).astimezone(UTC)
    words = tokens(value)
    of_day = clock(words)
    if of_day is not None and of_day[1] == len(words):  # `--since 3pm`: today at 3pm, as a question reads it
        return day(clock_now) + timedelta(minutes=of_day[0])
    reader = _Bound(words, clock_now)
    while reader.peek() is not None:
        if not reader.time(reader.take().lower()):
            break
    else:
        start = reader.range.get("since") or reader.range.get("until")
        if start is not None:
            return start
    raise QuestionError(f"{option} {value!r}: not a time; {TIME_HELP}")
