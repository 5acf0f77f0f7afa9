"""A stdio MCP session's lines as Ledger events (run by the writer, like every other record).

Ids are stable across re-delivery: the session id is fixed when `flightlog mcp-record` starts, so

- a line's `event_id` is `mcp:SESSION:c:N` (the client's Nth line) or `mcp:SESSION:s:N` (the server's);
- a call and its answer share `action_id` `mcp:SESSION:call:c:ID` (a call the client made, JSON-RPC id
  ID as JSON text) or `mcp:SESSION:call:s:ID` (a request the server made: sampling, elicitation) — derived
  from the id alone, so pairing needs no state and survives a restarted writer;
- a progress notification joins the action of the call whose `progressToken` it carries, a cancellation
  the action of the request it cancels; any other notification (and a line that is not JSON-RPC) is
  an action of its own; `mcp:SESSION:start` and `mcp:SESSION:end` belong to the action `mcp:SESSION`.

A JSON-RPC error answer's `error` is `CODE: message` (`status` stays the Ledger's non-negative code
column: the session end's exit code, 128+N for a signal N). `direction` is the action's: `out` for
what the client (the agent) started, `in` for what the server
started. `url` is `stdio:` and the server's command line, `host` is `stdio`; `method` is the JSON-RPC
method (an answer carries its call's). The kind of an answer needs its call's method: the writer keeps
a bounded memory of calls not yet answered (`Pairing`), which also names the calls a dying server left
unanswered. Payloads are the lines' exact bytes, secrets replaced as in every body.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from formats import jsonrpc as rpc
from recording import events as ev
from recording.records import StdioRecord
from storage import kinds
from storage.events import Event, PayloadState

START: str = kinds.MCP_START
EXIT: str = kinds.MCP_EXIT
SIDE = {"client": "c", "server": "s"}
STDIO_HOST = "stdio"
"""The `host` of every event of a stdio session."""
MEMORY = 20_000
"""Calls remembered at most (oldest forgotten first): an answer to a forgotten call is `mcp.result`."""


@dataclass
class Pairing:
    """Calls not yet answered, per session: `(session, action)` -> (method, tool); progress tokens."""

    calls: OrderedDict[tuple[str, str], tuple[str, str | None]] = field(default_factory=OrderedDict)
    tokens: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict)

    def remember(self, session: str, action: str, method: str, tool: str | None, token: str | None) -> None:
        self.calls[(session, action)] = (method, tool)
        if token is not None:
            self.tokens[(session, token)] = action
        for memo in (self.calls, self.tokens):
            while len(memo) > MEMORY:
                memo.popitem(last=False)

    def answered(self, session: str, action: str) -> tuple[str | None, str | None]:
        method, tool = self.calls.pop((session, action), (None, None))
        return method, tool

    def unanswered(self, session: str) -> list[str]:
        """The calls of `session` still waiting, as `method id` texts; forgets the session."""
        left = [k for k in self.calls if k[0] == session]
        out = [f"{self.calls.pop(k)[0]} {k[1].rsplit(':', 1)[-1]}" for k in left]
        for k in [k for k in self.tokens if k[0] == session]:
            del self.tokens[k]
        return out


PAIRS = Pairing()
"""The writer process's memory (one writer thread runs these functions)."""


def call_action(session: str, origin: str, rpc_id: str) -> str:
    """The action of a call made by `origin` with JSON-RPC id `rpc_id`: its answer's too."""
    return f"mcp:{session}:call:{SIDE[origin]}:{rpc_id}"


def _other(origin: str) -> str:
    return "server" if origin == "client" else "client"


def stdio_event(
    proc: ev.Processing, rec: StdioRecord, *, collector: str, seq: int, pairs: Pairing = PAIRS
) -> Event:
    """The event of one stdio record (a line, the start or the end)."""
    url = f"stdio:{rec.server}"
    names: frozenset[str] = frozenset()
    if proc.redactor is not None:
        url, url_names = proc.redactor.redact_url(url)
        names = frozenset(url_names)
    payload, body_names = ev.redact_body(proc, rec.data if rec.whole else b"", "")
    state: PayloadState = "complete" if payload else ("none" if rec.whole else "missing")
    who = rec.identity
    common = {
        "collector": collector,
        "seq": seq,
        "at": ev.when(rec.at),
        "url": url,
        "host": STDIO_HOST,
        "agent": who.agent,
        "session": who.session,
        "task": who.task,
        "turn": who.turn,
        "payload": payload or None,
        "payload_state": state,
        "redacted": tuple(sorted(names | body_names)),
    }
    session = rec.session
    if rec.origin in ("start", "end"):
        error = rec.note
        if rec.origin == "end":
            left = pairs.unanswered(session)
            if left:
                error = "; ".join(
                    p for p in (error, f"{len(left)} call(s) unanswered: {', '.join(left[:10])}") if p
                )
        return Event(
            event_id=f"mcp:{session}:{rec.origin}",
            action_id=f"mcp:{session}",
            kind=START if rec.origin == "start" else EXIT,
            direction="out",
            status=None if rec.code is None else (128 - rec.code if rec.code < 0 else rec.code),
            error=error,
            **common,  # type: ignore[arg-type]
        )
    event_id = f"mcp:{session}:{SIDE[rec.origin]}:{rec.index}"
    message = rpc.parse(rec.data) if rec.whole else rpc.peek(rec.data)
    action, direction, method, tool = (
        event_id,
        "out" if rec.origin == "client" else "in",
        message.method,
        None,
    )
    if message.shape == "request" and message.id is not None and message.method:
        action = call_action(session, rec.origin, message.id)
        tool = message.tool
        pairs.remember(session, action, message.method, tool, message.progress_token)
    elif message.shape == "answer" and message.id is not None:
        action = call_action(session, _other(rec.origin), message.id)
        method, tool = pairs.answered(session, action)
        direction = "out" if rec.origin == "server" else "in"
    elif message.shape == "notification":
        linked = None
        if message.progress_token is not None:
            linked = pairs.tokens.get((session, message.progress_token))
        elif message.refers_to is not None:
            linked = call_action(session, _other(rec.origin), message.refers_to)
        if linked is not None:
            action = linked
            direction = "out" if linked.split(":", 4)[3] == "c" else "in"
            method_tool = pairs.calls.get((session, linked))
            tool = method_tool[1] if method_tool else None
    notes = [n for n in (rec.note, message.error) if n]
    return Event(
        event_id=event_id,
        action_id=action,
        kind=kinds.mcp_kind(message.shape, message.method, method),
        direction=direction,  # type: ignore[arg-type]
        method=method,
        tool=tool,
        error="; ".join(notes) or None,
        **common,  # type: ignore[arg-type]
    )
