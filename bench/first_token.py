"""The recorded first token beside the client's own: the openai and anthropic SDKs, streamed through
`flightlog proxy` against a slow local model API whose first content delta comes a pause after its
opening events (OpenAI's role-only chunk, Anthropic's `message_start`, the Responses API's
`response.created`), as real model APIs answer.

For each client, `--calls` streamed calls: the client measures from just before its call to the first
event carrying content (its own first token) and to its first event of any kind (its first byte, as
an SDK sees it); the Ledger's `first_byte_ms` and `first_token_ms` of the same call are read back.
Printed per client: the medians, and the ratio of the recorded first token to the client's (near one
when the field means what it says; the first chunk, what it used to hold, would be a small fraction).

    python -m bench.first_token [--pause 0.3] [--calls 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.slow_model import MODEL_ANTHROPIC, MODEL_CHAT, slow_model

Marks = dict[str, float]


@dataclass(frozen=True)
class Via:
    """How a client reaches the proxy: its URL, and the headers that file the call under a session."""

    proxy: str
    headers: dict[str, str]


Client = Callable[[str, Via, Marks], None]
ROW = "{:26} {:>9} {:>9} {:>10} {:>10} {:>8}"
HEADER = ("client", "sdk-byte", "sdk-token", "rec-byte", "rec-token", "rec/sdk")


def _mark(marks: Marks, name: str) -> None:
    marks.setdefault(name, time.perf_counter())


def openai_chat(base: str, via: Via, marks: Marks) -> None:
    import openai

    http = httpx.Client(proxy=via.proxy, headers=via.headers, timeout=30)
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-bench", http_client=http, max_retries=0)
    marks["start"] = time.perf_counter()
    stream = sdk.chat.completions.create(
        model=MODEL_CHAT, stream=True, messages=[{"role": "user", "content": "hi"}]
    )
    for chunk in stream:
        _mark(marks, "byte")
        if any(c.delta.content for c in chunk.choices):
            _mark(marks, "token")


def openai_responses(base: str, via: Via, marks: Marks) -> None:
    import openai

    http = httpx.Client(proxy=via.proxy, headers=via.headers, timeout=30)
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-bench", http_client=http, max_retries=0)
    marks["start"] = time.perf_counter()
    for event in sdk.responses.create(model=MODEL_CHAT, input="hi", stream=True):
        _mark(marks, "byte")
        if event.type == "response.output_text.delta":
            _mark(marks, "token")


def anthropic_messages(base: str, via: Via, marks: Marks) -> None:
    import anthropic

    client = anthropic.DefaultHttpxClient(proxy=via.proxy, headers=via.headers, timeout=30)  # httpx2's
    sdk = anthropic.Anthropic(base_url=base, api_key="sk-ant-bench", http_client=client, max_retries=0)
    marks["start"] = time.perf_counter()
    messages = [{"role": "user", "content": "hi"}]
    for event in sdk.messages.create(model=MODEL_ANTHROPIC, max_tokens=16, messages=messages, stream=True):  # type: ignore[arg-type]
        _mark(marks, "byte")
        if event.type == "content_block_delta":
            _mark(marks, "token")


CLIENTS: dict[str, Client] = {
    "openai chat (SDK)": openai_chat,
    "openai responses (SDK)": openai_responses,
    "anthropic messages (SDK)": anthropic_messages,
}


def _recorded(ledger: Ledger, session: str) -> tuple[float, float]:
    answers = [e for e in wait_for(ledger, "session = :s", {"s": session}, 2) if e.kind == "http.response"]
    if len(answers) != 1 or answers[0].first_token_ms is None or answers[0].first_byte_ms is None:
        raise RuntimeError(f"the Ledger holds no timed answer for session {session}: not a figure")
    return answers[0].first_byte_ms, answers[0].first_token_ms


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.first_token", description=__doc__)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between opening and first token")
    parser.add_argument("--calls", type=int, default=5, help="streamed calls per client")
    args = parser.parse_args(argv)
    print(f"pause before the first content delta: {args.pause * 1000:.0f} ms; {args.calls} calls a client")
    print(ROW.format(*HEADER))
    with tempfile.TemporaryDirectory() as tmp, slow_model(pause=args.pause) as model:
        url = f"sqlite:///{Path(tmp) / 'l.db'}"
        with live_proxy(Path(tmp) / "home", url) as proxy:
            ledger = ledger_of(url, proxy.blobs_url)
            for name, client in CLIENTS.items():
                rows: list[tuple[float, float, float, float]] = []
                for _ in range(args.calls):
                    session, marks = uuid.uuid4().hex, Marks()
                    client(model.base, Via(proxy.url, {"X-Flightlog-Session": session}), marks)
                    byte, token = _recorded(ledger, session)
                    sdk_byte = (marks["byte"] - marks["start"]) * 1000
                    sdk_token = (marks["token"] - marks["start"]) * 1000
                    rows.append((sdk_byte, sdk_token, byte, token))
                med = [statistics.median(r[i] for r in rows) for i in range(4)]
                ratio = statistics.median(r[3] / r[1] for r in rows)
                print(ROW.format(name, *(f"{m:.1f}" for m in med), f"{ratio:.3f}"), flush=True)
            ledger.close()
    print("(ms from the call's start, medians; rec/sdk: the recorded first token over the client's own)")


if __name__ == "__main__":
    main()
