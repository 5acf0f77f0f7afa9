"""One recorded call as one span, in the OpenTelemetry GenAI semantic conventions' terms.

A call is what the Ledger records as a request and its answer: a model API exchange through the
proxy (`chat {model}`: provider, request and response model, response id, finish reasons, input,
output, cache and reasoning tokens), any other exchange (an HTTP client span), a Directory tool
called through the dispatch door (`execute_tool {tool}`) or an MCP `tools/call` (`tools/call {tool}`,
the MCP conventions' name, with `gen_ai.tool.name`). An agent run (`Run`: the session, else the agent
and task, an event was filed under) is the root span `invoke_agent {agent}`; its trace and span ids
are derived from the run's names and a call's span id from its key, so exporting the same Ledger
twice, live or in a batch, gives the same ids (receivers deduplicate on them).

Times are the recorded ones in nanoseconds: an answer ends at its last byte when that was recorded.
Content (request and answer bodies as stored, secrets already replaced) goes into span events only
when asked for. Pure functions: events and bodies in, values out (`readback.otlp` encodes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal
from urllib.parse import urlsplit

from formats import documents
from formats.model_apis import OFFICIAL, Api, api_of
from readback.genai_messages import message_attributes
from readback.model_answer import ModelAnswer
from storage.events import StoredEvent

AttrValue = str | int | float | bool | tuple[str, ...]
Attributes = tuple[tuple[str, AttrValue], ...]
CallKind = Literal["model", "http", "tool", "mcp"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_OPERATIONS: Final[dict[Api, str]] = {
    "openai.chat": "chat",
    "openai.responses": "chat",
    "anthropic.messages": "chat",
    "openai.embeddings": "embeddings",
    "openai.completions": "text_completion",
}
DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
"""The span event that carries a model call's bodies as recorded (opt-in), for a call whose
conversation is not one `formats.conversation` reads; a readable one is span attributes instead."""


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class SpanValue:
    """One span before encoding."""

    trace_id: bytes
    span_id: bytes
    name: str
    kind: Literal["client", "server", "internal"]
    start_ns: int
    end_ns: int
    attributes: Attributes
    error: str | None
    parent_id: bytes | None = None
    events: tuple[SpanEvent, ...] = ()


@dataclass(frozen=True, slots=True)
class Run:
    """An agent run: what the events of one trace share. `key` is its stable name."""

    key: str
    agent: str | None
    session: str | None
    task: str | None


@dataclass(frozen=True, slots=True)
class Call:
    """A request and its answer (None while or when none was recorded), keyed by action or MCP call."""

    kind: CallKind
    key: str
    opening: StoredEvent
    closing: StoredEvent | None


@dataclass(frozen=True, slots=True)
class Content:
    """The bodies a span shows (opt-in): the request's and the answer's, as stored (redacted), and
    the answer's content type (a stream or not)."""

    request: bytes
    answer: bytes
    answer_type: str | None = None


def ident(text: str, size: int) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:size]


def ns(at: datetime) -> int:
    """Nanoseconds since the epoch, exactly (no float rounding of the recorded microseconds)."""
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


def run_of(event: StoredEvent) -> Run | None:
    """The run an event belongs to: its session (with its agent), else its agent and task; None
    when it was filed under no name at all (its call is then a trace of its own)."""
    if event.session:
        return Run(
            f"session\x00{event.agent or ''}\x00{event.session}", event.agent, event.session, event.task
        )
    if event.agent or event.task:
        return Run(f"agent\x00{event.agent or ''}\x00{event.task or ''}", event.agent, None, event.task)
    return None


def trace_id(run: Run | None, call: Call) -> bytes:
    """A run's trace, or a call's own (from its action id, as exports before runs named it)."""
    return ident(f"trace\x00{run.key}", 16) if run else ident(call.opening.action_id, 16)


def root_id(run: Run) -> bytes:
    return ident(f"root\x00{run.key}", 8)


def call_id(call: Call) -> bytes:
    return ident(call.opening.event_id, 8)


def times(call: Call) -> tuple[int, int]:
    """(start, end) in nanoseconds: the request's time, and the answer's last byte when recorded."""
    start = ns(call.opening.at)
    closing = call.closing
    if closing is None:
        return start, start
    if closing.last_byte_ms is not None:
        return start, start + round(closing.last_byte_ms * 1_000_000)
    return start, max(start, ns(closing.at))


