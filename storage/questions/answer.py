"""A question's answer, the same on every door (route, command, screen): what it was read as, then
its view: a page of events (each answer with the milliseconds it took, and how many matched in all),
one sum (with its exchanges and events), counted rows in both units ranked as asked with their total
(`storage.questions.counted`), or a figure summarized (average, percentiles), ranked when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.event_reads import event_json, select_events, totals
from storage.filters import Cursor, Filter
from storage.questions.counted import ranked, total
from storage.questions.reading import Question
from storage.reader import Reader
from storage.stats import UNITS, stats
from storage.tally import durations

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


def page(
    source: Engine | Reader, flt: Filter, limit: int, before: Cursor | None = None, *, matched: bool = False
) -> dict[str, Any]:
    """A page of events newest first (or in the filter's order), each answer with `duration_ms`;
    `next` is the cursor of the page after (none for an ordered top N). With `matched`, also how many
    events the filter matches in all, so a cut list can say so ("50 of 312 shown")."""
    events = select_events(source, flt, limit=limit, before=before)
    took = durations(source, events)
    rows = []
    for e in events:
        row = event_json(e)
        if e.event_id in took:
            row["duration_ms"] = took[e.event_id]
        rows.append(row)
    pages_on = (flt.sort or "newest") == "newest" and len(rows) == limit
    nxt = [rows[-1]["at"], rows[-1]["event_id"]] if pages_on else None
    out: dict[str, Any] = {"filter": flt.to_json(), "events": rows, "next": nxt}
    if matched:
        out["matched"] = len(rows) if len(rows) < limit and before is None else totals(source, flt)["events"]
    return out


def answer(source: Engine | Reader, question: Question, limit: int = 100) -> dict[str, Any]:
    """The question's JSON, then `groups`, `totals` or a page of `events` (at most its "top N")."""
    out = question.to_json()
    if question.view == "groups":
        assert question.group_by is not None
        out.update(
            ranked(
                source, question.filter, question.group_by, question.rank, question.ascending, question.limit
            )
        )
    elif question.view == "stats":
        assert question.metric is not None
        rows = [r.to_json() for r in stats(source, question.filter, question.metric, question.group_by)]
        rank = question.rank
        if rank is not None:
            sign = 1 if question.ascending else -1
            rows.sort(key=lambda r: (r[rank] is None, sign * (r[rank] or 0), r["key"] or ""))
        out["stats"] = rows[: question.limit] if question.limit is not None else rows
        out["unit"] = UNITS[question.metric]
    elif question.view == "totals":
        out["totals"] = total(source, question.filter)
    else:
        out.update(page(source, question.filter, min(limit, question.limit or limit), matched=True))
    return out
