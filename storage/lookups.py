"""Events looked up by a key (one event, an action, a tool, a task), as plain rows or ids.

`storage.queries` answers the `Filter`'s questions; these are the other reads of the `events` table
that the join (catalog) and readback (addons) need. All SQL over the Ledger's tables lives in
storage, so a column is renamed in one room, and a database error is mapped once (`QueryError`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from storage.filters import QueryError

ROW_COLUMNS: Final = (
    "event_id, action_id, kind, direction, at, method, url, status, tool, session, task, agent, error"
)
"""The metadata a joined row shows (no payload, no head)."""
OLDEST_FIRST: Final = "ORDER BY at, action_id, seq, event_id"


def read_rows(engine: Engine, sql: str, **params: Any) -> list[dict[str, Any]]:
    """The rows one SQL text over the Ledger's tables answers, as plain dicts; a database error is
    `QueryError` in one line (the one reader the lookups here and `storage.mcp_lookups` share)."""
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql), params)]
    except SQLAlchemyError as e:
        raise QueryError(f"cannot read the Ledger's events: {e}".splitlines()[0]) from e


def _in(values: Sequence[str], prefix: str) -> tuple[str, dict[str, Any]]:
    """`(:p0, :p1, ...)` and its parameters: an IN list bound value by value."""
    names = [f"{prefix}{i}" for i in range(len(values))]
    return "(" + ", ".join(":" + n for n in names) + ")", dict(zip(names, values, strict=True))


def event_row(engine: Engine, event_id: str) -> dict[str, Any] | None:
    """One event's metadata and payload address, or None when the Ledger has no such event."""
    sql = f"SELECT {ROW_COLUMNS}, payload_sha256 FROM events WHERE event_id = :e"
    found = read_rows(engine, sql, e=event_id)
    return found[0] if found else None


def action_rows(engine: Engine, action_id: str) -> list[dict[str, Any]]:
    """Every event of an action in order, with its payload address and exact head."""
    sql = (
        f"SELECT {ROW_COLUMNS}, payload_sha256, head FROM events WHERE action_id = :a ORDER BY seq, event_id"
    )
    return read_rows(engine, sql, a=action_id)


def rows_of_tool(engine: Engine, tool: str, limit: int) -> list[dict[str, Any]]:
    """Every event with this tool, oldest first (metadata only)."""
    sql = (
        f"SELECT {ROW_COLUMNS} FROM events WHERE tool = :tool ORDER BY at, action_id, seq, event_id LIMIT :n"
    )
    return read_rows(engine, sql, tool=tool, n=limit)


def rows_of_task(engine: Engine, task: str, limit: int) -> list[dict[str, Any]]:
    """Everything done under a task, oldest first (metadata only)."""
    sql = (
        f"SELECT {ROW_COLUMNS} FROM events WHERE task = :task ORDER BY at, action_id, seq, event_id LIMIT :n"
    )
    return read_rows(engine, sql, task=task, n=limit)


def event_ids_of_actions(
    engine: Engine, actions: Sequence[str], kinds: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """(event_id, action_id) of these actions' events (only of `kinds`, when given), in recorded order."""
    if not actions:
        return []
    among, params = _in(actions, "a")
    sql = f"SELECT event_id, action_id FROM events WHERE action_id IN {among}"
    if kinds:
        of_kinds, kind_params = _in(kinds, "k")
        sql += f" AND kind IN {of_kinds}"
        params.update(kind_params)
    rows = read_rows(engine, sql + " ORDER BY at, seq, event_id", **params)
    return [(r["event_id"], r["action_id"]) for r in rows]
