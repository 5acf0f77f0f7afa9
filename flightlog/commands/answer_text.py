"""How `flightlog ledger ask` prints an answer: a figure summarized per key, a list of events led by
the figure it is sorted by, and a note when a list is cut (never 50 rows taken for all of them).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from formats.terminal_text import shown
from tui.figures import spend

ExplainOpt = Annotated[
    bool, typer.Option("--explain", help="Print what the question was read as, and answer nothing.")
]


def print_reply(view: str, reply: dict[str, Any], by: str | None, sort: str | None) -> None:
    """A `stats`, `groups`, `totals` or `events` answer (`storage.questions.answer`) as lines to read."""
    if view == "stats":
        stats_table(by, reply["unit"], reply["stats"])
    elif view == "groups":
        groups_table(by or "", reply["groups"], reply["total"])
    elif view == "totals":
        totals = dict(reply["totals"])
        if "unpriced" in totals:  # one cost line: what is summed, and the calls no price is known for
            totals["cost_usd"] = spend(totals["cost_usd"], totals.pop("unpriced")) or "$0"
        for name, value in totals.items():
            typer.echo(f"{shown(name)}\t{shown(value)}")
    else:
        answer_lines(reply["events"], sort)
        cut_note(len(reply["events"]), reply["matched"])


def groups_table(by: str, groups: list[dict[str, Any]], total: dict[str, Any]) -> None:
    """A row per key in the order ranked, then the total of everything matched: exchanges (one
    request with its answer) and events (the Ledger's rows) side by side, tokens and cost."""
    head = [by, "exchanges", "events", "tokens in", "tokens out", "cost (USD)"]

    def cells(key: str, g: dict[str, Any]) -> list[str]:
        cost = spend(g["cost_usd"], g["unpriced"]) or "$0"
        figures = (g["exchanges"], g["events"], g["tokens_in"], g["tokens_out"])
        return [key, *(f"{n:,}" for n in figures), cost]

    body = [cells(shown(g["key"]) if g["key"] is not None else "(none)", g) for g in groups]
    body.append(cells("total", total))
    widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
    for line in [head, *body]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def stats_table(by: str | None, unit: str, rows: list[dict[str, Any]]) -> None:
    """A row per key: count, then average, percentiles and extremes, in aligned plain columns (never
    wrapped or cut, so a long key stays whole and greps well); the unit is said once, above."""
    figures = ("avg", "p50", "p90", "p95", "p99", "min", "max")
    head = [*([by] if by else []), "count", *figures]
    body = [
        [*([shown(r["key"]) if r["key"] is not None else "(none)"] if by else []), f"{r['count']:,}"]
        + [_figure(r[f], unit) for f in figures]
        for r in rows
    ]
    widths = [max(len(line[c]) for line in [head, *body]) for c in range(len(head))]
    typer.echo(f"figures in {unit}")
    for line in [head, *body]:
        typer.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.6f}" if unit == "USD" else f"{value:,.0f}"


def answer_lines(rows: list[dict[str, Any]], sort: str | None) -> None:
    """One line per event, as `query` prints them, leading with the figure the list is sorted by
    (took=850ms for slowest/fastest, cost for costliest, size for largest)."""
    for e in rows:
        lead = []
        if sort in ("slowest", "fastest"):
            took = e.get("duration_ms")
            lead.append(f"took={'-' if took is None else f'{took:,}ms'}")
        elif sort == "costliest":
            lead.append(f"cost=${e['cost_usd']:.6f}" if e.get("cost_usd") is not None else "cost=-")
        elif sort == "largest":
            lead.append(f"size={e.get('payload_size') or 0:,}B")
        at = str(e["at"]).replace("T", " ")[:19]
        parts = [at, *lead, e["event_id"], e["kind"], e.get("method") or "-", str(e.get("status") or "-")]
        parts.append(e.get("url") or "-")
        parts += [f"{k}={e[k]}" for k in ("agent", "session", "model", "tool") if e.get(k)]
        if sort != "costliest" and e.get("cost_usd") is not None:
            parts.append(f"cost=${e['cost_usd']:.6f}")
        if e.get("error"):
            parts.append(f"error={e['error']!r}")
        typer.echo(shown("  ".join(parts)))


def cut_note(shown_rows: int, matched: int) -> None:
    """Say when a list is cut, so 50 rows are never taken for all of them."""
    if not shown_rows:
        typer.echo("no events match", err=True)
    elif matched > shown_rows:
        typer.echo(f"{shown_rows} of {matched} events shown; --limit N", err=True)
