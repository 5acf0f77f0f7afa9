"""Export recorded events as HAR 1.2, a mitmproxy flow file, JSON lines or OTLP traces, with bounded memory.

Each format is written one exchange (or event) at a time straight to the output, so a large export
never holds the whole selection: HAR's one JSON document is written as its preamble, then entries, then
its closing brackets. OTLP goes to a receiver instead of a file (`export_otlp`, spans from `otlp`).
`on_item` is called after each item so the command can draw a progress bar.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import IO, TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from formats.extras import require
from readback.errors import ExportError
from readback.har import har_entry, har_preamble
from readback.recorded import (
    Exchange,
    PayloadReader,
    Selection,
    body_or_note,
    iter_exchanges,
    select_action_ids,
    select_event_ids,
)
from storage.events import StoredEvent

if TYPE_CHECKING:
    from mitmproxy import http

    from storage.ledger import Ledger

Format = Literal["har", "mitmproxy", "jsonl", "otlp"]
FORMATS: Final = ("har", "mitmproxy", "jsonl", "otlp")
Progress = Callable[[], None]


def _flightlog_version() -> str:
    try:
        return version("flightlog")
    except PackageNotFoundError:
        return "0"


def event_json(event: StoredEvent, read: PayloadReader) -> dict[str, Any]:
    """One event as a JSON line: its stored fields, and its payload as text or base64."""
    out = event.to_json()
    data, pruned = body_or_note(event, read)
    if pruned is not None:
        out["pruned"] = pruned
    text = None
    if data and event.payload_text:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    out["payload"] = text
    out["payload_base64"] = base64.b64encode(data).decode("ascii") if data and text is None else None
    return out


def _target(exchange: Exchange) -> tuple[str, str, int, bytes, bytes]:
    """Scheme, host, port, authority and request target of a recorded request, as mitmproxy holds
    them: a CONNECT in authority-form (no scheme, no path, the authority `host:port`), as mitmproxy
    itself writes one; any other request in origin-form (`/path?query`) with its scheme."""
    url = exchange.request.url or ""
    recorded = exchange.request_head.start[1]
    if (exchange.request.method or "").upper() == "CONNECT":
        authority = recorded or url.encode()
        host, _, port = authority.decode("latin-1").rpartition(":")
        return "", host.strip("[]"), int(port) if port.isdigit() else 443, authority, b""
    parts = urlsplit(url)
    scheme = parts.scheme or "http"
    number = parts.port or (443 if scheme == "https" else 80)
    target = recorded if recorded.startswith(b"/") else (parts.path or "/").encode()
    if not recorded.startswith(b"/") and parts.query:
        target += b"?" + parts.query.encode()
    return scheme, parts.hostname or "", number, b"", target


def mitmproxy_flow(exchange: Exchange, read: PayloadReader) -> http.HTTPFlow:
    """A mitmproxy `HTTPFlow` holding the recorded heads and raw (content-encoded) bodies."""
    from mitmproxy import connection, http
    from mitmproxy.flow import Error

    req = exchange.request
    head = exchange.request_head
    scheme, host, port, authority, target = _target(exchange)
    start = req.at.timestamp()
    resp = exchange.response
    end = resp.at.timestamp() if resp is not None else start
    client = connection.Client(peername=("0.0.0.0", 0), sockname=("0.0.0.0", 0), timestamp_start=start)
    server = connection.Server(address=(host, port))
    flow = http.HTTPFlow(client, server)
    request_body, request_pruned = body_or_note(req, read)
    flow.request = http.Request(
        host=host,
        port=port,
        method=(req.method or head.start[0].decode("latin-1")).encode(),
        scheme=scheme.encode(),
        authority=authority,
        path=target,
        http_version=head.start[2] or b"HTTP/1.1",
        headers=http.Headers(head.fields),
        content=request_body,
        trailers=None,
        timestamp_start=start,
        timestamp_end=start,
    )
    answer = exchange.response_head
    response_body, response_pruned = body_or_note(resp, read)
    if resp is not None and answer is not None and resp.status is not None:
        flow.response = http.Response(
            http_version=answer.start[0] or b"HTTP/1.1",
            status_code=resp.status,
            reason=answer.start[2],
            headers=http.Headers(answer.fields),
            content=response_body,
            trailers=None,
            timestamp_start=end,
            timestamp_end=end,
        )
    error = resp.error if resp is not None else None
    if error or flow.response is None:
        flow.error = Error(error or "no answer was recorded", end)
    if exchange.websocket:
        flow.websocket = websocket_data(exchange, read)
    flow.comment = f"flightlog action {exchange.action_id}"
    for side, note in (("request", request_pruned), ("response", response_pruned)):
        if note is not None:  # the bytes are gone: the flow says so where a reader looks
            flow.comment += f"; {side} body {note}"
            flow.metadata[f"flightlog_{side}_pruned"] = note
    flow.metadata["flightlog_action"] = exchange.action_id
    flow.live = False
    return flow


def websocket_data(exchange: Exchange, read: PayloadReader) -> Any:
    """mitmproxy's `WebSocketData` of an upgraded exchange: every message (text when strict UTF-8: the
    Ledger keeps bytes, not opcodes) and how it closed."""
    from mitmproxy.websocket import WebSocketData, WebSocketMessage
    from wsproto.frame_protocol import Opcode

    data = WebSocketData()
    for event in exchange.websocket:
        content = body_or_note(event, read)[0]
        if event.kind.endswith(".close"):
            data.close_code = event.status
            data.close_reason = content.decode("utf-8", "replace")
            continue
        opcode = Opcode.TEXT if event.payload_text or not content else Opcode.BINARY
        message = WebSocketMessage(opcode, event.kind.endswith(".client"), content, event.at.timestamp())
        data.messages.append(message)
    return data


def write_har(exchanges: Iterator[Exchange], read: PayloadReader, out: IO[bytes], on_item: Progress) -> int:
    """Write one HAR 1.2 document, entry by entry."""
    preamble = json.dumps({"log": {**har_preamble(_flightlog_version()), "entries": []}}, indent=1)
    opening, closing = preamble.rsplit("[]", 1)
    out.write((opening + "[").encode())
    count = 0
    for exchange in exchanges:
        out.write(b"\n" if count == 0 else b",\n")
        out.write(json.dumps(har_entry(exchange, read), ensure_ascii=False).encode())
        count += 1
        on_item()
    out.write(("\n]" + closing + "\n").encode())
    return count


def write_flows(exchanges: Iterator[Exchange], read: PayloadReader, out: IO[bytes], on_item: Progress) -> int:
    """Write a mitmproxy flow file (`mitmproxy -r FILE`, `mitmweb`) with mitmproxy's own writer."""
    from mitmproxy.io import FlowWriter

    writer = FlowWriter(out)
    count = 0
    for exchange in exchanges:
        writer.add(mitmproxy_flow(exchange, read))
        count += 1
        on_item()
    return count


