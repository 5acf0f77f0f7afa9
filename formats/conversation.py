"""An AI call read as a conversation: what the model was asked, with which tools, and what it answered.

Pure functions over the recorded request and answer bodies (content coding already undone) for
OpenAI chat completions, OpenAI responses and Anthropic messages, each streamed or not; the answer
is read by `formats.answers`, which puts a stream back together into the text and tool calls a whole
body carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from formats import documents
from formats.answers import Answer, ToolCall, args_text, content_text, read_answer
from formats.model_apis import Api, api_of


@dataclass(frozen=True, slots=True)
class Message:
    """One turn: `role` (system, user, assistant, tool), its text, the tool calls it made, and for a
    tool result the call it answers."""

    role: str
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    answers: str = ""


@dataclass(frozen=True, slots=True)
class Conversation:
    api: Api
    model: str = ""
    system: str = ""
    messages: tuple[Message, ...] = ()
    tools: tuple[tuple[str, str], ...] = ()
    """(name, description) of every tool offered."""
    answer: Answer = field(default_factory=Answer)


def conversation_api(url: str | None) -> Api | None:
    """The API of a URL when its calls read as a conversation (chat, responses, messages); else None."""
    api = api_of(url)
    return api if api in REQUESTS else None


# --- requests ----------------------------------------------------------------------------------------


def _openai_chat_request(req: dict[str, Any]) -> tuple[str, list[Message], list[tuple[str, str]]]:
    system, messages = [], []
    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role", ""))
        if role in ("system", "developer"):
            system.append(content_text(m.get("content")))
            continue
        calls = tuple(
            ToolCall(str(f.get("name", "")), args_text(f.get("arguments", "")), str(c.get("id", "")))
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
            for f in [c.get("function") or {}]
        )
        messages.append(
            Message(role, content_text(m.get("content")), calls, str(m.get("tool_call_id", "") or ""))
        )
    tools = [
        (str(f.get("name", "")), str(f.get("description", "")))
        for t in req.get("tools") or []
        if isinstance(t, dict)
        for f in [t.get("function") or t]
    ]
    return "\n\n".join(system), messages, tools


def _openai_responses_request(req: dict[str, Any]) -> tuple[str, list[Message], list[tuple[str, str]]]:
    system = [str(req["instructions"])] if req.get("instructions") else []
    messages: list[Message] = []
    items = req.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            call = ToolCall(
                str(item.get("name", "")), args_text(item.get("arguments", "")), str(item.get("call_id", ""))
            )
            messages.append(Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            messages.append(
                Message("tool", content_text(item.get("output")), (), str(item.get("call_id", "")))
            )
        elif item.get("role") in ("system", "developer"):
            system.append(content_text(item.get("content")))
        else:
            messages.append(Message(str(item.get("role", "user")), content_text(item.get("content"))))
    tools = [
        (str(t.get("name", t.get("type", ""))), str(t.get("description", "")))
        for t in req.get("tools") or []
        if isinstance(t, dict)
    ]
    return "\n\n".join(system), messages, tools


def _anthropic_request(req: dict[str, Any]) -> tuple[str, list[Message], list[tuple[str, str]]]:
    messages: list[Message] = []
    for m in req.get("messages") or []:
        if not isinstance(m, dict):
            continue
        role, content = str(m.get("role", "")), m.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        texts, calls = [], []
        for b in blocks:
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_use":
                calls.append(
                    ToolCall(str(b.get("name", "")), args_text(b.get("input", {})), str(b.get("id", "")))
                )
            elif b.get("type") == "tool_result":
                messages.append(
                    Message("tool", content_text(b.get("content")), (), str(b.get("tool_use_id", "")))
                )
            elif b.get("type") == "text":
                texts.append(str(b.get("text", "")))
        if texts or calls:
            messages.append(Message(role, "\n".join(texts), tuple(calls)))
    tools = [
        (str(t.get("name", "")), str(t.get("description", "")))
        for t in req.get("tools") or []
        if isinstance(t, dict)
    ]
    return content_text(req.get("system")), messages, tools


Request = tuple[str, list[Message], list[tuple[str, str]]]
REQUESTS: Final[dict[str, Callable[[dict[str, Any]], Request]]] = {
    "openai.chat": _openai_chat_request,
    "openai.responses": _openai_responses_request,
    "anthropic.messages": _anthropic_request,
}


def conversation(
    url: str | None, request: bytes | None, answer: bytes | None, answer_type: str | None = None
) -> Conversation | None:
    """The conversation of one exchange, or None when it is not a call to a model API we read."""
    api = conversation_api(url)
    req = documents.parse(request)
    if api is None or not isinstance(req, dict):
        return None
    system, messages, tools = REQUESTS[api](req)
    read = read_answer(api, answer, answer_type) if answer and answer.strip() else None
    return Conversation(
        api, str(req.get("model", "")), system, tuple(messages), tuple(tools), read or Answer(complete=False)
    )
