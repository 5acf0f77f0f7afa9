"""Usage of AI calls from recorded exchanges, on payloads shaped like the real APIs' answers."""

from __future__ import annotations

import gzip
import json

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.usage import Usage, extract_usage

OPENAI = "https://api.openai.com/v1"
ANTHROPIC = "https://api.anthropic.com/v1"
CHAT_REQUEST = json.dumps(
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "Say hi"}], "stream": False}
).encode()

CHAT = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hi!", "refusal": None, "annotations": []},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 19,
        "completion_tokens": 10,
        "total_tokens": 29,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    },
    "service_tier": "default",
    "system_fingerprint": "fp_fc9f1d7035",
}


def _sse(events: list[tuple[str | None, object]]) -> bytes:
    """An event stream as the providers send it: optional `event:` line, `data:` line, blank line."""
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        body = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
        out.append(f"{head}data: {body}\n\n")
    return "".join(out).encode()


def _chunk(delta: dict[str, object], finish: str | None = None, usage: object = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


def _chat_stream(include_usage: bool) -> bytes:
    events: list[tuple[str | None, object]] = [
        (None, _chunk({"role": "assistant", "content": "", "refusal": None})),
        (None, _chunk({"content": "Hel"})),
        (None, _chunk({"content": "lo"})),
        (None, _chunk({}, finish="stop")),
    ]
    if include_usage:
        final = _chunk({}, usage={"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11})
        final["choices"] = []
        events.append((None, final))
    events.append((None, "[DONE]"))
    return _sse(events)


def test_openai_chat_completion() -> None:
    """A plain chat completion: model from the answer (dated), tokens from `usage`."""
    usage = extract_usage(
        f"{OPENAI}/chat/completions", CHAT_REQUEST, json.dumps(CHAT).encode(), "application/json", None
    )
    assert usage == Usage("openai", "gpt-4o-2024-08-06", 19, 10, cache_read=0, reasoning=0)


def test_openai_chat_stream_with_include_usage() -> None:
    """Streamed with `stream_options.include_usage`: the final chunk (empty choices) carries usage."""
    request = json.dumps({"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True}})
    usage = extract_usage(
        f"{OPENAI}/chat/completions", request.encode(), _chat_stream(True), "text/event-stream", None
    )
    assert usage == Usage("openai", "gpt-4o-mini-2024-07-18", 9, 2)


def test_openai_chat_stream_without_usage_gives_unknown_tokens_not_zero() -> None:
    """A stream that never said its usage is recorded with the model and tokens of None, not 0."""
    usage = extract_usage(
        f"{OPENAI}/chat/completions",
        b'{"model":"gpt-4o-mini"}',
        _chat_stream(False),
        "text/event-stream",
        None,
    )
    assert usage == Usage("openai", "gpt-4o-mini-2024-07-18", None, None)


def test_responses_api_plain_and_streamed() -> None:
    """The responses API: `usage.input_tokens/output_tokens`, streamed in `response.completed`."""
    response = {
        "id": "resp_67ccd2bed1ec8190b14f964abc054267",
        "object": "response",
        "created_at": 1741476542,
        "status": "completed",
        "error": None,
        "model": "gpt-4.1-2025-04-14",
        "output": [
            {
                "type": "message",
                "id": "msg_67ccd2bf17f0819081ff3bb2cf6508e6",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "In a peaceful grove...", "annotations": []}],
            }
        ],
        "usage": {
            "input_tokens": 36,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 87,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 123,
        },
    }
    url = f"{OPENAI}/responses"
    assert extract_usage(url, b"{}", json.dumps(response).encode(), "application/json", None) == Usage(
        "openai", "gpt-4.1-2025-04-14", 36, 87, cache_read=0, reasoning=0
    )
    created = {**response, "status": "in_progress", "output": [], "usage": None}
    stream = _sse(
        [
            ("response.created", {"type": "response.created", "sequence_number": 0, "response": created}),
            (
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "sequence_number": 4,
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "In a",
                },
            ),
            (
                "response.completed",
                {"type": "response.completed", "sequence_number": 9, "response": response},
            ),
        ]
    )
    assert extract_usage(
        url, b'{"model":"gpt-4.1"}', stream, "text/event-stream; charset=utf-8", None
    ) == Usage("openai", "gpt-4.1-2025-04-14", 36, 87, cache_read=0, reasoning=0)


def test_embeddings() -> None:
    """Embeddings have input tokens only: tokens_out is 0."""
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.0023064255, -0.009327292]}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 8, "total_tokens": 8},
    }
    usage = extract_usage(
        f"{OPENAI}/embeddings", b'{"input":"hi"}', json.dumps(answer).encode(), "application/json", None
    )
    assert usage == Usage("openai", "text-embedding-3-small", 8, 0)


