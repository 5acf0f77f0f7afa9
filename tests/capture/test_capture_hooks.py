"""The capture addon's hooks and `configure()`, in process with mitmproxy's own test helpers.

`taddons.context` loads the real `Capture` addon into a real mitmproxy `Master` (options, hooks,
`ctx`), and `tflow` builds real `HTTPFlow`s, so hook logic is checked in milliseconds without a
socket; the live-proxy tests (test_clients, test_streams, ...) keep what needs one. The writer
process is the one part left out: the addon's `writer` is a list that takes what the hooks hand it
(the records are what the writer process would receive, unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mitmproxy import exceptions, http
from mitmproxy.proxy.mode_specs import ProxyMode
from mitmproxy.test import taddons, tflow

from addons.capture import Capture
from addons.flow_notes import EXCHANGE
from addons.websockets import WebSocketCapture
from recording.action_ids import action_id
from recording.records import Record, RequestRecord, ResponseRecord, StreamChunk, WebSocketRecord


class Taken:
    """Stands in for the writer process: keeps every record the hooks put, in order."""

    def __init__(self) -> None:
        self.items: list[Record] = []
        self.processing: object = None
        self.stopping = False
        self.answered_after: list[int] = []
        """How many records had been put each time a hook asked for them before its answer went."""

    def put(self, item: Record) -> bool:
        self.items.append(item)
        return True

    def answered(self, exchange: str = "") -> None:
        self.answered_after.append(len(self.items))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """FLIGHTLOG_HOME in a temporary folder, so default Ledger/blob URLs never point at a real home."""
    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path))
    for name in ("FLIGHTLOG_LEDGER", "FLIGHTLOG_BLOBS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def capture(home: Path) -> Iterator[tuple[Capture, Taken, taddons.context]]:
    """The addon loaded and configured in a test master, its records taken into a list."""
    addon = Capture()
    with taddons.context(addon) as tctx:
        tctx.configure(addon)
        taken = Taken()
        addon.writer = taken  # type: ignore[assignment]
        yield addon, taken, tctx


def through(addon: Capture, flow: http.HTTPFlow) -> None:
    """The HTTP hooks in the order mitmproxy calls them for a request that was answered."""
    addon.requestheaders(flow)
    addon.request(flow)
    if flow.response is not None:
        addon.responseheaders(flow)
        addon.response(flow)


def test_configure_refuses_bad_options_with_one_clear_error(
    capture: tuple[Capture, Taken, taddons.context], tmp_path: Path
) -> None:
    """Each bad option is an OptionsError that names it; the addon keeps its previous settings."""
    addon, _, tctx = capture
    prices = tmp_path / "elsewhere" / "prices.toml"  # not FLIGHTLOG_HOME's, which is read by default
    prices.parent.mkdir()
    prices.write_text("this is = = not toml\n")
    cases = {
        "flightlog_stream_grace": (-1, "flightlog_stream_grace must be 0 or more"),
        "flightlog_max_request_body": ("lots", "flightlog_max_request_body"),
        "flightlog_secrets": ("/no/such/secrets.env", "secrets file not found: /no/such/secrets.env"),
        "flightlog_ledger": ("mysql://x/y", "must be sqlite:///PATH or postgresql+psycopg://"),
        "flightlog_prices": (str(prices), f"{prices}: not valid TOML"),
    }
    for name, (value, says) in cases.items():
        with pytest.raises(exceptions.OptionsError, match=says.replace("+", r"\+")):
            tctx.configure(addon, **{name: value})
    assert addon._max_request_body == 8 * 1024 * 1024
    tctx.configure(addon, flightlog_max_request_body="1k", flightlog_stream_grace=0)
    assert addon._max_request_body == 1024


def test_an_exchange_becomes_a_request_and_a_response_record(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """The request's exact head and body, then the answer's status, head and body, both for one flow."""
    addon, taken, _ = capture
    flow = tflow.tflow(resp=True)
    flow.request.headers["X-Trace"] = "a"
    through(addon, flow)
    request, response = taken.items
    assert isinstance(request, RequestRecord) and isinstance(response, ResponseRecord)
    assert request.exchange.flow_id == action_id(flow.id, flow.timestamp_created) == response.exchange.flow_id
    assert request.head.startswith(b"GET /path HTTP/1.1\r\n") and b"X-Trace: a\r\n" in request.head
    assert request.body == b"content"
    assert request.exchange.method == "GET" and request.exchange.url == "http://address:22/path"
    assert request.exchange.direction == "out"
    assert response.status == 200 and response.body == b"message" and response.error is None
    assert response.head.startswith(b"HTTP/1.1 200 OK\r\n")


def test_every_hook_before_an_answer_goes_out_asks_for_its_records_to_be_written_first(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """The response, error and WebSocket hooks call `answered()` (the writer process writes what
    waits to its pipe) after putting their record, so a proxy killed once the client has its answer
    still has that answer's records in the pipe."""
    addon, taken, _ = capture
    through(addon, tflow.tflow(resp=True))
    assert taken.answered_after == [2], "after the response record"
    failed = tflow.tflow(err=True)
    addon.requestheaders(failed)
    addon.error(failed)
    assert taken.answered_after == [2, 4], "after the error's answer record"
    ws, messages = tflow.twebsocketflow(), WebSocketCapture(addon)
    addon.requestheaders(ws)
    messages.websocket_message(ws)
    assert taken.answered_after[-1] == len(taken.items) and isinstance(taken.items[-1], WebSocketRecord)
    messages.websocket_end(ws)
    assert taken.answered_after[-1] == len(taken.items) and taken.items[-1].origin == "close"  # type: ignore[union-attr]


