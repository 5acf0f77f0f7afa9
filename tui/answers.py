"""A model's answer reassembled: the final text and tool calls of a non-streamed body, or of a stream of
server-sent events put back together (OpenAI chat and responses, Anthropic messages), so both forms of
one answer read alike; a stream without its closing event is marked incomplete.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal

Api = Literal["openai.chat", "openai.responses", "anthropic.messages"]


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


def load_json(data: bytes | str | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


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


def sse_data(text: str) -> tuple[list[Any], bool]:
    """The JSON `data:` payloads of a server-sent event stream, and whether it ended with `[DONE]`."""
    out: list[Any] = []
    done = False
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:")).strip()
        if not data:
            continue
        if data == "[DONE]":
            done = True
            continue
        value = load_json(data)
        if value is not None:
            out.append(value)
    return out, done


def is_stream(answer: str) -> bool:
    return answer.lstrip().startswith(("data:", "event:"))


# --- answers -----------------------------------------------------------------------------------------


def _openai_chat_answer(body: dict[str, Any]) -> Answer:
    choice = (body.get("choices") or [{}])[0] or {}
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(str(f.get("name", "")), args_text(f.get("arguments", "")), str(c.get("id", "")))
        for c in message.get("tool_calls") or []
        for f in [c.get("function") or {}]
    )
    usage = body.get("usage") or {}
    return Answer(
        content_text(message.get("content")),
        calls,
        str(choice.get("finish_reason") or ""),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
    )


def _openai_chat_stream(chunks: list[Any], done: bool) -> Answer:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    stop, usage = "", dict[str, Any]()
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        usage = chunk.get("usage") or usage
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
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
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
    usage = body.get("usage") or {}
    return Answer(
        "".join(text),
        tuple(calls),
        str(body.get("status") or ""),
        usage.get("input_tokens"),
        usage.get("output_tokens"),
    )


def _responses_stream(events: list[Any], done: bool) -> Answer:
    for e in reversed(events):
        if (
            isinstance(e, dict)
            and e.get("type") == "response.completed"
            and isinstance(e.get("response"), dict)
        ):
            final = _responses_answer(e["response"])
            return Answer(
                final.text, final.tool_calls, final.stop, final.tokens_in, final.tokens_out, True, len(events)
            )
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
    usage = body.get("usage") or {}
    return Answer(
        "".join(text),
        tuple(calls),
        str(body.get("stop_reason") or ""),
        usage.get("input_tokens"),
        usage.get("output_tokens"),
    )


def _anthropic_stream(events: list[Any], done: bool) -> Answer:
    blocks: dict[int, dict[str, str]] = {}
    stop, tokens_in, tokens_out, ended = "", None, None, False
    for e in events:
        if not isinstance(e, dict):
            continue
        kind = e.get("type")
        if kind == "message_start":
            usage = (e.get("message") or {}).get("usage") or {}
            tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
        elif kind == "content_block_start":
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
            tokens_out = (e.get("usage") or {}).get("output_tokens", tokens_out)
        elif kind == "message_stop":
            ended = True
    ordered = [b for _, b in sorted(blocks.items())]
    return Answer(
        "".join(b["text"] for b in ordered if b["type"] == "text"),
        tuple(ToolCall(b["name"], b["json"] or "{}", b["id"]) for b in ordered if b["type"] == "tool_use"),
        stop,
        tokens_in,
        tokens_out,
        streamed=True,
        events=len(events),
        complete=ended,
    )


ANSWERS: Final = {
    "openai.chat": (_openai_chat_answer, _openai_chat_stream),
    "openai.responses": (_responses_answer, _responses_stream),
    "anthropic.messages": (_anthropic_answer, _anthropic_stream),
}


def read_answer(api: Api, answer: str) -> Answer | None:
    """The answer reassembled (streamed or not); None when it is not one this API writes."""
    whole, stream = ANSWERS[api]
    if is_stream(answer):
        events, done = sse_data(answer)
        return stream(events, done)
    body = load_json(answer)
    return whole(body) if isinstance(body, dict) else None


def stopped(answer: Answer, partial: bool) -> str:
    """Where a stream stopped, said plainly; empty for an answer that ended as it should."""
    if not (partial or not answer.complete):
        return ""
    said = f"{len(answer.text):,} characters of text" + (
        f" and {len(answer.tool_calls)} tool call(s)" if answer.tool_calls else ""
    )
    where = f"after {answer.events} server-sent events" if answer.streamed else "before the answer was whole"
    return f"partial: the stream stopped {where}, with {said} so far, before its closing event"