def write_jsonl(events: Iterator[StoredEvent], read: PayloadReader, out: IO[bytes], on_item: Progress) -> int:
    """Write one JSON object per event, payload included."""
    count = 0
    for event in events:
        out.write(json.dumps(event_json(event, read), ensure_ascii=False).encode() + b"\n")
        count += 1
        on_item()
    return count


def plan(ledger: Ledger, selection: Selection, fmt: str) -> list[str]:
    """What will be written, in order: action ids for HAR and flows, event ids for JSON lines."""
    if fmt not in FORMATS:
        raise ExportError(f"--format is one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "jsonl":
        return select_event_ids(ledger.engine, selection)
    return select_action_ids(ledger.engine, selection)


def export(ledger: Ledger, fmt: str, ids: list[str], out: IO[bytes], on_item: Progress = lambda: None) -> int:
    """Write the planned ids in `fmt` to `out`; returns how many exchanges (or events) were written."""
    if fmt == "jsonl":
        return write_jsonl(ledger.events(ids), ledger.payload, out, on_item)
    exchanges = iter_exchanges(ledger.engine, ledger.events, ids, attempts=True)
    if fmt == "har":
        return write_har(exchanges, ledger.payload, out, on_item)
    if fmt == "mitmproxy":
        return write_flows(exchanges, ledger.payload, out, on_item)
    raise ExportError(f"--format is one of {', '.join(FORMATS)}, not {fmt!r}")


def export_otlp(
    ledger: Ledger,
    ids: list[str],
    endpoint: str,
    on_item: Progress = lambda: None,
    *,
    content: bool = False,
    chunk: int = 400,
) -> int:
    """Send the planned actions as spans (a trace per agent run, `span_tree`) to the OTLP/HTTP
    receiver at `endpoint`; returns how many spans. `content`: bodies as span events."""
    require("opentelemetry.proto.collector.trace.v1.trace_service_pb2", "otlp")
    from readback import otlp
    from readback.span_tree import SpanTree, ledger_bodies
    from storage.lookups import event_ids_of_actions

    tree = SpanTree(ledger_bodies(ledger.payload, ledger.events), content=content)

    def spans() -> Iterator[otlp.SpanValue]:
        for start in range(0, len(ids), chunk):
            part = ids[start : start + chunk]
            events = ledger.events([e for e, _ in event_ids_of_actions(ledger.engine, part)])
            yield from tree.add(sorted(events, key=lambda e: (e.at, e.seq, e.event_id)))
            for _ in part:
                on_item()
        yield from tree.finish()

    return otlp.send(spans(), endpoint)
