"""`first_token_ms` is the arrival of a streamed answer's first content delta, not of its first chunk.

A slow local model API sends each answer's opening events (OpenAI's role-only chunk, Anthropic's
`message_start`, the Responses API's `response.created`) at once and holds the first content delta
until the client, having read the opening, opens a gate. The proxy cannot have seen the first token
before the gate opened, so the recorded first token must come at least as long after the first byte
as the client waited between reading the opening and opening the gate: a causal check, no clock
budget. The first chunk (what the field used to hold) arrives before the client reads the opening.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from storage.events import StoredEvent
from storage.ledger import Ledger
from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.slow_model import MODEL_ANTHROPIC, MODEL_CHAT, SlowModel, slow_model


@dataclass(frozen=True)
class Via:
    """How a client reaches the proxy: its URL, and the headers that file the call under a session."""

    proxy: str
    headers: dict[str, str]


HELD = 0.05
"""Seconds the client waits, after reading the opening, before it lets the first token go."""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[LiveProxy, SlowModel, threading.Event, Ledger]]:
    gate = threading.Event()
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with slow_model(gate=gate) as model, live_proxy(tmp_path / "home", url) as proxy:
        ledger = ledger_of(url, proxy.blobs_url)
        yield proxy, model, gate, ledger
        ledger.close()


def _openai_chat(base: str, via: Via, opened: Callable[[], None]) -> None:
    import openai

    client = httpx.Client(proxy=via.proxy, headers=via.headers, timeout=10)
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test-not-a-key", http_client=client, max_retries=0)
    stream = sdk.chat.completions.create(
        model=MODEL_CHAT, stream=True, messages=[{"role": "user", "content": "hi"}]
    )
    text = ""
    for n, chunk in enumerate(stream):
        if n == 0:
            assert chunk.choices[0].delta.role == "assistant" and not chunk.choices[0].delta.content
            opened()
        text += "".join(c.delta.content or "" for c in chunk.choices)
    assert text == "Hello!"


def _openai_responses(base: str, via: Via, opened: Callable[[], None]) -> None:
    import openai

    client = httpx.Client(proxy=via.proxy, headers=via.headers, timeout=10)
    sdk = openai.OpenAI(base_url=f"{base}/v1", api_key="sk-test-not-a-key", http_client=client, max_retries=0)
    kinds = []
    for event in sdk.responses.create(model=MODEL_CHAT, input="hi", stream=True):
        if not kinds:
            assert event.type == "response.created"
            opened()
        kinds.append(event.type)
    assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"


def _anthropic(base: str, via: Via, opened: Callable[[], None]) -> None:
    import anthropic

    http = anthropic.DefaultHttpxClient(proxy=via.proxy, headers=via.headers, timeout=10)  # httpx2's
    sdk = anthropic.Anthropic(base_url=base, api_key="sk-ant-test-not-a-key", http_client=http, max_retries=0)
    kinds = []
    messages = [{"role": "user", "content": "hi"}]
    for event in sdk.messages.create(model=MODEL_ANTHROPIC, max_tokens=16, messages=messages, stream=True):  # type: ignore[arg-type]
        if not kinds:
            assert event.type == "message_start"
            opened()
        kinds.append(event.type)
    assert "content_block_delta" in kinds and kinds[-1] == "message_stop"


def _raw_chat(base: str, via: Via, opened: Callable[[], None]) -> None:
    """httpx by hand: the role-only chunk is its own first event."""
    body = json.dumps({"model": MODEL_CHAT, "stream": True, "messages": []})
    client = httpx.Client(proxy=via.proxy, headers=via.headers, timeout=10)
    with client, client.stream("POST", f"{base}/v1/chat/completions", content=body) as r:
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert json.loads(first[5:])["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        opened()
        assert any("[DONE]" in line for line in lines)


CLIENTS = {
    "openai chat (SDK)": (_openai_chat, MODEL_CHAT),
    "openai responses (SDK)": (_openai_responses, MODEL_CHAT),
    "anthropic messages (SDK)": (_anthropic, MODEL_ANTHROPIC),
    "openai chat (httpx)": (_raw_chat, MODEL_CHAT),
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_first_token_is_the_first_content_delta(
    world: tuple[LiveProxy, SlowModel, threading.Event, Ledger], name: str
) -> None:
    """For each client and API shape: the recorded first token comes no earlier than the first byte
    plus the time the client held the content back after reading the opening; the first byte stays
    the first byte (the head came before the opening, which the client read)."""
    proxy, model, gate, ledger = world
    run, expected_model = CLIENTS[name]
    session = uuid.uuid4().hex
    seen: dict[str, float] = {}

    def opened() -> None:
        seen["opening"] = time.time()
        time.sleep(HELD)
        gate.set()

    run(model.base, Via(proxy.url, {"X-Flightlog-Session": session}), opened)
    released = model.released[-1][1]
    answer = _answer(ledger, session)
    assert answer.model == expected_model, answer
    assert answer.first_byte_ms is not None and answer.first_token_ms is not None, answer
    held_ms = (released - seen["opening"]) * 1000
    assert held_ms >= HELD * 1000
    assert answer.first_token_ms >= answer.first_byte_ms + held_ms - 0.01, (answer, held_ms)
    assert answer.last_byte_ms is not None and answer.first_token_ms <= answer.last_byte_ms


def _answer(ledger: Ledger, session: str) -> StoredEvent:
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    answers = [e for e in events if e.kind == "http.response"]
    assert len(answers) == 1, events
    return answers[0]
