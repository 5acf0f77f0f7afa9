"""Send a recorded request again, record the new exchange beside the original, and diff the answers.

The request is rebuilt from what the Ledger kept: the method and URL, the header fields of the exact
head (minus the framing and hop-by-hop ones httpx sets itself), and the stored body. Secret values were
replaced by `[NAME]` when recorded; they are filled back from the secrets file for the wire only. The
new exchange is recorded as its own action whose `parent` is the original, with the request as it was
rebuilt (names, never values), the answer passed through the same redaction as capture's, and the
same facts capture would record of a live call: who it was made for (the original's identity) and,
for a model API, its model, tokens and cost (from the price table, as capture prices).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit, urlunsplit

from egress.sender import send_raw
from formats import codings
from formats.errors import CodingError
from formats.usage import extract_usage
from readback.answer_diff import Answer, AnswerDiff, diff_answers
from readback.errors import ReplayError
from readback.recorded import (
    REQUEST_KIND,
    RESPONSE_KIND,
    Exchange,
    PayloadReader,
    body,
    exchange_from_events,
)
from recording.action_ids import new_action_id
from recording.prices import PriceTable
from recording.redaction.redact import Redactor
from storage.events import Batch, Event
from storage.heads import END_OF_HEAD, Fields, build_head, parse_head
from storage.locations import flightlog_home

if TYPE_CHECKING:
    from storage.ledger import Ledger

COLLECTOR: Final = "replay"
PLACEHOLDER: Final = re.compile(rb"\[([A-Za-z_][A-Za-z0-9_.-]*)\]")
NOT_RESENT: Final = frozenset(
    {
        b"host",
        b"content-length",
        b"transfer-encoding",
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
"""Header fields that describe one hop's framing; httpx writes its own for the new connection."""
IDENTITY: Final = b"x-flightlog-"
"""Who-is-calling fields the proxy strips before forwarding (recorded, never sent upstream)."""
HTTPX_DEFAULTS: Final = ("accept", "accept-encoding", "connection", "user-agent")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A request ready to send: method, absolute URL, header fields in order, body bytes."""

    method: str
    url: str
    fields: Fields
    body: bytes


def fill(data: bytes, secrets: Mapping[str, str]) -> bytes:
    """Put each known secret's value back where its `[NAME]` stands; unknown names stay as written."""

    def value(match: re.Match[bytes]) -> bytes:
        name = match.group(1).decode("ascii")
        return secrets[name].encode() if name in secrets else match.group(0)

    return PLACEHOLDER.sub(value, data)


def fill_body(raw: bytes, content_encoding: str | None, secrets: Mapping[str, str]) -> bytes:
    """Fill names in a body, also inside a content-encoded one (decoded, filled, encoded the same way)."""
    if not raw or not secrets:
        return raw
    filled = fill(raw, secrets)
    if filled != raw or not content_encoding:
        return filled
    try:
        decoded = codings.decode(raw, content_encoding, cap=codings.READ_CAP)
    except CodingError:  # unknown, corrupt or too large to hold decoded: sent as recorded
        return raw
    refilled = fill(decoded, secrets)
    return raw if refilled == decoded else codings.encode(refilled, content_encoding)


def retarget(url: str, to: str | None) -> str:
    """The recorded URL sent to another scheme, host and port (`--to`), its path and query kept."""
    if not to:
        return url
    target, original = urlsplit(to), urlsplit(url)
    if not target.scheme or not target.netloc:
        raise ReplayError(f"--to takes a URL like http://127.0.0.1:8080, not {to!r}")
    path = target.path.rstrip("/") + (original.path or "/")
    return urlunsplit((target.scheme, target.netloc, path, original.query, ""))


def rebuild(exchange: Exchange, read: PayloadReader, to: str | None = None) -> Outgoing:
    """The recorded request as it will be sent, secret names still in place."""
    request = exchange.request
    if request.payload_state in ("missing", "artifact", "partial"):
        raise ReplayError(
            f"action {exchange.action_id}: the request body was not recorded whole ({request.payload_state}),"
            " so it cannot be sent again"
        )
    if not request.method or not request.url:
        raise ReplayError(f"action {exchange.action_id}: the request event has no method or URL")
    head = exchange.request_head
    fields = tuple(
        (n, v) for n, v in head.fields if n.lower() not in NOT_RESENT and not n.lower().startswith(IDENTITY)
    )
    return Outgoing(request.method, retarget(request.url, to), fields, body(request, read))


def names_in(outgoing: Outgoing, content_encoding: str | None) -> set[str]:
    """Every `[NAME]` written in the request: URL, header values, body (also decoded)."""
    spots = [outgoing.url.encode(), *(v for _, v in outgoing.fields), outgoing.body]
    spots.append(codings.readable(outgoing.body, content_encoding).data)
    return {m.group(1).decode("ascii") for spot in spots for m in PLACEHOLDER.finditer(spot)}


