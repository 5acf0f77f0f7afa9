"""Model and token usage of AI calls, read from the recorded exchange.

Recognized (`formats.model_apis`): OpenAI chat completions, (legacy) completions, the responses API
and embeddings, Anthropic messages, and compatible servers on any host, streamed (server-sent events,
`formats.sse`) or not, content-encoded or not. Streamed usage comes from where the providers really
put it: OpenAI's final chunk when `stream_options.include_usage` is set, the responses API's
`response.completed` event, Anthropic's `message_start` and `message_delta` events. A streamed
answer that carries no usage gives tokens of None, never a made-up 0. The usage objects as sent are
kept (`Usage.raw`); the token details the providers price apart (cache reads, cache writes,
reasoning) are read from them by `details`, one place for every shape.

Pure functions over bytes; never raises on junk input: returns None.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from formats import codings, documents, sse
from formats.errors import CodingError, DecodeCapError
from formats.model_apis import api_of, provider_of


@dataclass(frozen=True, slots=True)
class Usage:
    """What one AI call used. Tokens are None when the answer did not say (e.g. a stream without usage).

    `tokens_in` counts every input token, cached or not (Anthropic's `cache_creation_input_tokens` and
    `cache_read_input_tokens` are added to `input_tokens`, like OpenAI's `prompt_tokens` includes its
    cached tokens); `cache_read` and `cache_write` say how many of them were read from or written to
    the provider's prompt cache, priced at their own rates, and `cache_write_1h` how many of the
    writes were kept for an hour (Anthropic's `ttl: 1h`, priced higher than its five-minute writes).
    `tokens_out` counts every output token; `reasoning` says how many of them were reasoning (priced
    as output). The details are None when the answer did not say. `raw` is the answer's usage object
    as sent (a stream's, later fields over earlier).
    """

    provider: str
    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    cache_write_1h: int | None = None


@dataclass(frozen=True, slots=True)
class Details:
    """The counts within `tokens_in` and `tokens_out` that providers price apart; None: not said."""

    cache_read: int | None = None
    cache_write: int | None = None
    reasoning: int | None = None
    cache_write_1h: int | None = None


@dataclass(frozen=True, slots=True)
class Found:
    """What an answer says of itself: its model, its tokens and its usage objects merged."""

    model: str | None
    tokens_in: int | None
    tokens_out: int | None
    raw: dict[str, Any] = field(default_factory=dict)


def extract_usage(
    url: str,
    request_body: bytes,
    response_body: bytes,
    response_content_type: str | None,
    response_content_encoding: str | None,
) -> Usage | None:
    """The usage of one AI call, or None when the exchange is not a recognized model API call."""
    try:
        return _extract(url, request_body, response_body, response_content_type, response_content_encoding)
    except Exception:  # junk in, nothing out: usage is a bonus, never a reason to lose an event
        return None


def _extract(
    url: str,
    request_body: bytes,
    response_body: bytes,
    content_type: str | None,
    content_encoding: str | None,
) -> Usage | None:
    api = api_of(url)
    if api is None:
        return None
    body = _decoded(response_body, content_encoding)
    if body is None:
        return None
    if sse.looks_like(body, content_type):
        found = from_events(stream_documents(body))
    else:
        answer = documents.parse_object(body)
        if not answer:
            return None
        found = from_object(answer)
    if found is None:
        return None
    request = documents.parse_object(request_body)
    requested_model = request.get("model") if isinstance(request.get("model"), str) else None
    more = details(found.raw)
    return Usage(
        provider_of(url, api),
        found.model or requested_model,
        found.tokens_in,
        found.tokens_out,
        found.raw,
        more.cache_read,
        more.cache_write,
        more.reasoning,
        more.cache_write_1h,
    )


def _nested(usage: dict[str, Any], outer: str, inner: str) -> int | None:
    obj = usage.get(outer)
    return _int(obj.get(inner)) if isinstance(obj, dict) else None


def details(usage: object) -> Details:
    """Cache reads, cache writes and reasoning tokens from any provider's usage object.

    Anthropic: `cache_read_input_tokens`, `cache_creation_input_tokens` (of them, those kept an hour:
    `cache_creation.ephemeral_1h_input_tokens`). OpenAI chat completions:
    `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`; the
    responses API: `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`.
    OpenAI has no cache writes (it does not charge for them): None there, not 0."""
    if not isinstance(usage, dict):
        return Details()
    read = _int(usage.get("cache_read_input_tokens"))
    if read is None:
        read = _nested(usage, "prompt_tokens_details", "cached_tokens")
    if read is None:
        read = _nested(usage, "input_tokens_details", "cached_tokens")
    reasoning = _nested(usage, "completion_tokens_details", "reasoning_tokens")
    if reasoning is None:
        reasoning = _nested(usage, "output_tokens_details", "reasoning_tokens")
    write = _int(usage.get("cache_creation_input_tokens"))
    hour = _nested(usage, "cache_creation", "ephemeral_1h_input_tokens")
    return Details(read, write, reasoning, None if hour is None or write is None else min(hour, write))


def requested_model(url: str, request_body: bytes) -> str | None:
    """The model a model API call's request named (None: not a model API call, or none named):
    what an error answer, which names none, is attributed to."""
    try:
        if api_of(url) is None:
            return None
        model = documents.parse_object(request_body).get("model")
    except Exception:  # junk in, nothing out
        return None
    return model if isinstance(model, str) and model else None


USAGE_CAP = 16 * 1024 * 1024
"""A model's answer decodes to far less than this: a body decoding past it is not one (and a
decompression bomb costs the writer this much memory at most, not `codings.READ_CAP`)."""


def _decoded(body: bytes, content_encoding: str | None) -> bytes | None:
    try:
        return codings.decode(body, content_encoding, cap=USAGE_CAP)
    except DecodeCapError:
        return None  # model answers are far smaller: not one
    except CodingError:
        return body  # the header lied; if this isn't plain JSON or events, parsing finds nothing


def stream_documents(body: bytes) -> list[Any]:
    """The JSON documents of an event stream's events (OpenAI's closing `[DONE]` and junk skipped)."""
    return [doc for event in sse.events(body) if (doc := documents.parse(event.data)) is not None]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _sum(*values: object) -> int | None:
    ints = [_int(v) for v in values]
    present = [v for v in ints if v is not None]
    return sum(present) if present else None


def _input(usage: dict[str, Any]) -> int | None:
    return _sum(
        usage.get("input_tokens"),
        usage.get("cache_creation_input_tokens"),
        usage.get("cache_read_input_tokens"),
    )


def tokens(usage: object) -> tuple[int | None, int | None] | None:
    """(in, out) from any of the providers' usage objects, or None when it isn't one."""
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # chat, completions, embeddings
        tokens_out = _int(usage.get("completion_tokens"))
        if tokens_out is None and "completion_tokens" not in usage:
            tokens_out = 0  # embeddings: no output tokens
        return _int(usage.get("prompt_tokens")), tokens_out
    if "input_tokens" in usage or "output_tokens" in usage:  # responses API, Anthropic
        return _input(usage), _int(usage.get("output_tokens"))
    return None


def _model(obj: dict[str, Any]) -> str | None:
    model = obj.get("model")
    return model if isinstance(model, str) and model else None


def from_object(answer: dict[str, Any]) -> Found | None:
    """A whole (not streamed) answer: the shapes of every API keep `model` and `usage` on top."""
    if "error" in answer and "usage" not in answer:
        return None
    usage = answer.get("usage")
    found = tokens(usage)
    model = _model(answer)
    if found is None:
        return None if model is None else Found(model, None, None)
    return Found(model, found[0], found[1], dict(usage) if isinstance(usage, dict) else {})


def from_events(events: Iterable[Any]) -> Found | None:
    """A streamed answer: OpenAI chunks, responses API events or Anthropic events."""
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    raw: dict[str, Any] = {}
    seen = False
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        usage: object = None
        if kind == "message_start" and isinstance(event.get("message"), dict):  # Anthropic
            seen = True
            message = event["message"]
            model = _model(message) or model
            usage = message.get("usage")
            found = tokens(usage)
            if found:
                tokens_in, tokens_out = found[0], found[1] if found[1] is not None else tokens_out
        elif kind == "message_delta":  # Anthropic: cumulative counts; input only in newer versions
            seen = True
            usage = event.get("usage")
            if isinstance(usage, dict):
                if _int(usage.get("output_tokens")) is not None:
                    tokens_out = _int(usage.get("output_tokens"))
                if _int(usage.get("input_tokens")) is not None:
                    tokens_in = _input(usage)
        elif (
            isinstance(kind, str) and kind.startswith("response.") and isinstance(event.get("response"), dict)
        ):
            seen = True  # responses API: created / in_progress / completed / incomplete / failed
            response = event["response"]
            model = _model(response) or model
            usage = response.get("usage")
            found = tokens(usage)
            if found:
                tokens_in, tokens_out = found
        elif "choices" in event or event.get("object") in ("chat.completion.chunk", "text_completion"):
            seen = True  # OpenAI chat chunks; usage only on the final one with include_usage
            model = _model(event) or model
            usage = event.get("usage")
            found = tokens(usage)
            if found:
                tokens_in, tokens_out = found
        if isinstance(usage, dict):
            raw.update(usage)
    if not seen:
        return None
    return Found(model, tokens_in, tokens_out, raw)
