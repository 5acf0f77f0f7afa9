"""The answers serve-replay makes up itself: recorded header fields refit, the refusal of a miss.

Plain functions over header fields, used by the serve-replay hook class.
"""

from __future__ import annotations

import json
from typing import Final

from formats import sse
from storage.heads import Fields, Head

MARK: Final = b"X-Flightlog-Replay"
FRAMING: Final = frozenset({b"content-length", b"transfer-encoding"})
NOT_HTTP2: Final = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"upgrade", b"te"})


def answer_fields(fields: Fields, size: int, http2: bool) -> Fields:
    """The recorded header fields fit for the body actually served and the client's protocol.

    The framing is rewritten (a partial body no longer has its recorded length): chunked stays chunked
    for an HTTP/1 client, anything else gets a Content-Length at the place the framing stood.
    """
    chunked = any(n.lower() == b"transfer-encoding" and b"chunked" in v.lower() for n, v in fields)
    framing = (
        (b"Transfer-Encoding", b"chunked") if chunked and not http2 else (b"Content-Length", b"%d" % size)
    )
    out: list[tuple[bytes, bytes]] = []
    placed = False
    for n, v in fields:
        low = n.lower()
        if low in FRAMING:
            if not placed:
                out.append(framing)
                placed = True
            continue
        if http2 and low in NOT_HTTP2:
            continue
        out.append((n, v))
    if not placed:
        out.append(framing)
    return tuple(out)


def is_stream(head: Head) -> bool:
    """A recorded answer that was streamed: server-sent events."""
    return sse.declared(head.get("content-type"))


def refusal(method: str, url: str, detail: str | None = None) -> tuple[bytes, Fields]:
    """The body and fields of a refused request: an OpenAI-shaped error most SDKs show as is.

    `detail` (the closest recorded request and how it differs) goes in the message and, ASCII-safe, in
    an `X-Flightlog-Replay-Miss` header, so a client that swallows bodies still carries it.
    """
    message = (
        f"flightlog serve-replay has no recorded answer for {method} {url}; nothing was sent to the network"
    )
    if detail:
        message += f". {detail}"
    doc = {"error": {"type": "flightlog_replay_unmatched", "message": message, "code": "unmatched"}}
    fields: Fields = ((b"Content-Type", b"application/json"), (MARK, b"unmatched"))
    if detail:
        fields += ((MARK + b"-Miss", detail.encode("ascii", "backslashreplace")[:2000]),)
    return json.dumps(doc).encode(), fields
