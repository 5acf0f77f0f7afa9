"""Recorded exchanges as OpenTelemetry traces (OTLP over HTTP), for Langfuse, Phoenix or Jaeger users.

One exchange is one span. An AI call (an event with a model) follows the GenAI semantic conventions:
its name is `{operation} {model}`, with `gen_ai.operation.name`, `gen_ai.provider.name`,
`gen_ai.request.model`, `gen_ai.usage.input_tokens` and `gen_ai.usage.output_tokens`; every span also
carries the HTTP conventions (`http.request.method`, `url.full`, `server.address`,
`http.response.status_code`, `error.type`) and flightlog's own ids under `flightlog.*`, so a span leads
back to its Ledger rows. The trace id is derived from the action id and the span id from the request
event id, so exporting the same exchange twice gives the same span (receivers deduplicate on them).

Spans are built as plain values (`span_of`), encoded with opentelemetry-proto and POSTed in batches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from addons.readback.errors import OtlpError
from addons.readback.recorded import Exchange

SERVICE: Final = "flightlog"
BATCH: Final = 256
"""Spans per request: small enough for any receiver's body limit with the attributes we send."""

_OPERATIONS: Final = (
    ("/chat/completions", "chat"),
    ("/responses", "chat"),
    ("/messages", "chat"),
    ("/embeddings", "embeddings"),
    ("/completions", "text_completion"),
)
_PROVIDERS: Final = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}


@dataclass(frozen=True, slots=True)
class SpanValue:
    """One span before encoding: what the exchange says, in OpenTelemetry's terms."""

    trace_id: bytes
    span_id: bytes
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: tuple[tuple[str, str | int | float | bool], ...]
    error: str | None


def _id(text: str, size: int) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()[:size]


def operation(url: str) -> str | None:
    """The GenAI operation a model API path performs (None for any other path)."""
    path = urlsplit(url).path
    return next((op for end, op in _OPERATIONS if path.endswith(end)), None)


def provider(host: str, url: str) -> str:
    """`gen_ai.provider.name`: the official hosts by name, the rest by the API shape they speak."""
    if host in _PROVIDERS:
        return _PROVIDERS[host]
    return "anthropic" if urlsplit(url).path.endswith("/messages") else "openai"


def span_of(x: Exchange) -> SpanValue:
    """The span of one recorded exchange."""
    req, resp = x.request, x.response
    url = req.url or ""
    host = req.host or urlsplit(url).hostname or ""
    method = req.method or "GET"
    start = req.at
    end = resp.at if resp is not None else start
    attributes: list[tuple[str, str | int | float | bool]] = [
        ("http.request.method", method),
        ("url.full", url),
        ("server.address", host),
        ("flightlog.action_id", x.action_id),
        ("flightlog.request_event", req.event_id),
        ("flightlog.direction", req.direction),
    ]
    for name, value in (("session.id", req.session), ("gen_ai.agent.name", req.agent)):
        if value:
            attributes.append((name, value))
    for name, value in (
        ("flightlog.task", req.task),
        ("flightlog.turn", req.turn),
        ("flightlog.tool", req.tool),
    ):
        if value:
            attributes.append((name, value))
    error = resp.error if resp is not None else "no answer was recorded"
    if resp is not None:
        attributes.append(("flightlog.response_event", resp.event_id))
        if resp.status is not None:
            attributes.append(("http.response.status_code", resp.status))
            if resp.status >= 500 and not error:
                error = str(resp.status)
    usage = resp if resp is not None and resp.model else req
    op = operation(url)
    name = method
    if usage.model and op:
        name = f"{op} {usage.model}"
        attributes += [
            ("gen_ai.operation.name", op),
            ("gen_ai.provider.name", provider(host, url)),
            ("gen_ai.request.model", usage.model),
            ("gen_ai.response.model", usage.model),
        ]
        if usage.tokens_in is not None:
            attributes.append(("gen_ai.usage.input_tokens", usage.tokens_in))
        if usage.tokens_out is not None:
            attributes.append(("gen_ai.usage.output_tokens", usage.tokens_out))
        if usage.cost_usd is not None:
            attributes.append(("flightlog.cost_usd", usage.cost_usd))
    if error:
        attributes.append(("error.type", error.split(":")[0][:100]))
    return SpanValue(
        trace_id=_id(x.action_id, 16),
        span_id=_id(req.event_id, 8),
        name=name,
        kind="client" if req.direction == "out" else "server",
        start_ns=int(start.timestamp() * 1e9),
        end_ns=int(end.timestamp() * 1e9),
        attributes=tuple(attributes),
        error=error,
    )


def _value(v: str | int | float | bool) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=v)


def encode(spans: Iterable[SpanValue]) -> bytes:
    """An `ExportTraceServiceRequest` (protobuf) holding `spans` under one `service.name=flightlog`."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope, KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

    kinds = {"client": Span.SPAN_KIND_CLIENT, "server": Span.SPAN_KIND_SERVER}
    encoded = [
        Span(
            trace_id=s.trace_id,
            span_id=s.span_id,
            name=s.name,
            kind=kinds[s.kind],
            start_time_unix_nano=s.start_ns,
            end_time_unix_nano=s.end_ns,
            attributes=[KeyValue(key=k, value=_value(v)) for k, v in s.attributes],
            status=Status(code=Status.STATUS_CODE_ERROR, message=s.error)
            if s.error
            else Status(code=Status.STATUS_CODE_OK),
        )
        for s in spans
    ]
    resource = Resource(attributes=[KeyValue(key="service.name", value=_value(SERVICE))])
    scope = ScopeSpans(scope=InstrumentationScope(name="flightlog.export"), spans=encoded)
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[scope])]
    )
    return request.SerializeToString()


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL: an endpoint given as a base gets `/v1/traces`, as the SDKs do."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


def _batches(exchanges: Iterable[Exchange], size: int) -> Iterator[list[SpanValue]]:
    batch: list[SpanValue] = []
    for x in exchanges:
        batch.append(span_of(x))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def send(exchanges: Iterable[Exchange], endpoint: str, headers: dict[str, str] | None = None) -> int:
    """POST every exchange's span to the OTLP/HTTP receiver at `endpoint`; returns the span count."""
    url = traces_url(endpoint)
    sent = 0
    with httpx.Client(timeout=30, trust_env=False) as client:
        for batch in _batches(exchanges, BATCH):
            try:
                answer = client.post(
                    url,
                    content=encode(batch),
                    headers={"Content-Type": "application/x-protobuf", **(headers or {})},
                )
            except httpx.HTTPError as e:
                raise OtlpError(f"cannot reach the OTLP receiver at {url}: {e}") from e
            if answer.status_code >= 300:
                raise OtlpError(
                    f"the OTLP receiver at {url} answered {answer.status_code}: {answer.text[:200]}"
                )
            sent += len(batch)
    return sent
