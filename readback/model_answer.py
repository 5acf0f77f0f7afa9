"""What a recorded model call says of itself beyond the Ledger's columns: the answer's id, model,
finish reasons, the tools it asked for, and its cache and reasoning token counts.

The OTLP spans need these (`gen_ai.response.id`, `gen_ai.response.finish_reasons`, the cache
attributes), and a tool span is nested under the model call that named that tool. They are read
from the stored (redacted) bodies, streamed or not, with `formats.answers` and `formats.usage`, so
a span says what the Ledger's own readers say. Pure functions over bytes; junk gives empty values.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from formats import answers, codings, documents, sse, usage
from formats.errors import CodingError
from formats.model_apis import Api

READ_CAP: Final = 32 * 1024 * 1024
"""Decoded bytes read of one body: model answers are far smaller."""


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """The answer's own words: all empty or None when the body does not say."""

    response_id: str | None = None
    response_model: str | None = None
    finish_reasons: tuple[str, ...] = ()
    tools_asked: tuple[str, ...] = ()
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None


def decoded(body: bytes, content_encoding: str | None) -> bytes:
    """A stored body without its content-encoding (as it is when the header lied or names none)."""
    try:
        return codings.decode(body, content_encoding, cap=READ_CAP)
    except CodingError:
        return body


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _first_int(*values: object) -> int | None:
    return next((v for v in map(_int, values) if v is not None), None)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _documents(body: bytes, content_type: str | None) -> list[Any]:
    if sse.looks_like(body, content_type):
        return usage.stream_documents(body)
    doc = documents.parse(body)
    return [doc] if doc is not None else []


def _first_str(values: Iterable[object]) -> str | None:
    return next((v for v in values if isinstance(v, str) and v), None)


def _objects(docs: list[Any]) -> list[dict[str, Any]]:
    """Every place an answer keeps its id and model: the body, a chunk, `message`, `response`."""
    found: list[dict[str, Any]] = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        found.append(doc)
        for inner in ("message", "response"):
            if isinstance(doc.get(inner), dict):
                found.append(doc[inner])
    return found


def _usage_counts(docs: list[dict[str, Any]]) -> tuple[int | None, int | None, int | None]:
    """(cache read, cache write, reasoning) from any provider's usage objects (later over earlier)."""
    read = write = reasoning = None
    for obj in docs:
        u = obj.get("usage")
        if not isinstance(u, dict):
            continue
        prompt = _dict(u.get("prompt_tokens_details")) or _dict(u.get("input_tokens_details"))
        completion = _dict(u.get("completion_tokens_details")) or _dict(u.get("output_tokens_details"))
        read = _first_int(u.get("cache_read_input_tokens"), prompt.get("cached_tokens"), read)
        write = _first_int(u.get("cache_creation_input_tokens"), write)
        reasoning = _first_int(completion.get("reasoning_tokens"), reasoning)
    return read, write, reasoning


def read_model_answer(api: Api | None, body: bytes, content_type: str | None) -> ModelAnswer:
    """What the decoded answer `body` of a call to `api` says (a ModelAnswer of Nones when nothing)."""
    if api is None or not body:
        return ModelAnswer()
    objects = _objects(_documents(body, content_type))
    read, write, reasoning = _usage_counts(objects)
    reassembled = answers.read_answer(api, body, content_type)
    stop = reassembled.stop if reassembled is not None else ""
    asked = tuple(dict.fromkeys(c.name for c in reassembled.tool_calls)) if reassembled else ()
    return ModelAnswer(
        response_id=_first_str(o.get("id") for o in objects),
        response_model=_first_str(o.get("model") for o in objects),
        finish_reasons=(stop,) if stop else (),
        tools_asked=asked,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
    )


def request_model(body: bytes) -> str | None:
    """The `model` a request body names (None when it is not JSON or names none)."""
    doc = documents.parse(body)
    return _first_str([doc.get("model")]) if isinstance(doc, dict) else None