def unfilled(
    outgoing: Outgoing, redacted: tuple[str, ...], secrets: Mapping[str, str], content_encoding: str | None
) -> list[str]:
    """Names the recording put in place of a value that the secrets do not give back.

    `[REDACTED]` is what capture writes for an auth header it was not told the name of: no secrets
    file can fill it, so it is reported too.
    """
    written = names_in(outgoing, content_encoding)
    return sorted(n for n in written if n not in secrets and (n in redacted or n == "REDACTED"))


def filled(outgoing: Outgoing, secrets: Mapping[str, str], content_encoding: str | None) -> Outgoing:
    """The request with every known secret name filled: what goes on the wire, never to the Ledger."""
    return Outgoing(
        outgoing.method,
        fill(outgoing.url.encode(), secrets).decode(),
        tuple((n, fill(v, secrets)) for n, v in outgoing.fields),
        fill_body(outgoing.body, content_encoding, secrets),
    )


@dataclass(frozen=True, slots=True)
class Sent:
    """What came back on the wire: the answer's head parts and raw body, or the error instead."""

    start: float
    end: float
    host_field: bytes
    status: int | None = None
    reason: bytes = b""
    http_version: bytes = b"HTTP/1.1"
    fields: Fields = ()
    raw: bytes = b""
    error: str | None = None


def send(
    outgoing: Outgoing, proxy: str | None = None, verify: bool | str = True, timeout: float = 30.0
) -> Sent:
    """Send one request with httpx (through `proxy` when given) and read the raw answer whole."""
    import ssl

    import httpx

    try:
        trust = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
    except (OSError, ssl.SSLError) as e:
        raise ReplayError(f"cannot use {verify} as a CA bundle: {e}") from e
    start = time.time()
    with httpx.Client(
        proxy=proxy, verify=trust, timeout=timeout, follow_redirects=False, trust_env=False
    ) as client:
        try:
            request = client.build_request(
                outgoing.method, outgoing.url, headers=list(outgoing.fields), content=outgoing.body or None
            )
        except (httpx.InvalidURL, ValueError) as e:
            raise ReplayError(f"cannot build the request to {outgoing.url}: {e}") from e
        recorded = {n.lower() for n, _ in outgoing.fields}
        for name in HTTPX_DEFAULTS:
            if name.encode() not in recorded:
                del request.headers[name]
        host_field = request.headers.get("host", "").encode()
        try:
            received = send_raw(client, request)
        except httpx.HTTPError as e:
            return Sent(start, time.time(), host_field, error=f"{type(e).__name__}: {e}".rstrip(": "))
    response = received.response
    return Sent(
        start=start,
        end=time.time(),
        host_field=host_field,
        status=response.status_code,
        reason=response.reason_phrase.encode("latin-1", "replace"),
        http_version=response.http_version.encode(),
        fields=tuple(response.headers.raw),
        raw=received.raw,
    )


def _target(url: str) -> bytes:
    parts = urlsplit(url)
    return ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode()


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def replay_events(
    exchange: Exchange,
    outgoing: Outgoing,
    sent: Sent,
    secrets: Mapping[str, str],
    action_id: str,
    prices: PriceTable | None = None,
) -> tuple[Event, Event, Answer]:
    """The two events of the new exchange (names, never values) and its answer as compared."""
    redactor = Redactor(secrets)
    original = exchange.request
    host = urlsplit(outgoing.url).hostname
    fields = ((b"Host", sent.host_field), *outgoing.fields)
    if outgoing.body:
        fields += ((b"Content-Length", str(len(outgoing.body)).encode()),)
    shared: dict[str, Any] = {  # what both events of the new exchange say alike
        "action_id": action_id,
        "direction": "out",
        "collector": COLLECTOR,
        "method": outgoing.method,
        "url": outgoing.url,
        "host": host,
        "tool": original.tool,
        "model": original.model,
        "parent": exchange.action_id,
        "agent": original.agent,
        "session": original.session,
        "task": original.task,
        "turn": original.turn,
    }
    request = Event(
        **shared,
        event_id=f"{action_id}:request",
        kind=REQUEST_KIND,
        at=_at(sent.start),
        seq=0,
        head=build_head((outgoing.method.encode(), _target(outgoing.url), b"HTTP/1.1"), fields) + END_OF_HEAD,
        payload=outgoing.body or None,
        payload_state="complete" if outgoing.body else "none",
        redacted=original.redacted,
    )
    head = b""
    raw = b""
    names: set[str] = set()
    if sent.status is not None:
        head, head_names = redactor.redact_head(
            build_head((sent.http_version, str(sent.status).encode(), sent.reason), sent.fields) + END_OF_HEAD
        )
        encoding = _field(sent.fields, b"content-encoding")
        raw, body_names = redactor.redact_body(sent.raw, encoding)
        names = set(head_names) | set(body_names)
    usage = _usage(outgoing, sent, prices) if sent.status is not None and sent.status < 400 else {}
    response = Event(
        **(shared | usage),
        event_id=f"{action_id}:response",
        kind=RESPONSE_KIND,
        at=_at(sent.end),
        seq=1,
        status=sent.status,
        head=head,
        payload=raw or None,
        payload_state="complete" if raw else "none",
        redacted=tuple(sorted(names)),
        error=sent.error,
    )
    parsed = parse_head(head)
    answer = Answer(
        status=sent.status,
        reason=sent.reason.decode("latin-1"),
        fields=parsed.fields,
        body=codings.readable(raw, parsed.get("content-encoding")).data,
        error=sent.error,
    )
    return request, response, answer


