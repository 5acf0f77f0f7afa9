"""One recorded exchange as a HAR 1.2 entry, the form browsers' devtools import.

HAR wants decoded bodies: `content.text` is the answer with its content-encoding removed, as text when
it is UTF-8 and as base64 (`encoding: "base64"`) otherwise; `bodySize` is what travelled. Fields HAR
has no place for (the action id, payload states, redacted names) go in `_flightlog`, the spec's
custom-field form (a leading underscore).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from formats import codings
from readback.recorded import Exchange, PayloadReader, body, body_or_note
from storage.heads import Fields, Head
from storage.rows import TOKEN_DETAILS

VERSION: Final = "1.2"
UNKNOWN_MIME: Final = "x-unknown"


def iso(at: datetime) -> str:
    """ISO 8601 with milliseconds and an explicit offset, as HAR's `startedDateTime` wants."""
    return at.isoformat(timespec="milliseconds")


def headers(fields: Fields) -> list[dict[str, str]]:
    return [{"name": n.decode("latin-1"), "value": v.decode("latin-1")} for n, v in fields]


def query_string(url: str) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)]


def request_cookies(head: Head) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, v in head.fields:
        if n.lower() != b"cookie":
            continue
        for part in v.decode("latin-1").split(";"):
            name, sep, value = part.strip().partition("=")
            if sep:
                out.append({"name": name, "value": value})
    return out


def response_cookies(head: Head) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n, v in head.fields:
        if n.lower() != b"set-cookie":
            continue
        first, *attrs = v.decode("latin-1").split(";")
        name, _, value = first.strip().partition("=")
        cookie: dict[str, Any] = {"name": name, "value": value}
        for attr in attrs:
            key, _, val = attr.strip().partition("=")
            key = key.lower()
            if key in ("path", "domain", "expires"):
                cookie[key] = val
            elif key == "httponly":
                cookie["httpOnly"] = True
            elif key == "secure":
                cookie["secure"] = True
        out.append(cookie)
    return out


def text_or_base64(data: bytes) -> tuple[str, str | None]:
    """The body as HAR text: UTF-8 as is, anything else base64 (the second value names the encoding)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def headers_size(raw_head: bytes, http_version: bytes) -> int:
    """The head's size on the wire with its closing blank line; -1 where no wire bytes exist (HTTP/2)."""
    if not raw_head or http_version.upper().startswith(b"HTTP/2"):
        return -1
    return len(raw_head.rstrip(b"\r\n")) + 4


def absolute_url(method: str, url: str, host: str | None) -> str:
    """The request's absolute URL, as HAR wants one: a recorded absolute URL as it is; a CONNECT's
    authority-form target (`host:port`) as the origin of its tunnel (https for port 443, else http),
    with the port kept; an origin-form target (`/path`) under its host."""
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ws", "wss") and parts.netloc:
        return url
    if method.upper() == "CONNECT" or (url and not url.startswith("/") and "://" not in url):
        authority = url or host or ""
        _, _, port = authority.rpartition(":")
        scheme = "https" if port == "443" else "http"
        return f"{scheme}://{authority}/"
    return f"http://{host or 'localhost'}{url or '/'}"


def har_request(x: Exchange, read: PayloadReader) -> dict[str, Any]:
    req, head = x.request, x.request_head
    raw, pruned = body_or_note(req, read)
    method = req.method or head.start[0].decode("latin-1")
    out: dict[str, Any] = {
        "method": method,
        "url": absolute_url(method, req.url or "", req.host),
        "httpVersion": head.start[2].decode("latin-1") or "HTTP/1.1",
        "cookies": request_cookies(head),
        "headers": headers(head.fields),
        "queryString": query_string(req.url or "") if method.upper() != "CONNECT" else [],
        "headersSize": headers_size(req.head, head.start[2]),
        "bodySize": len(raw) if req.payload_state in ("complete", "partial") else -1,
    }
    if raw:
        text, encoding = text_or_base64(codings.readable(raw, head.get("content-encoding")).data)
        post: dict[str, Any] = {"mimeType": head.get("content-type") or UNKNOWN_MIME, "text": text}
        if encoding:
            post["_encoding"] = encoding
        out["postData"] = post
    if pruned is not None:
        out["postData"] = {
            "mimeType": head.get("content-type") or UNKNOWN_MIME,
            "text": "",
            "comment": pruned,
        }
    return out


