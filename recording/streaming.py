"""Which answers stream: teed to the client as they arrive instead of buffered, decided by the answer."""

from __future__ import annotations

from formats import sse

TEE_ABOVE = 1024 * 1024
"""Answers without a length, event streams, and answers over this size are teed, not buffered."""


def should_tee(content_type: str, content_length: str | None) -> bool:
    """Whether an answer is teed chunk by chunk instead of buffered by mitmproxy."""
    if sse.declared(content_type) or content_length is None:
        return True
    try:
        return int(content_length) > TEE_ABOVE
    except ValueError:
        return True
