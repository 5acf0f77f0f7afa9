"""Send one request with httpx and keep the answer's raw bytes: its head as received, its body as sent.

The door's upstream calls and replay both record what came back byte for byte, so neither lets httpx
decode the body: the answer is streamed and read raw (content-encoding kept, transfer framing gone),
then closed. Errors are httpx's own (`httpx.HTTPError`); each caller records them its way.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from storage.heads import build_head


@dataclass(frozen=True, slots=True)
class Received:
    """An answer read whole: the (closed) response for its status and headers, its head, its raw body."""

    response: httpx.Response
    head: bytes
    raw: bytes


def response_head(response: httpx.Response) -> bytes:
    """The answer's status line and header fields as received (case, order and duplicates kept)."""
    version = (response.http_version or "HTTP/1.1").encode("latin-1")
    reason = response.reason_phrase.encode("latin-1", "replace")
    return build_head((version, str(response.status_code).encode(), reason), response.headers.raw)


def send_raw(client: httpx.Client, request: httpx.Request) -> Received:
    """Send `request` and read its answer's body raw; raises `httpx.HTTPError` when nothing came back."""
    response = client.send(request, stream=True)
    try:
        raw = b"".join(response.iter_raw())
    finally:
        response.close()
    return Received(response, response_head(response), raw)
