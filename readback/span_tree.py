"""Ledger events into a tree of spans: a trace per agent run, its calls nested under its root, a tool
call under the model call that asked for it.

The same `SpanTree` serves the batch export (events read action by action) and the live stream
(events as they commit, `readback.otlp_live`): events go in with `add`, which gives back the
span of every call its events complete (a request and its answer may commit in different batches,
an MCP answer on another stream); `roots` gives each run's root span when the run has changed since
its root was last given, and `finish` closes what is left (calls never answered, every root). Both
paths therefore build the same tree with the same ids.

A tool call (`execute_tool`, MCP `tools/call`) is put under a model call when the Ledger can say so:
an earlier model call of the same run, answered before the tool started, whose answer asked for a
tool of that name (MCP tools as clients name them too, `mcp__server__tool`). Otherwise it sits
under the run's root. Calls filed under no run are traces of their own, as they always were. A
door's dry run executes nothing and is no span. The upstream exchanges a door call made
(`dispatch.upstream.request`/`.response`, one pair per attempt) are client spans under that call's
`execute_tool` span: what a tool call cost in time is seen down to the request that took it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from formats.errors import CodingError
from formats.model_apis import api_of
from readback.genai_spans import (
    Call,
    CallKind,
    Content,
    Run,
    SpanValue,
    call_id,
    ident,
    ns,
    root_id,
    root_span,
    run_of,
    span_of_call,
    times,
)
from readback.model_answer import ModelAnswer, decoded, read_model_answer, request_model
from readback.recorded import PayloadReader, body_or_note
from recording.mcp.http_messages import message_at
from storage import kinds
from storage.events import StoredEvent
from storage.heads import parse_head

Bodies = Callable[[StoredEvent], bytes]
EventsOf = Callable[[Sequence[str]], Iterable[StoredEvent]]
MCP_POINTER: Final = ":mcp:"
"""What an MCP message event's id holds when its bytes are a place in its exchange's payload."""
"""An event's stored body without its content-encoding (empty when it kept none)."""

_OPENING: Final[dict[str, CallKind]] = {
    kinds.HTTP_REQUEST: "http",
    kinds.DISPATCH_CALL: "tool",
    kinds.DISPATCH_UPSTREAM_REQUEST: "http",
    kinds.MCP_TOOL_CALL: "mcp",
    kinds.CONNECTION_ATTEMPT: "http",  # a CONNECT refused before any exchange (`_refused_connect`)
}
_CLOSING: Final = frozenset(
    {
        kinds.HTTP_RESPONSE,
        kinds.DISPATCH_REPLY,
        kinds.DISPATCH_REFUSED,
        kinds.DISPATCH_UPSTREAM_RESPONSE,
        kinds.MCP_TOOL_RESULT,
    }
)
_DOOR_UPSTREAM: Final = frozenset({kinds.DISPATCH_UPSTREAM_REQUEST, kinds.DISPATCH_UPSTREAM_RESPONSE})
OPEN_KEPT: Final = 20_000
"""Calls held while their other half is awaited; past it the oldest is given as unanswered."""
RUNS_KEPT: Final = 10_000
"""Runs remembered (for their roots and tool parents); past it the longest quiet are forgotten (a
call of a forgotten run starts its state again; its root keeps its ids)."""
ASKS_KEPT: Final = 64
"""Model calls that asked for tools, remembered per run to find a tool call's parent."""


def call_key(event: StoredEvent) -> str | None:
    """Which call an event belongs to (None: not one that becomes a span): its action, or for an MCP
    message the call key it shares with its answer (over HTTP, the answer may come on another stream)."""
    if event.kind in (kinds.MCP_TOOL_CALL, kinds.MCP_TOOL_RESULT):
        parent = event.parent if event.parent and event.parent.startswith("mcp:") else None
        return f"mcp\x00{parent or event.action_id}"
    if event.kind in _DOOR_UPSTREAM:  # `ACTION:upstream.N.request` and `.response`: attempt N's pair
        return f"upstream\x00{event.event_id.rsplit('.', 1)[0]}"
    if event.kind == kinds.CONNECTION_ATTEMPT and event.method != "CONNECT":
        return None  # a connection that failed before naming a request: no call
    if event.kind in _OPENING or event.kind in _CLOSING or event.kind == kinds.POLICY_REFUSED:
        return f"action\x00{event.action_id}"
    return None


