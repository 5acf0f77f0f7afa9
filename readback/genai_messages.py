"""A recorded model call's conversation in the OpenTelemetry GenAI conventions' message structure.

`gen_ai.system_instructions`, `gen_ai.input.messages` and `gen_ai.output.messages` are JSON: a list of
messages, each a `role` and its `parts` (`text`, `tool_call` with its id, name and arguments,
`tool_call_response` with the id it answers), the output's with a `finish_reason`. Receivers that
follow the conventions (Phoenix turns them into its own LLM messages) then show the conversation as
turns instead of a provider's raw body. Read with `formats.conversation`, one reader for the three
APIs (OpenAI chat and responses, Anthropic messages), streamed or not.
"""

from __future__ import annotations

import json
from typing import Any, Final

from formats.conversation import Conversation, Message, conversation
from formats.documents import parse

FINISH: Final = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "completed": "stop",
    "length": "length",
    "max_tokens": "length",
    "incomplete": "length",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "function_call": "tool_call",
    "content_filter": "content_filter",
    "refusal": "content_filter",
}
"""The providers' stop reasons as the conventions name them (others are kept as the provider said)."""


def message_attributes(
    url: str | None, request: bytes, answer: bytes, answer_type: str | None
) -> tuple[tuple[str, str], ...] | None:
    """The conversation's span attributes, or None when the call is not one `formats.conversation`
    reads (then the bodies are given as they were recorded)."""
    conv = conversation(url, request, answer, answer_type)
    if conv is None:
        return None
    out = []
    if conv.system:
        out.append(("gen_ai.system_instructions", _json([{"type": "text", "content": conv.system}])))
    out.append(("gen_ai.input.messages", _json([_message(m) for m in conv.messages])))
    out.append(("gen_ai.output.messages", _json([_output(conv)])))
    return tuple(out)


def _message(m: Message) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if m.role == "tool":
        parts.append({"type": "tool_call_response", "id": m.answers or None, "response": m.text})
    elif m.text:
        parts.append({"type": "text", "content": m.text})
    parts += [
        {"type": "tool_call", "id": c.call_id or None, "name": c.name, "arguments": _arguments(c.arguments)}
        for c in m.tool_calls
    ]
    return {"role": m.role, "parts": parts}


def _output(conv: Conversation) -> dict[str, Any]:
    answer = conv.answer
    message = _message(Message("assistant", answer.text, answer.tool_calls))
    stop = answer.stop or ("" if answer.complete else "error")
    return message | {"finish_reason": FINISH.get(stop, stop)}


def _arguments(text: str) -> Any:
    """A tool call's arguments as the object they spell (as sent when they are not JSON)."""
    found = parse(text)
    return text if found is None else found


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