def tokens(event: StoredEvent | None, column: str) -> int | None:
    """A token column the Ledger may not have yet (cache and reasoning): None when absent."""
    value = getattr(event, column, None) if event is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def provider(host: str, url: str) -> str:
    """`gen_ai.provider.name`: the official hosts by name, the rest by the API shape they speak."""
    if host in OFFICIAL:
        return OFFICIAL[host]
    api = api_of(url)
    return api.split(".")[0] if api is not None else "openai"


def _error(call: Call) -> str | None:
    closing = call.closing
    if closing is None:
        return "no answer was recorded"
    if closing.error:
        return closing.error
    if closing.kind == "dispatch.refused":
        return "refused"
    # a client's span fails on any 4xx or 5xx answer; a server's only on its own 5xx
    failed_from = 400 if call.opening.direction == "out" else 500
    if closing.status is not None and call.kind in ("model", "http") and closing.status >= failed_from:
        return str(closing.status)
    return None


def _common(call: Call) -> list[tuple[str, AttrValue]]:
    req, resp = call.opening, call.closing
    attrs: list[tuple[str, AttrValue]] = [("flightlog.action_id", req.action_id)]
    attrs.append(("flightlog.request_event", req.event_id))
    if resp is not None:
        attrs.append(("flightlog.response_event", resp.event_id))
    for name, value in (
        ("session.id", req.session),
        ("gen_ai.conversation.id", req.session),
        ("gen_ai.agent.name", req.agent),
        ("flightlog.task", req.task),
        ("flightlog.turn", req.turn),
    ):
        if value:
            attrs.append((name, value))
    return attrs


def _http(call: Call) -> list[tuple[str, AttrValue]]:
    req, resp = call.opening, call.closing
    url = req.url or ""
    attrs: list[tuple[str, AttrValue]] = [
        ("http.request.method", req.method or "GET"),
        ("url.full", url),
        ("server.address", req.host or urlsplit(url).hostname or ""),
        ("flightlog.direction", req.direction),
    ]
    if resp is not None and resp.status is not None:
        attrs.append(("http.response.status_code", resp.status))
    return attrs


def _model(
    call: Call, answer: ModelAnswer, asked_model: str | None
) -> tuple[str, list[tuple[str, AttrValue]]]:
    req, resp = call.opening, call.closing
    url = req.url or ""
    op = _OPERATIONS.get(api_of(url) or "openai.chat", "chat")
    host = req.host or urlsplit(url).hostname or ""
    model = asked_model or req.model or (resp.model if resp else None) or "unknown"
    name = provider(host, url)
    attrs: list[tuple[str, AttrValue]] = [
        ("gen_ai.operation.name", op),
        ("gen_ai.provider.name", name),
        ("gen_ai.system", name),
        ("gen_ai.request.model", model),
    ]
    response_model = answer.response_model or (resp.model if resp else None)
    optional: tuple[tuple[str, AttrValue | None], ...] = (
        ("gen_ai.response.model", response_model),
        ("gen_ai.response.id", answer.response_id),
        ("gen_ai.response.finish_reasons", answer.finish_reasons or None),
        (
            "gen_ai.usage.input_tokens",
            resp.tokens_in if resp and resp.tokens_in is not None else req.tokens_in,
        ),
        ("gen_ai.usage.output_tokens", resp.tokens_out if resp else None),
        (
            "gen_ai.usage.cache_read.input_tokens",
            _column_or(resp, "cache_read_tokens", answer.cache_read_tokens),
        ),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            _column_or(resp, "cache_write_tokens", answer.cache_write_tokens),
        ),
        (
            "gen_ai.usage.reasoning.output_tokens",
            _column_or(resp, "reasoning_tokens", answer.reasoning_tokens),
        ),
        ("flightlog.cost_usd", resp.cost_usd if resp else None),
    )
    attrs += [(k, v) for k, v in optional if v is not None]
    return f"{op} {model}", attrs