def _refused_connect(event: StoredEvent, halves: list[StoredEvent | None]) -> bool:
    """Whether `event` is the refusal answering a CONNECT attempt refused before any exchange (a
    refusal of a request that was made is not an answer: the request has its own)."""
    opening = halves[0]
    return (
        event.kind == kinds.POLICY_REFUSED
        and opening is not None
        and opening.kind == kinds.CONNECTION_ATTEMPT
    )


def ledger_bodies(read: PayloadReader, events: EventsOf | None = None) -> Bodies:
    """Bodies from the Ledger's payloads, their content-encoding (named in the head) removed. With
    `events` (the Ledger's lookup by id), an MCP message recorded by reference (an `artifact`: its
    place in its exchange's payload, `recording.mcp.http_messages`) is read from there."""

    def bodies(event: StoredEvent) -> bytes:
        if event.payload_state == "artifact" and events is not None and MCP_POINTER in event.event_id:
            return _pointed(event.event_id)
        data = body_or_note(event, read)[0]  # a pruned body: none (the event's state still says it had one)
        if not data:
            return b""
        return decoded(data, parse_head(event.head).get("content-encoding") if event.head else None)

    def _pointed(event_id: str) -> bytes:
        exchange_id, n = event_id.rsplit(MCP_POINTER, 1)
        found = list(events([exchange_id])) if events is not None else []
        if not found or not n.isdigit():
            return b""
        data = body_or_note(found[0], read)[0]
        try:
            return message_at(data, found[0].head or b"", int(n)) if data else b""
        except (IndexError, ValueError, CodingError):
            return b""

    return bodies


@dataclass(slots=True)
class _RunState:
    run: Run
    start: int
    end: int
    calls: int = 0
    touched: float = 0.0
    given: tuple[int, int, int] | None = None
    asks: list[tuple[int, bytes, tuple[str, ...]]] = field(default_factory=list)


def _names_match(asked: str, tool: str) -> bool:
    return asked == tool or asked.endswith(f"__{tool}")


def _asker(state: _RunState, tool: str, start: int) -> bytes | None:
    """The span of the run's latest model call, answered before `start`, that asked for `tool`."""
    for ended, span_id, asked in reversed(state.asks):
        if ended <= start and any(_names_match(name, tool) for name in asked):
            return span_id
    return None


