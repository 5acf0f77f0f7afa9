"""Model and token usage of AI calls, read from the recorded exchange.

Recognized: OpenAI chat completions, (legacy) completions, the responses API and embeddings, Anthropic
messages, and OpenAI- or Anthropic-compatible servers on any host (same paths, same body shapes),
streamed (server-sent events) or not, content-encoded or not. Streamed usage comes from where the
providers really put it: OpenAI's final chunk when `stream_options.include_usage` is set, the
responses API's `response.completed` event, Anthropic's `message_start` and `message_delta` events.
A streamed answer that carries no usage gives tokens of None, never a made-up 0.

Pure functions over bytes; never raises on junk input: returns None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from recording.encodings import decode
from recording.errors import EncodingError

#: Path endings of the model APIs and the API shape each one answers with.
_ENDPOINTS = (
    ("/chat/completions", "openai"),
    ("/completions", "openai"),
    ("/responses", "openai"),
    ("/embeddings", "openai"),
    ("/messages", "anthropic"),
)
_OFFICIAL = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}

#: Bodies larger than this (decoded) are not parsed for usage: model answers are far smaller.
MAX_DECODED = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Usage:
    """What one AI call used. Tokens are None when the answer did not say (e.g. a stream without usage).

    `tokens_in` counts every input token, cached or not (Anthropic's `cache_creation_input_tokens` and
    `cache_read_input_tokens` are added to `input_tokens`, like OpenAI's `prompt_tokens` includes its
    cached tokens).
    """

    provider: str
    model: str | None
    tokens_in: int | None
    tokens_out: int | None


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
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    shape = next((s for suffix, s in _ENDPOINTS if path.endswith(suffix)), None)
    if shape is None:
        return None
    host = (parts.hostname or "").lower()
    provider = _OFFICIAL.get(host) or f"{shape}-compatible"
    body = _decoded(response_body, content_encoding)
    if body is None:
        return None
    request = _json_object(request_body)
    requested_model = request.get("model") if isinstance(request.get("model"), str) else None
    if _is_sse(body, content_type):
        found = _from_events(_sse_data(body))
    else:
        answer = _json_object(body)
        if not answer:
            return None
        found = _from_object(answer)
    if found is None:
        return None
    model, tokens_in, tokens_out = found
    return Usage(provider, model or requested_model, tokens_in, tokens_out)


def _decoded(body: bytes, content_encoding: str | None) -> bytes | None:
    if not content_encoding:
        return body
    try:
        out = decode(body, content_encoding)
    except EncodingError:
        return body  # the header lied; if this isn't plain JSON or events, parsing finds nothing
    return out if len(out) <= MAX_DECODED else None


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _is_sse(body: bytes, content_type: str | None) -> bool:
    if content_type and "text/event-stream" in content_type.lower():
        return True
    start = body.lstrip()[:6]
    return start.startswith((b"data:", b"event:", b":"))


def _sse_data(body: bytes) -> list[dict[str, Any]]:
    """The JSON objects of an event stream's `data:` fields (multi-line data joined, per the spec)."""
    events: list[dict[str, Any]] = []
    data: list[bytes] = []
    for line in [*body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"), b""]:
        if not line:
            if data:
                payload = b"\n".join(data)
                data = []
                if payload.strip() != b"[DONE]":
                    obj = _json_object(payload)
                    if obj:
                        events.append(obj)
            continue
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    return events


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _sum(*values: object) -> int | None:
    ints = [_int(v) for v in values]
    present = [v for v in ints if v is not None]
    return sum(present) if present else None


def _tokens(usage: object) -> tuple[int | None, int | None] | None:
    """(in, out) from any of the providers' usage objects, or None when it isn't one."""
    if not isinstance(usage, dict):
        return None
    if "prompt_tokens" in usage or "completion_tokens" in usage:  # chat, completions, embeddings
        tokens_out = _int(usage.get("completion_tokens"))
        if tokens_out is None and "completion_tokens" not in usage:
            tokens_out = 0  # embeddings: no output tokens
        return _int(usage.get("prompt_tokens")), tokens_out
    if "input_tokens" in usage or "output_tokens" in usage:  # responses API, Anthropic
        tokens_in = _sum(
            usage.get("input_tokens"),
            usage.get("cache_creation_input_tokens"),
            usage.get("cache_read_input_tokens"),
        )
        return tokens_in, _int(usage.get("output_tokens"))
    return None


def _model(obj: dict[str, Any]) -> str | None:
    model = obj.get("model")
    return model if isinstance(model, str) and model else None


def _from_object(answer: dict[str, Any]) -> tuple[str | None, int | None, int | None] | None:
    """A whole (not streamed) answer: the shapes of all four APIs keep `model` and `usage` on top."""
    if "error" in answer and "usage" not in answer:
        return None
    tokens = _tokens(answer.get("usage"))
    model = _model(answer)
    if tokens is None:
        if model is None:
            return None
        return model, None, None
    return model, tokens[0], tokens[1]


def _from_events(events: list[dict[str, Any]]) -> tuple[str | None, int | None, int | None] | None:
    """A streamed answer: OpenAI chunks, responses API events or Anthropic events."""
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    seen = False
    for event in events:
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), dict):  # Anthropic
            seen = True
            message = event["message"]
            model = _model(message) or model
            found = _tokens(message.get("usage"))
            if found:
                tokens_in, tokens_out = found[0], found[1] if found[1] is not None else tokens_out
        elif kind == "message_delta":  # Anthropic: cumulative counts; input only in newer versions
            seen = True
            usage = event.get("usage")
            if isinstance(usage, dict):
                if _int(usage.get("output_tokens")) is not None:
                    tokens_out = _int(usage.get("output_tokens"))
                if _int(usage.get("input_tokens")) is not None:
                    tokens_in = _sum(
                        usage.get("input_tokens"),
                        usage.get("cache_creation_input_tokens"),
                        usage.get("cache_read_input_tokens"),
                    )
        elif (
            isinstance(kind, str) and kind.startswith("response.") and isinstance(event.get("response"), dict)
        ):
            seen = True  # responses API: created / in_progress / completed / incomplete / failed
            response = event["response"]
            model = _model(response) or model
            found = _tokens(response.get("usage"))
            if found:
                tokens_in, tokens_out = found
        elif "choices" in event or event.get("object") in ("chat.completion.chunk", "text_completion"):
            seen = True  # OpenAI chat chunks; usage only on the final one with include_usage
            model = _model(event) or model
            found = _tokens(event.get("usage"))
            if found:
                tokens_in, tokens_out = found
    if not seen:
        return None
    return model, tokens_in, tokens_out