def test_own_routes_and_ignored_hosts_are_never_recorded(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """flightlog.local (the proxy's own routes) and configured hosts leave no record."""
    addon, taken, tctx = capture
    tctx.configure(addon, flightlog_ignore_hosts=["quiet.test"])
    for host in ("flightlog.local", "quiet.test"):
        flow = tflow.tflow(resp=True)
        flow.request.host = host
        flow.request.headers["Host"] = host
        through(addon, flow)
    assert taken.items == []


def test_identity_headers_name_the_caller_and_are_not_forwarded(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """X-Flightlog-* headers file the exchange under agent/session; neither the upstream nor the
    stored head (what went upstream) has them."""
    addon, taken, _ = capture
    flow = tflow.tflow(resp=True)
    flow.request.headers["X-Flightlog-Agent"] = "alpha"
    flow.request.headers["X-Flightlog-Session"] = "s1"
    through(addon, flow)
    exchange = EXCHANGE.need(flow)
    assert (exchange.identity.agent, exchange.identity.session) == ("alpha", "s1")
    assert "X-Flightlog-Agent" not in flow.request.headers
    assert b"X-Flightlog" not in taken.items[0].head  # type: ignore[union-attr]


def test_a_reverse_listener_for_another_host_records_inbound(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """Traffic arriving on a reverse listener is direction in, unless its target is an outbound host."""
    addon, taken, tctx = capture
    flow = tflow.tflow(resp=True)
    flow.client_conn.proxy_mode = ProxyMode.parse("reverse:http://hooks.example:80")
    through(addon, flow)
    tctx.configure(addon, flightlog_outbound_hosts=["hooks.example"])
    out = tflow.tflow(resp=True)
    out.client_conn.proxy_mode = ProxyMode.parse("reverse:http://hooks.example:80")
    through(addon, out)
    assert [r.exchange.direction for r in taken.items if isinstance(r, RequestRecord)] == ["in", "out"]


def test_a_request_body_over_the_limit_is_streamed_unread(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """A Content-Length above flightlog_max_request_body streams the request through (recorded missing)."""
    addon, _, tctx = capture
    tctx.configure(addon, flightlog_max_request_body="1k")
    flow = tflow.tflow()
    flow.request.headers["Content-Length"] = "2048"
    addon.requestheaders(flow)
    assert flow.request.stream is True


def test_a_streamed_answer_is_teed_chunk_by_chunk(capture: tuple[Capture, Taken, taddons.context]) -> None:
    """An event stream is passed on as it comes: each chunk is recorded, the answer has no body of its own."""
    addon, taken, _ = capture
    flow = tflow.tflow(resp=True)
    flow.response.headers["Content-Type"] = "text/event-stream"  # type: ignore[union-attr]
    addon.requestheaders(flow)
    addon.request(flow)
    addon.responseheaders(flow)
    tee = flow.response.stream  # type: ignore[union-attr]
    assert callable(tee)
    assert tee(b"data: 1\n\n") == b"data: 1\n\n" and tee(b"") == b""
    addon.response(flow)
    chunk, answer = taken.items[1:]
    assert isinstance(chunk, StreamChunk) and chunk.data == b"data: 1\n\n"
    assert isinstance(answer, ResponseRecord) and answer.streamed and answer.body is None


def test_a_failed_exchange_records_the_request_and_the_error(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """An upstream failure before the request was read records the head (no body) and the error,
    saying the client got the proxy's error answer instead (no byte of an answer had gone to it)."""
    addon, taken, _ = capture
    flow = tflow.tflow(err=True)
    addon.requestheaders(flow)
    addon.error(flow)
    request, answer = taken.items
    assert isinstance(request, RequestRecord) and request.body is None
    assert isinstance(answer, ResponseRecord) and answer.status is None
    assert answer.error == "error; the client was sent the proxy's error answer instead"


def test_websocket_messages_are_numbered_and_the_close_recorded(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """Each message of an upgraded connection is one record in arrival order; the close is the last."""
    addon, taken, _ = capture
    flow, part = tflow.twebsocketflow(), WebSocketCapture(addon)
    addon.requestheaders(flow)
    messages = list(flow.websocket.messages)  # type: ignore[union-attr]
    flow.websocket.messages = []  # type: ignore[union-attr]
    for message in messages:
        flow.websocket.messages.append(message)  # type: ignore[union-attr]
        part.websocket_message(flow)
    flow.websocket.timestamp_end = time.time()  # type: ignore[union-attr]
    part.websocket_end(flow)
    records = [r for r in taken.items if isinstance(r, WebSocketRecord)]
    assert [r.index for r in records] == [*range(1, len(messages) + 1), len(messages)]
    assert [r.origin for r in records[:-1]] == ["client" if m.from_client else "server" for m in messages]
    assert records[-1].origin == "close"


def test_a_stopping_proxy_refuses_new_requests_and_never_answers_unrecorded(
    capture: tuple[Capture, Taken, taddons.context],
) -> None:
    """Once the stop began, a new request is killed before it goes upstream and recorded as refused;
    once the writer stops taking records, an answer is killed instead of going out unrecorded."""
    addon, taken, _ = capture
    addon.in_flight.closing = True
    refused = tflow.tflow()
    addon.requestheaders(refused)
    assert refused.error is not None  # killed: mitmproxy closes the client's connection, no answer
    addon.error(refused)
    request, answer = taken.items
    assert isinstance(request, RequestRecord) and isinstance(answer, ResponseRecord)
    assert answer.error and answer.error.startswith("The proxy was stopping"), answer.error
    addon.in_flight.closing = False
    late = tflow.tflow(resp=True)
    addon.requestheaders(late)
    addon.request(late)
    taken.stopping = True
    addon.response(late)
    assert late.error is not None and not any(isinstance(r, ResponseRecord) for r in taken.items[3:])
