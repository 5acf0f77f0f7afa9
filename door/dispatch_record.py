"""The Ledger events the dispatch door writes for its own exchanges, in one place.

One dispatch is one action (`action_id` = `d` + 32 hex digits), its events ids `ACTION:ROLE`:

| kind                         | dir | what                                                           |
|------------------------------|-----|----------------------------------------------------------------|
| `dispatch.call`              | in  | the canonical call as it came to the door (head + JSON body)   |
| `dispatch.dry_run`           | in  | the same, for a dry run (nothing is sent; never a use)         |
| `dispatch.upstream.request`  | out | the upstream request, exact bytes with secrets as `[NAME]`     |
| `dispatch.upstream.response` | in  | the upstream answer (or its failure in `error`)                |
| `dispatch.reply`             | out | the door's answer `{ok, result, action_id}`                    |
| `dispatch.refused`           | out | the door's answer to a refused call; `error` = `LIMIT: why`    |

Every event of the action carries `tool` and, for a token bound to a task, that `task`, and its own
time: the call when it came to the door (before any check was made), each upstream request when it
left and its answer when it was in, the reply when it was made. So a door call has a duration
(reply minus call), and so has each upstream exchange. Times are the action's start (`Filing.at`,
the clock the limits were checked with) plus the monotonic time since, so they never run backwards
within an action.

The token a call was made with and the version of the row it ran are kept on its call event's
`url`, the canonical door locator `flightlog:dispatch/DOOR/TOOL?token=IDENTIFIER&row=HASH` (either
left out when unknown). The token itself is a credential and is never recorded; its identifier
names it. Its uses are rows of `token_uses` (`storage.token_uses`); `trace` reads the row's version
by its hash (`catalog.join`), so a call is compared with the contract it ran under.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from catalog.wire import mcp_requests, wire
from door.upstream import Exchange
from recording import action_ids
from recording.redaction.redact import Redactor
from storage import kinds
from storage.events import Event

CALL: Final = kinds.DISPATCH_CALL
CALL_ROLE: Final = kinds.DISPATCH_CALL_ROLE
DRY_RUN: Final = kinds.DISPATCH_DRY_RUN
UPSTREAM_REQUEST: Final = kinds.DISPATCH_UPSTREAM_REQUEST
UPSTREAM_RESPONSE: Final = kinds.DISPATCH_UPSTREAM_RESPONSE
REPLY: Final = kinds.DISPATCH_REPLY
REFUSED: Final = kinds.DISPATCH_REFUSED
COLLECTOR: Final = "dispatch"


def door_collector(home: Path) -> str:
    """The collector the door's batches are chained under from one FLIGHTLOG_HOME: `dispatch@` and a
    digest of the home, so doors of several machines writing one Ledger each chain under their own
    key (`storage.chain.keys`); the events themselves say `dispatch`."""
    return f"{COLLECTOR}@{hashlib.sha256(str(home.expanduser().resolve()).encode()).hexdigest()[:8]}"


def new_action_id() -> str:
    """A fresh action id for one dispatch ("d" and a time-ordered id: `action_ids.new_action_id`)."""
    return action_ids.new_action_id("d")


def door_url(door: str, tool: str, token_id: str | None, row: str | None = None) -> str:
    """The call event's canonical locator (see the module docstring)."""
    query = "&".join(f"{k}={v}" for k, v in (("token", token_id), ("row", row)) if v)
    return f"flightlog:dispatch/{door}/{tool}" + (f"?{query}" if query else "")


def position() -> int:
    """A monotonic position for the door's batches (nanoseconds: increases across restarts too)."""
    return time.time_ns()