def har_response(x: Exchange, read: PayloadReader) -> dict[str, Any]:
    resp, head = x.response, x.response_head
    if resp is None or head is None or resp.status is None:
        return {
            "status": 0,
            "statusText": "",
            "httpVersion": "",
            "cookies": [],
            "headers": [],
            "content": {"size": 0, "mimeType": UNKNOWN_MIME},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": -1,
            "_error": (resp.error if resp is not None else None) or "no answer was recorded",
        }
    raw, pruned = body_or_note(resp, read)
    readable = codings.readable(raw, head.get("content-encoding"))
    decoded = readable.data
    content: dict[str, Any] = {"size": len(decoded), "mimeType": head.get("content-type") or UNKNOWN_MIME}
    if readable.cut:
        content["comment"] = f"text cut: {readable.problem}"
    if pruned is not None:
        content["comment"] = pruned
    if readable.codings:
        content["compression"] = len(decoded) - len(raw)
    if decoded:
        content["text"], encoding = text_or_base64(decoded)
        if encoding:
            content["encoding"] = encoding
    return {
        "status": resp.status,
        "statusText": head.start[2].decode("latin-1"),
        "httpVersion": head.start[0].decode("latin-1"),
        "cookies": response_cookies(head),
        "headers": headers(head.fields),
        "content": content,
        "redirectURL": head.get("location") or "",
        "headersSize": headers_size(resp.head, head.start[0]),
        "bodySize": len(raw) if resp.payload_state in ("complete", "partial") else -1,
    }


def timings(x: Exchange) -> dict[str, float]:
    """HAR's `timings`: `wait` is the time to the answer's first byte and `receive` the rest up to its
    last byte, from the offsets capture measured; where it measured none, the whole span from the
    request event to the answer event is `wait` (nothing says when the answer began)."""
    started = x.request.at
    ended = x.response.at if x.response is not None else started
    total = max(0.0, (ended - started).total_seconds() * 1000)
    first = x.response.first_byte_ms if x.response is not None else None
    last = x.response.last_byte_ms if x.response is not None else None
    if first is None:
        wait, receive = total, 0.0
    else:
        wait = max(0.0, first)
        receive = max(0.0, (last if last is not None else total) - wait)
    return {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": wait, "receive": receive}


def har_entry(x: Exchange, read: PayloadReader) -> dict[str, Any]:
    """The HAR entry of one exchange: its `time` is the sum of its timings (HAR 1.2's rule)."""
    started = x.request.at
    spans = timings(x)
    flightlog: dict[str, Any] = {
        "action_id": x.action_id,
        "request_event": x.request.event_id,
        "request_payload_state": x.request.payload_state,
        "redacted": sorted(set(x.request.redacted) | set(x.response.redacted if x.response else ())),
    }
    if x.response is not None:
        flightlog["response_event"] = x.response.event_id
        flightlog["response_payload_state"] = x.response.payload_state
    if x.request.parent:
        flightlog["parent"] = x.request.parent
    if x.request.url and absolute_url(x.request.method or "", x.request.url, x.request.host) != x.request.url:
        flightlog["target"] = x.request.url  # as recorded (a CONNECT's authority-form)
    flightlog |= usage_and_timing(x)
    entry: dict[str, Any] = {
        "startedDateTime": iso(started),
        "time": sum(v for v in spans.values() if v > 0),
        "request": har_request(x, read),
        "response": har_response(x, read),
        "cache": {},
        "timings": spans,
        "_flightlog": flightlog,
    }
    if x.websocket:
        entry["_resourceType"] = "websocket"
        entry["_webSocketMessages"] = websocket_messages(x, read)
    return entry


def usage_and_timing(x: Exchange) -> dict[str, Any]:
    """Model, tokens and cost of an AI call, and the answer's byte timings, where recorded."""
    out: dict[str, Any] = {}
    for event in (x.request, x.response):
        if event is None:
            continue
        for name in ("model", "tokens_in", "tokens_out", *TOKEN_DETAILS, "cost_usd"):
            if (value := getattr(event, name)) is not None:
                out[name] = value
    if x.response is not None:
        for name in ("first_byte_ms", "last_byte_ms", "first_token_ms"):
            if (value := getattr(x.response, name, None)) is not None:
                out[name] = value
    return out


def websocket_messages(x: Exchange, read: PayloadReader) -> list[dict[str, Any]]:
    """The messages of an upgraded exchange in the shape Chrome's devtools write (`_webSocketMessages`):
    `send` from the client, `receive` from the server, epoch seconds, opcode 1 (text) or 2 (binary,
    data in base64). The Ledger keeps bytes, not opcodes: a message that is strict UTF-8 is text."""
    out: list[dict[str, Any]] = []
    for event in x.websocket:
        if event.kind.endswith(".close"):
            continue
        data = body(event, read)
        text, encoding = text_or_base64(data)
        out.append(
            {
                "type": "send" if event.kind.endswith(".client") else "receive",
                "time": event.at.timestamp(),
                "opcode": 2 if encoding else 1,
                "data": text,
            }
        )
    return out


def har_preamble(creator_version: str) -> dict[str, Any]:
    """The `log` object without its entries (they are streamed in one by one)."""
    return {"version": VERSION, "creator": {"name": "flightlog", "version": creator_version}, "pages": []}
