"""Redaction throughput: MB/s on a 100 KiB JSON body with 10 configured secrets.

Run as `python -m bench.redact`. Prints one line per case: a body with no secret (the fast path,
bytes returned untouched), the same body holding every secret once, its gzip-encoded form, and a
streamed body fed in 16 KiB chunks.
"""

from __future__ import annotations

import gzip
import json
import random
import string
import time
from collections.abc import Callable

from recording.redaction.redact import Redactor

SIZE = 100 * 1024


def _secrets(rng: random.Random) -> dict[str, str]:
    alphabet = string.ascii_letters + string.digits + "-_"
    return {f"KEY_{i}": "sk-" + "".join(rng.choice(alphabet) for _ in range(40)) for i in range(10)}


def _body(rng: random.Random, extra: list[str]) -> bytes:
    """A realistic chat-completions-like JSON document of about SIZE bytes."""
    words = ["agent", "tool", "call", "result", "the", "ledger", "row", "bytes", "model", "token"]
    messages = []
    size = 0
    while size < SIZE:
        text = " ".join(rng.choice(words) for _ in range(60))
        messages.append({"role": rng.choice(["user", "assistant"]), "content": text})
        size += len(text) + 40
    for i, value in enumerate(extra):
        messages[i * 3]["content"] += " key=" + value
    return json.dumps({"model": "gpt-4o", "messages": messages}).encode()


def _rate(fn: Callable[[], object], nbytes: int, seconds: float = 1.0) -> float:
    """MB/s of fn over nbytes, best of repeated runs for about `seconds`."""
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return nbytes / best / 1e6


def main() -> None:
    rng = random.Random(7)
    secrets = _secrets(rng)
    redactor = Redactor(secrets)
    clean = _body(rng, [])
    dirty = _body(rng, list(secrets.values()))
    gz_clean, gz_dirty = gzip.compress(clean), gzip.compress(dirty)
    assert redactor.redact_body(clean, None)[0] is clean
    assert len(redactor.redact_body(dirty, None)[1]) == 10

    def streamed(body: bytes) -> None:
        s = redactor.stream()
        for i in range(0, len(body), 16384):
            s.feed(body[i : i + 16384])
        s.flush()

    def streamed_gz(body: bytes) -> None:
        s = redactor.stream("gzip")
        out = [s.feed(body[i : i + 16384]) for i in range(0, len(body), 16384)]
        out.append(s.flush())
        assert b"".join(out) == body  # no secret: the original compressed bytes

    cases = [
        ("no secret, identity", lambda: redactor.redact_body(clean, None), len(clean)),
        ("10 secrets, identity", lambda: redactor.redact_body(dirty, None), len(dirty)),
        ("no secret, gzip (decoded MB)", lambda: redactor.redact_body(gz_clean, "gzip"), len(clean)),
        ("10 secrets, gzip (decoded MB)", lambda: redactor.redact_body(gz_dirty, "gzip"), len(dirty)),
        ("no secret, stream 16 KiB chunks", lambda: streamed(clean), len(clean)),
        ("head with auth headers", lambda: redactor.redact_head(_HEAD), len(_HEAD)),
        ("head without auth headers", lambda: redactor.redact_head(_PLAIN_HEAD), len(_PLAIN_HEAD)),
        ("no secret, gzip stream 16 KiB", lambda: streamed_gz(gz_clean), len(clean)),
    ]
    print(f"{len(secrets)} secrets, {sum(1 for _ in redactor.forms)} spellings, body {len(clean)} bytes")
    for label, fn, n in cases:
        print(f"{label:34s} {_rate(fn, n):9.1f} MB/s")


_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: api.openai.com\r\nAuthorization: Bearer sk-abc\r\n"
    b"Content-Type: application/json\r\nUser-Agent: OpenAI/Python 1.40\r\nCookie: a=1; b=2\r\n"
)

_PLAIN_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 101323\r\n"
    b"Date: Mon, 30 Nov 2026 02:00:00 GMT\r\nServer: uvicorn\r\n"
)

if __name__ == "__main__":
    main()