@dataclass(frozen=True, slots=True)
class Filing:
    """What every event of one dispatch shares: its action, tool and who it is filed under."""

    action_id: str
    tool: str | None
    at: datetime
    task: str | None = None
    session: str | None = None
    turn: str | None = None
    agent: str | None = None
    started: float = field(default_factory=time.monotonic)
    """`time.monotonic()` at `at`: the origin every later event's time is measured from."""

    def time_of(self, moment: float | None = None) -> datetime:
        """The wall time of a monotonic `moment` of this action (None: now)."""
        elapsed = (time.monotonic() if moment is None else moment) - self.started
        return self.at + timedelta(seconds=max(0.0, elapsed))

    def refiled(self, task: str | None, agent: str | None) -> Filing:
        """The same action (its id, start and clock) filed under a token's task and agent."""
        return Filing(self.action_id, self.tool, self.at, task, self.session, self.turn, agent, self.started)

    def event(
        self, role: str, kind: str, direction: str, seq: int, *, moment: float | None = None, **fields: Any
    ) -> Event:
        """One event of this action (`seq` orders the events within the action), at `moment`
        (a `time.monotonic()` value; None: now)."""
        payload = fields.pop("payload", None)
        state = "complete" if payload else "none"
        return Event(
            event_id=f"{self.action_id}:{role}",
            action_id=self.action_id,
            kind=kind,
            direction=direction,  # type: ignore[arg-type]
            at=self.time_of(moment),
            collector=COLLECTOR,
            seq=seq,
            tool=self.tool,
            task=self.task,
            session=self.session,
            turn=self.turn,
            agent=self.agent,
            payload=payload or None,
            payload_state=state,  # type: ignore[arg-type]
            **fields,
        )


def reply_bytes(reply: dict[str, Any]) -> bytes:
    """The door's answer as sent (compact, stable JSON)."""
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=False, sort_keys=True).encode("utf-8")


def exchange_events(
    filing: Filing,
    index: int,
    exchange: Exchange,
    redacted: tuple[str, ...],
    response_redacted: tuple[str, ...],
) -> tuple[Event, Event]:
    """The request and answer events of one upstream exchange (already redacted by the caller)."""
    host = urlsplit(exchange.url).hostname if "://" in exchange.url else None
    request = filing.event(
        f"upstream.{index}.request",
        UPSTREAM_REQUEST,
        "out",
        10 + 2 * index,
        moment=exchange.sent,
        method=exchange.method,
        url=exchange.url,
        host=host,
        head=exchange.request_head,
        payload=exchange.request_body,
        redacted=redacted,
    )
    answer = filing.event(
        f"upstream.{index}.response",
        UPSTREAM_RESPONSE,
        "in",
        11 + 2 * index,
        moment=exchange.answered,
        method=exchange.method,
        url=exchange.url,
        host=host,
        status=exchange.status,
        head=exchange.response_head,
        payload=exchange.response_body,
        redacted=response_redacted,
        error=exchange.error,
    )
    return request, answer


def as_recorded(
    exchange: Exchange, names: Redactor, everything: Redactor
) -> tuple[Exchange, tuple[str, ...], tuple[str, ...]]:
    """An exchange as the Ledger keeps it, with the secret names replaced on each side.

    The request is named with `names` (configured secrets only, so `Bearer [KEY]` stays readable and
    equals the dry run); the answer with `everything` (also credentials in well-known auth headers).
    """
    head, used = names.redact_head(exchange.request_head)
    body, used_body = names.redact_body(exchange.request_body, None)
    answer_head, seen = everything.redact_head(exchange.response_head)
    answer, seen_body = everything.redact_body(exchange.response_body, exchange.content_encoding)
    error = exchange.error
    if error is not None:
        error = everything.redact_body(error.encode("utf-8"), None)[0].decode("utf-8", "replace")
    named = Exchange(
        exchange.method,
        names.redact_url(exchange.url)[0],
        head,
        body,
        exchange.status,
        answer_head,
        answer,
        exchange.content_encoding,
        error,
        exchange.sent,
        exchange.answered,
    )
    return named, tuple(sorted(used | used_body)), tuple(sorted(seen | seen_body))


def shown(bound: Mapping[str, Any], names: Redactor) -> list[dict[str, str]] | dict[str, str] | None:
    """The exact bytes a bound request is sent as, with secrets as names (the dry run's view)."""
    method = str(bound.get("method", "")).upper()
    if method == "MCP":
        return [_wire_text(r, names) for r in mcp_requests(bound)]
    if method == "CLI":
        return {"command": names.redact_url(json.dumps(bound.get("command")))[0]}
    return _wire_text(bound, names)


def _wire_text(request: Mapping[str, Any], names: Redactor) -> dict[str, str]:
    head, body = wire(request)
    return {
        "head": names.redact_head(head)[0].decode("utf-8", "replace"),
        "body": names.redact_body(body, None)[0].decode("utf-8", "replace"),
    }
