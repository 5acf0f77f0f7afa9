"""A model's answer reassembled: the final text and tool calls of a whole body, or of a stream of
server-sent events (`formats.sse`) put back together (OpenAI chat and responses, Anthropic messages),
so both forms of one answer read alike; a stream without its closing event is marked incomplete.
Its tokens are read as the Ledger's columns are (`formats.usage`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final

from formats import documents, sse, usage
from formats.model_apis import Api

DONE: Final = b"[DONE]"
"""The data of OpenAI's last event: the stream's end, not a document."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: str
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the model said, reassembled: final text, tool calls, why it stopped, and its usage."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    streamed: bool = False
    events: int = 0
    """Server-sent events read (a streamed answer)."""
    complete: bool = True
    """False when the stream ended before its closing event."""


def content_text(content: Any) -> str:
    """Text of a content field: a string, or the text parts of a list of parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                if "text" in part and isinstance(part["text"], str):
                    parts.append(part["text"])
                elif part.get("type") in ("image_url", "image", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    if isinstance(content, dict):
        return content_text([content])
    return str(content)


def args_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# --- answers -----------------------------------------------------------------------------------------


def _openai_chat_answer(body: dict[str, Any]) -> Answer:
    choice = (body.get("choices") or [{}])[0] or {}
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(str(f.get("name", "")), args_text(f.get("arguments", "")), str(c.get("id", "")))
        for c in message.get("tool_calls") or []
        for f in [c.get("function") or {}]
    )
    return Answer(content_text(message.get("content")), calls, str(choice.get("finish_reason") or ""))


def _openai_chat_stream(chunks: list[Any], done: bool) -> Answer:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    stop = ""
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for c in delta.get("tool_calls") or []:
                call = calls.setdefault(int(c.get("index", 0)), {"id": "", "name": "", "arguments": ""})
                f = c.get("function") or {}
                call["id"] = c.get("id") or call["id"]
                call["name"] += f.get("name") or ""
                call["arguments"] += f.get("arguments") or ""
            stop = choice.get("finish_reason") or stop
    return Answer(
        "".join(text),
        tuple(ToolCall(c["name"], c["arguments"], c["id"]) for _, c in sorted(calls.items())),
        stop,
        streamed=True,
        events=len(chunks),
        complete=done or bool(stop),
    )


def _responses_answer(body: dict[str, Any]) -> Answer:
    text, calls = [], []
    for item in body.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            text += [str(p.get("text", "")) for p in item.get("content") or [] if isinstance(p, dict)]
        elif item.get("type") == "function_call":
            calls.append(
                ToolCall(
                    str(item.get("name", "")),
                    args_text(item.get("arguments", "")),
                    str(item.get("call_id", "")),
                )
            )
    return Answer("".join(text), tuple(calls), str(body.get("status") or ""))


def _responses_stream(events: list[Any], done: bool) -> Answer:
    for e in reversed(events):
        if (
            isinstance(e, dict)
            and e.get("type") == "response.completed"
            and isinstance(e.get("response"), dict)
        ):
            final = _responses_answer(e["response"])
            return Answer(final.text, final.tool_calls, final.stop, streamed=True, events=len(events))
    text: list[str] = []
    calls: dict[str, dict[str, str]] = {}
    for e in events:
        if not isinstance(e, dict):
            continue
        kind = e.get("type")
        if kind == "response.output_text.delta":
            text.append(str(e.get("delta", "")))
        elif kind == "response.output_item.added" and (e.get("item") or {}).get("type") == "function_call":
            item = e["item"]
            calls[str(item.get("id", ""))] = {
                "name": str(item.get("name", "")),
                "arguments": "",
                "id": str(item.get("call_id", "")),
            }
        elif kind == "response.function_call_arguments.delta" and str(e.get("item_id", "")) in calls:
            calls[str(e["item_id"])]["arguments"] += str(e.get("delta", ""))
    return Answer(
        "".join(text),
        tuple(ToolCall(c["name"], c["arguments"], c["id"]) for c in calls.values()),
        "",
        streamed=True,
        events=len(events),
        complete=False,
    )


def _anthropic_answer(body: dict[str, Any]) -> Answer:
    text, calls = [], []
    for b in body.get("content") or []:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            text.append(str(b.get("text", "")))
        elif b.get("type") == "tool_use":
            calls.append(
                ToolCall(str(b.get("name", "")), args_text(b.get("input", {})), str(b.get("id", "")))
            )
    return Answer("".join(text), tuple(calls), str(body.get("stop_reason") or ""))


def _anthropic_stream(events: list[Any], done: bool) -> Answer:
    blocks: dict[int, dict[str, str]] = {}
    stop, ended = "", False
    for e in events:
        if not isinstance(e, dict):
            continue
        kind = e.get("type")
        if kind == "content_block_start":
            b = e.get("content_block") or {}
            blocks[int(e.get("index", 0))] = {
                "type": str(b.get("type", "")),
                "text": str(b.get("text", "")),
                "name": str(b.get("name", "")),
                "id": str(b.get("id", "")),
                "json": "",
            }
        elif kind == "content_block_delta":
            b = blocks.setdefault(
                int(e.get("index", 0)), {"type": "text", "text": "", "name": "", "id": "", "json": ""}
            )
            d = e.get("delta") or {}
            b["text"] += str(d.get("text", "")) if d.get("type") == "text_delta" else ""
            b["json"] += str(d.get("partial_json", "")) if d.get("type") == "input_json_delta" else ""
        elif kind == "message_delta":
            stop = str((e.get("delta") or {}).get("stop_reason") or stop)
        elif kind == "message_stop":
            ended = True
    ordered = [b for _, b in sorted(blocks.items())]
    return Answer(
        "".join(b["text"] for b in ordered if b["type"] == "text"),
        tuple(ToolCall(b["name"], b["json"] or "{}", b["id"]) for b in ordered if b["type"] == "tool_use"),
        stop,
        streamed=True,
        events=len(events),
        complete=ended,
    )


Reader = tuple[Callable[[dict[str, Any]], Answer], Callable[[list[Any], bool], Answer]]
ANSWERS: Final[dict[str, Reader]] = {
    "openai.chat": (_openai_chat_answer, _openai_chat_stream),
    "openai.responses": (_responses_answer, _responses_stream),
    "anthropic.messages": (_anthropic_answer, _anthropic_stream),
}
"""The APIs whose answers are reassembled: (whole body, stream of event documents and `[DONE]` seen)."""


def read_answer(api: Api, answer: bytes, content_type: str | None = None) -> Answer | None:
    """The answer reassembled (streamed or not), with the tokens its usage states; None when it is not
    one this API writes (or an API whose answers are not conversations, such as embeddings)."""
    readers = ANSWERS.get(api)
    if readers is None:
        return None
    whole, stream = readers
    if sse.looks_like(answer, content_type):
        events = sse.events(answer)
        done = any(e.data.strip() == DONE for e in events)
        docs = [doc for e in events if (doc := documents.parse(e.data)) is not None]
        read, found = stream(docs, done), usage.from_events(docs)
    else:
        body = documents.parse(answer)
        if not isinstance(body, dict):
            return None
        read, found = whole(body), usage.from_object(body)
    if found is None:
        return read
    return replace(read, tokens_in=found.tokens_in, tokens_out=found.tokens_out)
