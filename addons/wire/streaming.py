"""Which exchanges stream: requests sent through the relay, answers teed instead of buffered."""

from __future__ import annotations

import re

TEE_ABOVE = 1024 * 1024
"""Answers without a length, event streams, and answers over this size are teed, not buffered."""
STREAM_FLAG = re.compile(rb'"stream"\s*:\s*true')


def looks_like_stream(accept: str, body: bytes | None) -> bool:
    """Whether a request asks for a streamed answer (SSE, or an AI API's `"stream": true`)."""
    if "text/event-stream" in accept:
        return True
    return (
        bool(body)
        and len(body or b"") < TEE_ABOVE
        and b'"stream"' in (body or b"")
        and bool(STREAM_FLAG.search(body or b""))
    )


def should_tee(content_type: str, content_length: str | None) -> bool:
    """Whether an answer is teed chunk by chunk instead of buffered by mitmproxy."""
    if "text/event-stream" in content_type or content_length is None:
        return True
    try:
        return int(content_length) > TEE_ABOVE
    except ValueError:
        return True
