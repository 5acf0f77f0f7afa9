"""An MCP event stream's messages as events while the stream is still open.

A streamable HTTP session's GET stream (and the older HTTP+SSE transport's event channel) can stay
open for the whole session; the exchange's record reaches the writer only when it ends. So the
writer hands each teed chunk of an MCP GET stream to `live()` as it arrives, which reads it with
the one SSE reader (`formats.sse.Reader`) and makes one event per complete JSON-RPC message at once, by the
rules of `recording.mcp.http_messages` (same ids `RESPONSE_EVENT:mcp:N`, same numbering, same
call keys in `parent`), so a server's notification or a result sent on that stream is in the Ledger
while the stream is open.

The stream's own bytes are stored once, when it ends, as every answer's are; until then there is
nothing to point into, so an event made here carries its message's bytes itself (`complete`,
secrets replaced as in every body: the SSE events are redacted before they are read) instead of
being an `artifact`.
That message's bytes are thus also stored on their own, the stated price of seeing them early.
When the stream ends, `mcp_messages.derived` makes only the messages after those made here.

Only GET streams: a POST's event-stream answer ends with its call's result, so its messages (the
call's progress, the result) are made when it ends, as `artifact`s, stored once.

Memory stays bounded: a stream holds only its incomplete SSE event; past `mcp_messages.READ_MAX`
without a boundary, or for a content-encoded stream, it is left to the stream's end.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from formats import jsonrpc, sse
from recording import events as ev
from recording.mcp.http_messages import MEMO, READ_MAX, Flow, Memory, collect, message_event
from recording.records import StreamChunk
from storage import kinds
from storage.events import Event

log = logging.getLogger("flightlog.capture")


@dataclass
class Live:
    """One open stream: its flow, its reader (holding the incomplete SSE event), and how many
    messages were made."""

    flow: Flow
    known: bool
    reader: sse.Reader = field(default_factory=sse.Reader)
    emitted: int = 0
    off: bool = False
    """Left to the stream's end (too large an event, content-encoded, or not MCP after all)."""


def _start(chunk: StreamChunk, memo: Memory) -> Live | None:
    flow = memo.flows.get(chunk.flow_id)
    known = flow is not None
    if flow is None:
        flow = memo.candidates.get(chunk.flow_id)
    if flow is None or flow.base is None or flow.base.method != "GET":
        return None
    live = Live(flow, known, off=chunk.content_encoding not in ("", "identity"))
    memo.keep(memo.live, chunk.flow_id, live)
    return live


def live(
    proc: ev.Processing, chunk: StreamChunk, next_seq: Callable[[], int], memo: Memory = MEMO
) -> list[Event]:
    """The message events one chunk of an MCP exchange's answer completes (none for other streams).

    Never raises: the chunk itself is the stream's record, and a failure here only leaves this
    stream's messages to its end."""
    state = memo.live.get(chunk.flow_id) or _start(chunk, memo)
    if state is None or state.off:
        return []
    try:
        return _made(proc, chunk, state, next_seq, memo)
    except Exception as e:
        log.warning("flightlog: an open MCP stream is left to its end: %s", e)
        state.off = True
        return []


def _made(
    proc: ev.Processing, chunk: StreamChunk, state: Live, next_seq: Callable[[], int], memo: Memory
) -> list[Event]:
    read = state.reader.feed(chunk.data)
    if state.reader.pending > READ_MAX:
        state.off, state.reader = True, sse.Reader()  # what it held is let go: left to the end
    if not read or state.off:
        return []
    # redacted before it is read, as a stored stream is: no secret reaches a column or a payload
    names: set[str] = set()
    redacted = []
    for sse_event in read:
        data, replaced = ev.redact_body(proc, sse_event.data, "")
        names |= replaced
        redacted.append(replace(sse_event, data=data))
    collected = collect(jsonrpc.event_messages(redacted), state.flow, state.known)
    if collected is None:
        state.off = True  # another JSON-RPC API: the stream's end says so too, and makes nothing
        return []
    found, state.known = collected
    if not state.known:
        state.off = state.off or bool(found)  # messages before any sign of MCP: left to the end
        return []
    base = state.flow.base
    assert base is not None
    response = replace(
        base,
        event_id=kinds.event_id(chunk.flow_id, kinds.RESPONSE_ROLE),
        kind=kinds.HTTP_RESPONSE,
        at=ev.when(time.time()),
        redacted=tuple(sorted(names)),
    )
    out = []
    for message, data in found:
        state.emitted += 1
        event = message_event(response, state.flow, "server", message, data, state.emitted, next_seq(), memo)
        out.append(replace(event, payload=data, payload_state="complete"))
    return out