class SpanTree:
    """The spans of the events added so far (see the module's docstring)."""

    def __init__(
        self,
        bodies: Bodies,
        *,
        content: bool = False,
        open_kept: int = OPEN_KEPT,
        clock: Callable[[], float] = time.monotonic,
        hold: bool = False,
    ) -> None:
        self._bodies = bodies
        self._hold = hold
        self._held: list[tuple[str, StoredEvent, StoredEvent]] = []
        self._clock = clock
        self._content = content
        self._open_kept = open_kept
        self._open: OrderedDict[str, list[StoredEvent | None]] = OrderedDict()
        self._runs: dict[str, _RunState] = {}

    def add(self, events: Iterable[StoredEvent]) -> list[SpanValue]:
        """Take events in; the spans of the calls they complete, in completion order. With `hold`
        (live), a tool call no model call of its run has asked for yet waits for the next `add`: the
        answer that asked may commit a moment after the call (another writer), and the tree must not
        depend on which round saw which."""
        done: list[SpanValue] = []
        held, self._held = self._held, []
        for event in events:
            key = call_key(event)
            if key is None:
                continue
            if event.kind == kinds.POLICY_REFUSED:
                found = self._open.get(key)
                if found is None or not _refused_connect(event, found):
                    continue
            halves = self._open.setdefault(key, [None, None])
            if event.kind in _CLOSING or event.kind == kinds.POLICY_REFUSED:
                halves[1] = event
            elif halves[0] is None:
                halves[0] = event
            if halves[0] is not None and halves[1] is not None:
                del self._open[key]
                if self._hold and self._unasked(halves[0]):
                    self._held.append((key, halves[0], halves[1]))
                else:
                    done.append(self._span(key, halves[0], halves[1]))
        done += [self._span(*call) for call in held]
        while len(self._open) > self._open_kept:
            key, (opening, _) = self._open.popitem(last=False)
            if opening is not None:
                done.append(self._span(key, opening, None))
        return done

    def roots(self, quiet: float = 0.0) -> list[SpanValue]:
        """The root span of every run changed since its root was last given and quiet (no call added)
        for `quiet` seconds: a live run's root waits for the run to pause, as receivers that keep the
        first copy of a span (Phoenix) would otherwise keep a root ending too early."""
        out = []
        now_clock = self._clock()
        holding = {run.key for _, opening, _ in self._held if (run := run_of(opening)) is not None}
        for state in self._runs.values():
            now = (state.start, state.end, state.calls)
            if state.given != now and now_clock - state.touched >= quiet and state.run.key not in holding:
                state.given = now
                out.append(root_span(state.run, state.start, state.end, state.calls))
        if len(self._runs) > RUNS_KEPT:  # a proxy left on: forget the runs quiet longest, roots given
            done = sorted(
                (s.touched, key) for key, s in self._runs.items() if s.given == (s.start, s.end, s.calls)
            )
            for _, key in done[: len(self._runs) - RUNS_KEPT]:
                del self._runs[key]
        return out

    def finish(self) -> list[SpanValue]:
        """Every call still open as unanswered (an answer alone is dropped: its request was not
        selected or not seen), then the roots still to give."""
        done = [self._span(*call) for call in self._held]
        done += [self._span(key, o, None) for key, (o, _) in self._open.items() if o is not None]
        self._held = []
        self._open.clear()
        return done + self.roots()

    def _kind(self, opening: StoredEvent) -> CallKind:
        kind = _OPENING[opening.kind]
        return "model" if kind == "http" and api_of(opening.url) is not None else kind

    def _span(self, key: str, opening: StoredEvent, closing: StoredEvent | None) -> SpanValue:
        call = Call(self._kind(opening), key.split("\x00", 1)[1], opening, closing)
        run = run_of(opening)
        start, end = times(call)
        door_upstream = opening.kind in _DOOR_UPSTREAM
        state = None if door_upstream else self._run_state(run, start, end)
        answer, asked_model, content = ModelAnswer(), None, None
        if call.kind == "model":
            answer_body = self._bodies(closing) if closing is not None else b""
            head = parse_head(closing.head) if closing is not None and closing.head else None
            kind = head.get("content-type") if head is not None else None
            answer = read_model_answer(api_of(opening.url), answer_body, kind)
            request_body = self._bodies(opening) if self._content or not opening.model else b""
            asked_model = opening.model or request_model(request_body)
            if self._content:
                content = Content(request_body, answer_body, kind)
        elif self._content and call.kind in ("tool", "mcp"):
            content = Content(self._bodies(opening), self._bodies(closing) if closing is not None else b"")
        if door_upstream:  # under its door call's span, in the same trace; not a call of the run
            parent: bytes | None = ident(kinds.event_id(opening.action_id, kinds.DISPATCH_CALL_ROLE), 8)
        else:
            parent = self._parent(call, state, start)
        span = span_of_call(call, run, parent, answer, content, asked_model)
        if state is not None and answer.tools_asked:
            state.asks.append((end, call_id(call), answer.tools_asked))
            del state.asks[:-ASKS_KEPT]
        return span

    def _unasked(self, opening: StoredEvent) -> bool:
        """A tool call of a run whose model calls, so far, never asked for that tool before it."""
        run = run_of(opening)
        if self._kind(opening) not in ("tool", "mcp") or run is None or not opening.tool:
            return False
        state = self._runs.get(run.key)
        return state is None or _asker(state, opening.tool, ns(opening.at)) is None

    def _run_state(self, run: Run | None, start: int, end: int) -> _RunState | None:
        if run is None:
            return None
        state = self._runs.get(run.key)
        if state is None:
            state = self._runs[run.key] = _RunState(run, start, end)
        state.start, state.end = min(state.start, start), max(state.end, end)
        state.calls += 1
        state.touched = self._clock()
        return state

    def _parent(self, call: Call, state: _RunState | None, start: int) -> bytes | None:
        if state is None:
            return None
        tool = call.opening.tool
        asker = _asker(state, tool, start) if call.kind in ("tool", "mcp") and tool else None
        return asker or root_id(state.run)
