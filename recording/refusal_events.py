"""A refusal of the egress policy as Ledger events (run by the writer, like every other record).

`policy.refused` joins the refused call's action (event id `ACTION:refused`): `error` is
`RULE: LIMIT`, `status` what the caller was answered (403; none for a connection that was closed),
`tool` the MCP tool when one was refused, the answer's bytes its payload. A refusal with `attempt`
also opens its action with a `connection.attempt` event (`ACTION:attempt`): the CONNECT, raw
connection or DNS question, which has no other event. URL, error and payload are redacted as every
event is. A refused stdio `tools/call` is answered here, so the session's end does not list it as
unanswered.
"""

from __future__ import annotations

from collections.abc import Callable

from recording import events as ev
from recording.mcp import stdio_events as mcp_stdio_events
from recording.records import RefusalRecord
from storage import kinds
from storage.escaped import escape_event
from storage.events import Event


def events(
    proc: ev.Processing, rec: RefusalRecord, collector: str, next_seq: Callable[[], int]
) -> list[Event]:
    """The events of one refusal: the refusal, after the attempt that opens its action if it has none
    (each takes the next number of `next_seq`)."""
    ex = rec.exchange
    url = ex.url
    names: set[str] = set()
    error = f"{rec.rule}: {rec.limit}"
    if proc.redactor is not None:
        url, url_names = proc.redactor.redact_url(url)
        redacted_error, error_names = ev.redact_body(proc, error.encode(), "")
        error = redacted_error.decode("utf-8", "replace")
        names |= set(url_names) | error_names
    body, body_names = ev.redact_body(proc, rec.body, "")
    names |= body_names
    common = {
        "action_id": ex.flow_id,
        "direction": "in" if ex.direction == "in" else "out",
        "at": ev.when(rec.at),
        "collector": collector,
        "method": ex.method,
        "url": url,
        "host": ex.host,
        "tool": rec.tool,
        "agent": ex.identity.agent,
        "session": ex.identity.session,
        "task": ex.identity.task,
        "turn": ex.identity.turn,
        "redacted": tuple(sorted(names)),
    }
    out = []
    if rec.attempt:
        out.append(
            escape_event(
                Event(event_id=kinds.event_id(ex.flow_id, kinds.ATTEMPT_ROLE), kind=kinds.CONNECTION_ATTEMPT,
                      seq=next_seq(), **common)  # type: ignore[arg-type]
            )
        )  # fmt: skip
    out.append(
        escape_event(
            Event(
                event_id=kinds.event_id(ex.flow_id, kinds.REFUSED_ROLE),
                kind=kinds.POLICY_REFUSED,
                seq=next_seq(),
                status=rec.status,
                error=error,
                payload=body or None,
                payload_state="complete" if body else "none",
                **common,  # type: ignore[arg-type]
            )
        )
    )
    if ex.host == mcp_stdio_events.STDIO_HOST and ex.flow_id.startswith("mcp:"):
        mcp_stdio_events.PAIRS.answered(ex.flow_id.split(":", 2)[1], ex.flow_id)
    return out


def add_to(
    add: Callable[[Event, list[int | None]], None],
    frames: list[int | None],
    proc: ev.Processing,
    rec: RefusalRecord,
    collector: str,
    next_seq: Callable[[], int],
) -> None:
    """Hand a refusal's events to the writer's `add`: the refusal, the last, settles the record's frames."""
    found = events(proc, rec, collector, next_seq)
    for event in found:
        add(event, frames if event is found[-1] else [])
