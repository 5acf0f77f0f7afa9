"""Every usage shape the providers send becomes the same Ledger columns: `tokens_in` (every input
token), `tokens_out` (every output token), and of them `cache_read_tokens`, `cache_write_tokens` and
`reasoning_tokens` (None where the answer does not say), through the one path the writer takes
(`recording.spent.usage_of`, then `recording.events.response_event`). An error answer is filed
under the model its request named, with no tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest

from formats.usage import extract_usage
from recording.events import Processing, response_event, usage_of
from recording.prices import PriceTable
from recording.records import Exchange, ResponseRecord
from tests.capture.cached_apis import anthropic_answer, chat_answer, responses_answer

ANTHROPIC = "https://api.anthropic.com/v1/messages"
CHAT = "https://api.openai.com/v1/chat/completions"
RESPONSES = "https://api.openai.com/v1/responses"
EMBEDDINGS = "https://api.openai.com/v1/embeddings"


def _sse(events: list[dict[str, Any]]) -> tuple[str, bytes]:
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    return "text/event-stream", body


def _json(doc: dict[str, Any]) -> tuple[str, bytes]:
    return "application/json", json.dumps(doc).encode()


def _anthropic_usage(created: int, read: int, out: int) -> dict[str, int]:
    return {"input_tokens": 5, "cache_creation_input_tokens": created, "cache_read_input_tokens": read,
            "output_tokens": out}  # fmt: skip


NEWER_ANTHROPIC_STREAM = _sse([
    {"type": "message_start", "message": {"model": "claude-sonnet-4-5", "usage": _anthropic_usage(0, 0, 1)}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": _anthropic_usage(70, 900, 30)},
])  # fmt: skip
"""Newer Anthropic streams restate every count, cumulatively, on `message_delta`: the last word wins."""

SHAPES: list[tuple[str, str, tuple[str, bytes], tuple[int | None, ...]]] = [
    # (case, url, (content type, body), (tokens_in, tokens_out, cache_read, cache_write, reasoning))
    ("anthropic", ANTHROPIC, anthropic_answer({"model": "claude-sonnet-4-5"}),
     (23012, 40, 20000, 3000, None)),
    ("anthropic stream", ANTHROPIC, anthropic_answer({"stream": True}), (23012, 40, 20000, 3000, None)),
    ("anthropic stream, counts on delta", ANTHROPIC, NEWER_ANTHROPIC_STREAM, (975, 30, 900, 70, None)),
    ("anthropic, no cache fields", ANTHROPIC, _json({"model": "claude-sonnet-4-5", "usage": {
        "input_tokens": 9, "output_tokens": 4}}), (9, 4, None, None, None)),
    ("openai chat", CHAT, chat_answer({"model": "gpt-5"}), (2000, 300, 1536, None, 256)),
    ("openai chat stream", CHAT, chat_answer({"model": "gpt-5", "stream": True}),
     (2000, 300, 1536, None, 256)),
    ("openai chat, no details", CHAT, _json({"model": "gpt-4o", "usage": {
        "prompt_tokens": 19, "completion_tokens": 10}}), (19, 10, None, None, None)),
    ("openai chat, reasoning only", CHAT, _json({"model": "o3", "usage": {
        "prompt_tokens": 19, "completion_tokens": 100,
        "completion_tokens_details": {"reasoning_tokens": 64}}}),
     (19, 100, None, None, 64)),
    ("responses", RESPONSES, responses_answer({"model": "gpt-5"}), (5000, 700, 4096, None, 640)),
    ("responses stream", RESPONSES, responses_answer({"model": "gpt-5", "stream": True}),
     (5000, 700, 4096, None, 640)),
    ("embeddings", EMBEDDINGS, _json({"model": "text-embedding-3-small", "usage": {
        "prompt_tokens": 8, "total_tokens": 8}}), (8, 0, None, None, None)),
    ("details of the wrong type", CHAT, _json({"model": "gpt-4o", "usage": {
        "prompt_tokens": 19, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": "many"},
        "completion_tokens_details": [1]}}), (19, 10, None, None, None)),
]  # fmt: skip


def _event(url: str, answer: tuple[str, bytes], status: int = 200, request: bytes = b"{}") -> Any:
    proc = Processing(extract_usage=extract_usage, prices=PriceTable())
    content_type, body = answer
    ex = Exchange("0190f5c2-0000-7000-8000-000000000001", "out", "POST", url, "api.example.com")
    rec = ResponseRecord(
        ex, 1.0, status, b"HTTP/1.1 200 OK\r\n\r\n", body, content_type, request_body=request
    )
    return response_event(proc, rec, body, body_names=frozenset(), usage=usage_of(proc, rec, body),
                          collector="t", seq=1)  # fmt: skip


@pytest.mark.parametrize(("case", "url", "answer", "columns"), SHAPES, ids=[s[0] for s in SHAPES])
def test_usage_shapes_become_the_same_columns(
    case: str, url: str, answer: tuple[str, bytes], columns: tuple[int | None, ...]
) -> None:
    """Each shape, streamed or not, fills the token columns as the table says, and is priced."""
    e = _event(url, answer)
    got = (e.tokens_in, e.tokens_out, e.cache_read_tokens, e.cache_write_tokens, e.reasoning_tokens)
    assert got == columns, case
    assert e.model and e.cost_usd is not None, case


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (429, _json({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})),
        (500, ("text/plain", b"upstream broke")),
        (529, _json({"type": "error", "error": {"type": "overloaded_error"}})),
    ],
)
def test_an_error_answer_is_the_model_its_request_named(status: int, answer: tuple[str, bytes]) -> None:
    """An error answer names no model: it is filed under the request's, with no tokens and no cost."""
    e = _event(ANTHROPIC, answer, status, request=b'{"model": "claude-sonnet-4-5", "max_tokens": 5}')
    assert (e.status, e.model, e.tokens_in, e.tokens_out, e.cost_usd) == (
        status,
        "claude-sonnet-4-5",
        *[None] * 3,
    )
    assert e.first_token_ms is None


