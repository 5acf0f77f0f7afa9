"""Plain mitmdump as the oracle of streamed answers: `mitmdump -s tests/support/stream_oracle.py`.

mitmdump buffers every answer under `stream_large_bodies`, so an event stream reaches its client only
at its end; anyone using mitmdump in front of a streaming API turns streaming on for such answers.
This file does exactly that and nothing else, for the answers flightlog promises to pass on as they
arrive (an event stream, no length, or over 1 MiB): the differential suite then holds flightlog's
timing and bytes against mitmproxy's own streaming. It imports nothing of flightlog's on purpose.
"""

from __future__ import annotations

from typing import Any

STREAM_ABOVE = 1024 * 1024


def responseheaders(flow: Any) -> None:
    response = flow.response
    kind = response.headers.get("content-type", "")
    length = response.headers.get("content-length")
    if "text/event-stream" in kind or length is None or not length.isdigit() or int(length) > STREAM_ABOVE:
        response.stream = True