def _usage(outgoing: Outgoing, sent: Sent, prices: PriceTable | None) -> dict[str, Any]:
    """Model, tokens and cost of a model API call's new answer, as capture reads them (none else)."""
    found = extract_usage(
        outgoing.url,
        outgoing.body,
        sent.raw,
        _field(sent.fields, b"content-type"),
        _field(sent.fields, b"content-encoding"),
    )
    if found is None:
        return {}
    cost = prices.cost_of(found) if prices is not None else None
    return {
        "model": found.model,
        "tokens_in": found.tokens_in,
        "tokens_out": found.tokens_out,
        "cost_usd": cost,
    }


def _field(fields: Fields, name: bytes) -> str | None:
    return next((v.decode("latin-1") for n, v in fields if n.lower() == name), None)


def recorded_answer(exchange: Exchange, read: PayloadReader) -> Answer:
    """The original answer as compared: decoded body, recorded header fields."""
    response = exchange.response
    head = exchange.response_head
    if response is None or head is None:
        error = response.error if response is not None else None
        return Answer(None, "", (), b"", error or "no answer was recorded")
    return Answer(
        status=response.status,
        reason=head.start[2].decode("latin-1"),
        fields=head.fields,
        body=codings.readable(body(response, read), head.get("content-encoding")).data,
        error=response.error,
    )


@dataclass(frozen=True, slots=True)
class Replayed:
    """The outcome of one replay: the original action, the new one, and the diff of their answers."""

    original: str
    action_id: str
    url: str
    diff: AnswerDiff

    def to_json(self) -> dict[str, object]:
        return {"original": self.original, "replay": self.action_id, "url": self.url, **self.diff.to_json()}

    def render(self) -> str:
        """What `flightlog replay` prints (and the browser shows): which action became which, the diff."""
        return f"replayed {self.original} as {self.action_id}: {self.url}\n{self.diff.render()}"


def replay(
    ledger: Ledger,
    action_id: str,
    secrets: Mapping[str, str],
    *,
    to: str | None = None,
    proxy: str | None = None,
    verify: bool | str = True,
    allow_unfilled: bool = False,
    timeout: float = 30.0,
    prices: PriceTable | None = None,
) -> Replayed:
    """Send the request of `action_id` again, record the new exchange, and diff the two answers.
    `prices`: what its cost is read with (default: the shipped table and FLIGHTLOG_HOME's override)."""
    exchange = exchange_from_events(ledger.action(action_id))
    if exchange is None:
        raise ReplayError(f"no recorded HTTP request with action id {action_id!r}")
    template = rebuild(exchange, ledger.payload, to)
    encoding = exchange.request_head.get("content-encoding")
    missing = unfilled(template, exchange.request.redacted, secrets, encoding)
    if missing and not allow_unfilled:
        raise ReplayError(
            f"the recorded request has {', '.join(f'[{n}]' for n in missing)} where a secret was; give the"
            " values in the secrets file (--secrets FILE) or pass --allow-unfilled to send it as recorded"
        )
    wire = filled(template, secrets, encoding)
    sent = send(wire, proxy=proxy, verify=verify, timeout=timeout)
    new_action = new_action_id()
    if prices is None:
        prices = PriceTable.load(flightlog_home() / "prices.toml")
    request, response, answer = replay_events(exchange, template, sent, secrets, new_action, prices)
    ledger.append(Batch(COLLECTOR, time.time_ns(), (request, response)))
    diff = diff_answers(recorded_answer(exchange, ledger.payload), answer, action_id, new_action)
    return Replayed(action_id, new_action, template.url, diff)