ANTHROPIC_MESSAGE = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Hi! My name is Claude."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 2095,
        "output_tokens": 503,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 5,
        "service_tier": "standard",
    },
}


def test_anthropic_message() -> None:
    """Anthropic messages: input tokens include cache writes and reads; output tokens as stated."""
    usage = extract_usage(
        f"{ANTHROPIC}/messages",
        b'{"model":"claude-sonnet-4-5","max_tokens":1024}',
        json.dumps(ANTHROPIC_MESSAGE).encode(),
        "application/json",
        None,
    )
    assert usage == Usage("anthropic", "claude-sonnet-4-5-20250929", 2200, 503, cache_read=5, cache_write=100)


def _anthropic_stream(complete: bool) -> bytes:
    start = {
        **ANTHROPIC_MESSAGE,
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 25, "output_tokens": 1},
    }
    events: list[tuple[str | None, object]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
        ),
    ]
    if complete:
        events += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 15},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    return _sse(events)


def test_anthropic_stream() -> None:
    """Anthropic streams: input from message_start, output from the last message_delta (cumulative)."""
    usage = extract_usage(f"{ANTHROPIC}/messages", b"{}", _anthropic_stream(True), "text/event-stream", None)
    assert usage == Usage("anthropic", "claude-sonnet-4-5-20250929", 25, 15)


def test_anthropic_stream_cut_short_keeps_what_arrived() -> None:
    """A stream the client left early still gives the model and the counts that had arrived."""
    usage = extract_usage(f"{ANTHROPIC}/messages", b"{}", _anthropic_stream(False), "text/event-stream", None)
    assert usage == Usage("anthropic", "claude-sonnet-4-5-20250929", 25, 1)


def test_openai_compatible_server_on_any_host_with_crlf_events() -> None:
    """A local OpenAI-compatible server (e.g. Ollama, vLLM) is recognized by path and shape."""
    stream = _chat_stream(True).replace(b"\n", b"\r\n")
    usage = extract_usage(
        "http://127.0.0.1:11434/v1/chat/completions", b'{"model":"llama3.2"}', stream, None, None
    )
    assert usage == Usage("openai-compatible", "gpt-4o-mini-2024-07-18", 9, 2)
    answer = {**CHAT, "model": "", "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}
    usage = extract_usage(
        "http://llm.internal:8000/openai/deployments/x/chat/completions?api-version=2024-10-21",
        b'{"model":"llama3.2"}',
        json.dumps(answer).encode(),
        "application/json",
        None,
    )
    assert usage == Usage("openai-compatible", "llama3.2", 3, 4)  # model from the request as a fallback


def test_content_encoded_answers() -> None:
    """gzip- and br-encoded answers (as recorded, raw) are decoded first."""
    body = json.dumps(CHAT).encode()
    for coding, compress in (("gzip", gzip.compress), ("br", brotli.compress)):
        usage = extract_usage(f"{OPENAI}/chat/completions", b"", compress(body), "application/json", coding)
        assert usage == Usage("openai", "gpt-4o-2024-08-06", 19, 10, cache_read=0, reasoning=0)


def test_not_an_ai_call_or_an_error_answer_is_none() -> None:
    """Other paths, error answers and junk give None: no usage is invented."""
    body = json.dumps(CHAT).encode()
    assert extract_usage("https://api.openai.com/v1/models", b"", body, "application/json", None) is None
    error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    assert (
        extract_usage(f"{OPENAI}/chat/completions", b"", json.dumps(error).encode(), "application/json", None)
        is None
    )
    assert extract_usage(f"{OPENAI}/chat/completions", b"", b"<html>502</html>", "text/html", None) is None
    assert extract_usage(f"{OPENAI}/chat/completions", b"", b"\x1f\x8b junk", None, "gzip") is None


@settings(max_examples=300)
@given(
    path=st.sampled_from(["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings", "/x"]),
    request=st.binary(max_size=200),
    response=st.one_of(
        st.binary(max_size=500),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(
                        ["usage", "model", "type", "message", "response", "choices", "input_tokens"]
                    ),
                    inner,
                    max_size=5,
                )
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
    ),
    content_type=st.sampled_from([None, "application/json", "text/event-stream"]),
    coding=st.sampled_from([None, "gzip", "br", "zstd", "bogus"]),
)
def test_never_raises_on_junk(
    path: str, request: bytes, response: bytes, content_type: str | None, coding: str | None
) -> None:
    """Whatever the bytes, extract_usage returns a Usage or None and never raises."""
    result = extract_usage("https://h" + path, request, response, content_type, coding)
    assert result is None or isinstance(result, Usage)


