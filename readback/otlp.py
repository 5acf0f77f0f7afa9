"""Spans sent as OpenTelemetry traces over OTLP/HTTP (protobuf), for Phoenix, Langfuse or Jaeger users.

The spans are built from the Ledger by `readback.span_tree` (a trace per agent run, GenAI
semantic conventions, `readback.genai_spans`); here they are encoded with opentelemetry-proto
under one `service.name=flightlog` and POSTed in batches, by the batch export (`send`) and by the
live stream (`post`, one batch at a time).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final

import httpx

from readback.errors import OtlpError
from readback.genai_spans import AttrValue, SpanValue

SERVICE: Final = "flightlog"
BATCH: Final = 256
"""Spans per request: small enough for any receiver's body limit with the attributes we send."""


def _value(v: AttrValue) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue

    if isinstance(v, tuple):
        return AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=x) for x in v]))
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

    kinds = {
        "client": Span.SPAN_KIND_CLIENT,
        "server": Span.SPAN_KIND_SERVER,
        "internal": Span.SPAN_KIND_INTERNAL,
    }
    encoded = [
        Span(
            trace_id=s.trace_id,
            span_id=s.span_id,
            parent_span_id=s.parent_id or b"",
            name=s.name,
            kind=kinds[s.kind],
            start_time_unix_nano=s.start_ns,
            end_time_unix_nano=s.end_ns,
            attributes=[KeyValue(key=k, value=_value(v)) for k, v in s.attributes],
            events=[
                Span.Event(
                    time_unix_nano=e.time_ns,
                    name=e.name,
                    attributes=[KeyValue(key=k, value=_value(v)) for k, v in e.attributes],
                )
                for e in s.events
            ],
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


def batches(spans: Iterable[SpanValue], size: int = BATCH) -> Iterator[list[SpanValue]]:
    batch: list[SpanValue] = []
    for span in spans:
        batch.append(span)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def post(
    client: httpx.Client, url: str, spans: list[SpanValue], headers: dict[str, str] | None = None
) -> None:
    """POST one batch of spans; an unreachable or refusing receiver is one `OtlpError` line."""
    try:
        answer = client.post(
            url,
            content=encode(spans),
            headers={"Content-Type": "application/x-protobuf", **(headers or {})},
        )
    except httpx.HTTPError as e:
        raise OtlpError(f"cannot reach the OTLP receiver at {url}: {e}") from e
    if answer.status_code >= 300:
        raise OtlpError(f"the OTLP receiver at {url} answered {answer.status_code}: {answer.text[:200]}")


def send(spans: Iterable[SpanValue], endpoint: str, headers: dict[str, str] | None = None) -> int:
    """POST every span to the OTLP/HTTP receiver at `endpoint`, in batches; returns the span count."""
    url = traces_url(endpoint)
    sent = 0
    with httpx.Client(timeout=30, trust_env=False) as client:
        for batch in batches(spans):
            post(client, url, batch, headers)
            sent += len(batch)
    return sent