def test_no_model_api_no_model() -> None:
    """A call that is not a model API's gets no model, whatever its request body says."""
    e = _event("https://example.com/upload", _json({"ok": True}), 429, request=b'{"model": "x"}')
    assert (e.model, e.tokens_in, e.cost_usd) == (None, None, None)


def test_a_success_that_is_no_model_answer_claims_no_model() -> None:
    """A 200 on a model path whose body is no model answer (unreadable, not JSON) gets no model: only
    error answers borrow their request's."""
    e = _event(CHAT, ("application/json", b"\x00not json"), 200, request=b'{"model": "gpt-4o"}')
    assert (e.model, e.tokens_in, e.cost_usd) == (None, None, None)


SONNET = "claude-sonnet-4-5"


def _hour_usage(five: int, hour: int) -> dict[str, Any]:
    return {"input_tokens": 12, "cache_creation_input_tokens": five + hour, "cache_read_input_tokens": 20000,
            "cache_creation": {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour},
            "output_tokens": 40}  # fmt: skip


HOUR_SHAPES: list[tuple[str, tuple[str, bytes], int | None]] = [
    ("answer", _json({"model": "claude-sonnet-4-5", "usage": _hour_usage(1000, 2000)}), 2000),
    ("stream", _sse([
        {"type": "message_start", "message": {"model": SONNET, "usage": _hour_usage(1000, 2000)}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 40}},
    ]), 2000),
    ("stream, counts restated on delta", _sse([
        {"type": "message_start", "message": {"model": SONNET, "usage": _hour_usage(0, 0)}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": _hour_usage(1000, 2000)},
    ]), 2000),
    ("five-minute writes only", _json({"model": "claude-sonnet-4-5", "usage": _hour_usage(3000, 0)}), 0),
    ("no ttl said", anthropic_answer({"model": "claude-sonnet-4-5"}), None),
]  # fmt: skip


@pytest.mark.parametrize(("case", "answer", "hour"), HOUR_SHAPES, ids=[s[0] for s in HOUR_SHAPES])
def test_cache_writes_kept_an_hour_are_counted_and_priced_at_the_hour_rate(
    case: str, answer: tuple[str, bytes], hour: int | None
) -> None:
    """Anthropic says which of its cache writes are kept an hour (`cache_creation`'s
    `ephemeral_1h_input_tokens`) and prices those at twice the input rate, five-minute ones at 1.25
    times: the column holds the hour's share (None where the answer did not say) and the cost is the
    provider's formula (Sonnet 4.5: input $3, output $15, cache read $0.30, five-minute write $3.75,
    one-hour write $6 per million)."""
    e = _event(ANTHROPIC, answer)
    assert (e.tokens_in, e.cache_read_tokens, e.cache_write_tokens) == (23012, 20000, 3000), case
    assert e.cache_write_1h_tokens == hour, case
    hours = hour or 0
    expected = (12 * 3 + 20000 * 0.3 + (3000 - hours) * 3.75 + hours * 6 + 40 * 15) / 1e6
    assert e.cost_usd == pytest.approx(expected), case