def _column_or(event: StoredEvent | None, column: str, read: int | None) -> int | None:
    value = tokens(event, column)
    return value if value is not None else read


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _content(call: Call, content: Content | None, end_ns: int) -> tuple[Attributes, tuple[SpanEvent, ...]]:
    """A call's content (opt-in) as the conventions carry it: a model call's conversation as message
    attributes (`readback.genai_messages`; the recorded bodies as an event when it is not one
    we read), a tool call's arguments and result as attributes (an MCP call's own, out of their
    JSON-RPC frames)."""
    if content is None:
        return (), ()
    if call.kind == "model":
        found = message_attributes(call.opening.url, content.request, content.answer, content.answer_type)
        if found is not None:
            return found, ()
        attrs: Attributes = (
            ("gen_ai.input.messages", _text(content.request)),
            ("gen_ai.output.messages", _text(content.answer)),
        )
        return (), (SpanEvent(DETAILS_EVENT, end_ns, attrs),)
    if call.kind == "mcp":
        attrs = (
            ("gen_ai.tool.call.arguments", mcp_arguments(content.request)),
            ("gen_ai.tool.call.result", mcp_result(content.answer)),
        )
        return attrs, ()
    if call.kind == "tool":
        attrs = (
            ("gen_ai.tool.call.arguments", _text(content.request)),
            ("gen_ai.tool.call.result", _text(content.answer)),
        )
        return attrs, ()
    return (), ()


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def mcp_arguments(request: bytes) -> str:
    """A `tools/call` message's own arguments (`params.arguments`, JSON), not its JSON-RPC frame: what
    the conventions call the tool's arguments, so a receiver that flattens them (Phoenix's
    `tool.parameters.*`) shows the tool's parameters, not `jsonrpc` and `method`. A message that is
    not a JSON-RPC object is given as recorded."""
    doc = documents.parse(request)
    if not isinstance(doc, dict) or "jsonrpc" not in doc:
        return _text(request)
    params = doc.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return _json(arguments if arguments is not None else {})


def mcp_result(answer: bytes) -> str:
    """A `tools/call` answer's own result: its `content` (the blocks the tool returned; the whole
    `result` when it has none), or the JSON-RPC `error`; an answer that is not a JSON-RPC object is
    given as recorded."""
    doc = documents.parse(answer)
    if not isinstance(doc, dict) or "jsonrpc" not in doc:
        return _text(answer)
    if "error" in doc:
        return _json(doc["error"])
    result = doc.get("result")
    if isinstance(result, dict) and "content" in result:
        return _json(result["content"])
    return _json(result)


def span_of_call(
    call: Call,
    run: Run | None,
    parent: bytes | None,
    answer: ModelAnswer,
    content: Content | None = None,
    asked_model: str | None = None,
) -> SpanValue:
    """The span of one call, under `parent` (None: the root of a trace of its own)."""
    req = call.opening
    start, end = times(call)
    attrs = _common(call)
    kind: Literal["client", "server", "internal"] = "client" if req.direction == "out" else "server"
    if call.kind == "model":
        name, model_attrs = _model(call, answer, asked_model)
        attrs = model_attrs + _http(call) + attrs
    elif call.kind == "tool":
        tool = req.tool or "unknown"
        name, kind = f"execute_tool {tool}", "internal"
        attrs = [("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", tool), *attrs]
        attrs.append(("flightlog.door_url", req.url or ""))
    elif call.kind == "mcp":
        tool = req.tool or ""
        name, kind = f"tools/call {tool}".rstrip(), "client"
        attrs = [
            ("gen_ai.operation.name", "execute_tool"),
            ("mcp.method.name", "tools/call"),
            ("gen_ai.tool.name", tool),
            ("flightlog.mcp_call", call.key),
            *attrs,
        ]
    else:
        name = req.method or "GET"
        attrs = _http(call) + attrs
    error = _error(call)
    if error:
        attrs.append(("error.type", error.split(":")[0][:100]))
    shown, events = _content(call, content, end)
    attrs += shown
    return SpanValue(
        trace_id=trace_id(run, call),
        span_id=call_id(call),
        name=name,
        kind=kind,
        start_ns=start,
        end_ns=end,
        attributes=tuple(attrs),
        error=error,
        parent_id=parent,
        events=events,
    )


def root_span(run: Run, start_ns: int, end_ns: int, calls: int) -> SpanValue:
    """The root of a run's trace: `invoke_agent {agent}` over the run's first to last recorded call."""
    attrs: list[tuple[str, AttrValue]] = [("gen_ai.operation.name", "invoke_agent")]
    for key, value in (
        ("gen_ai.agent.name", run.agent),
        ("session.id", run.session),
        ("gen_ai.conversation.id", run.session),
        ("flightlog.task", run.task),
    ):
        if value:
            attrs.append((key, value))
    attrs.append(("flightlog.calls", calls))
    return SpanValue(
        trace_id=ident(f"trace\x00{run.key}", 16),
        span_id=root_id(run),
        name=f"invoke_agent {run.agent}" if run.agent else "invoke_agent",
        kind="internal",
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=tuple(attrs),
        error=None,
    )