def test_the_usage_objects_as_sent_are_kept() -> None:
    """`raw` keeps what the tokens were read from, so cached and reasoning tokens can be read later:
    a whole answer's usage object, a stream's merged (Anthropic's later output count over the first)."""
    whole = extract_usage(
        f"{OPENAI}/chat/completions", b"", json.dumps(CHAT).encode(), "application/json", None
    )
    assert whole is not None and whole.raw == CHAT["usage"]
    assert whole.raw["prompt_tokens_details"] == {"cached_tokens": 0, "audio_tokens": 0}
    streamed = extract_usage(
        f"{ANTHROPIC}/messages", b"{}", _anthropic_stream(True), "text/event-stream", None
    )
    assert streamed is not None and streamed.raw == {"input_tokens": 25, "output_tokens": 15}


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"], ids=["CRLF", "CR"])
def test_streams_read_alike_with_every_line_ending(ending: bytes) -> None:
    """Each API's stream gives the same usage spelled with CRLF or bare CR line ends as with LF."""
    for url, stream in (
        (f"{OPENAI}/chat/completions", _chat_stream(True)),
        (f"{ANTHROPIC}/messages", _anthropic_stream(True)),
    ):
        lf = extract_usage(url, b"{}", stream, "text/event-stream", None)
        assert lf is not None and lf.tokens_out is not None
        assert extract_usage(url, b"{}", stream.replace(b"\n", ending), "text/event-stream", None) == lf


def test_an_event_not_closed_by_its_blank_line_is_not_read() -> None:
    """As the event-stream spec says, a last event without its blank line is discarded: a stream that
    stops after the line of OpenAI's usage chunk, before its blank line, has no usage (it used to be
    read); the blank line makes it an event."""
    whole = _chat_stream(True)
    last = whole.split(b"\n\n")[-3] + b"\n"  # the usage chunk, its line ended but not its event
    body = whole[: whole.index(last)] + last
    usage = extract_usage(f"{OPENAI}/chat/completions", b"{}", body, "text/event-stream", None)
    assert usage == Usage("openai", "gpt-4o-mini-2024-07-18", None, None)
    closed = extract_usage(f"{OPENAI}/chat/completions", b"{}", body + b"\n", "text/event-stream", None)
    assert closed == Usage("openai", "gpt-4o-mini-2024-07-18", 9, 2)


def test_an_answer_decoding_past_the_cap_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer that decodes to more than usage's cap gives no usage (and is never held whole)."""
    from formats import usage

    monkeypatch.setattr(usage, "USAGE_CAP", 1000)
    body = json.dumps({**CHAT, "padding": "x" * 5000}).encode()
    assert extract_usage(f"{OPENAI}/chat/completions", b"", gzip.compress(body), None, "gzip") is None
    monkeypatch.setattr(usage, "USAGE_CAP", 1 << 20)
    assert extract_usage(f"{OPENAI}/chat/completions", b"", gzip.compress(body), None, "gzip") is not None
