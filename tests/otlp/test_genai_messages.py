"""A recorded model call's conversation as the OpenTelemetry GenAI conventions' messages: the three
APIs flightlog reads (OpenAI chat and responses, Anthropic messages), streamed or not, each turn a
role and its parts, tool calls with their arguments as objects, tool results with the id they answer,
the answer with the conventions' finish reason (what Phoenix turns into its LLM messages:
tests/otlp/test_otlp_phoenix.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from readback.genai_messages import message_attributes

CHAT = "https://api.openai.com/v1/chat/completions"
RESPONSES = "https://api.openai.com/v1/responses"
MESSAGES = "https://api.anthropic.com/v1/messages"


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def _j(doc: object) -> bytes:
    return json.dumps(doc).encode()


def text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


CASES: dict[str, tuple[str, bytes, bytes, str, dict[str, Any]]] = {
    "openai chat: system, a tool call and its result, a text answer": (
        CHAT,
        _j({"model": "gpt-4o", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "add 2 and 3"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "5"},
        ]}),
        _j({"model": "gpt-4o", "choices": [
            {"message": {"role": "assistant", "content": "It is 5."}, "finish_reason": "stop"}]}),
        "application/json",
        {
            "gen_ai.system_instructions": [{"type": "text", "content": "Be brief."}],
            "gen_ai.input.messages": [
                text("user", "add 2 and 3"),
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}}]},
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "5"}]},
            ],
            "gen_ai.output.messages": [text("assistant", "It is 5.") | {"finish_reason": "stop"}],
        },
    ),
    "anthropic stream asking for a tool, arguments not JSON kept as sent": (
        MESSAGES,
        _j({"model": "claude-sonnet-4-5", "system": "You look things up.", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "find x"}]},
            {"role": "assistant",
             "content": [{"type": "tool_use", "id": "t0", "name": "lookup", "input": {"q": "x"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t0", "content": "nothing"}]},
        ]}),
        _sse(
            {"type": "message_start",
             "message": {"model": "claude-sonnet-4-5", "usage": {"input_tokens": 5}}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": "not json"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ),
        "text/event-stream",
        {
            "gen_ai.system_instructions": [{"type": "text", "content": "You look things up."}],
            "gen_ai.input.messages": [
                text("user", "find x"),
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "t0", "name": "lookup", "arguments": {"q": "x"}}]},
                {"role": "tool",
                 "parts": [{"type": "tool_call_response", "id": "t0", "response": "nothing"}]},
            ],
            "gen_ai.output.messages": [{"role": "assistant", "parts": [
                {"type": "tool_call", "id": "t1", "name": "lookup", "arguments": "not json"}],
                "finish_reason": "tool_call"}],
        },
    ),
    "responses API: instructions and a plain input, cut off by its length": (
        RESPONSES,
        _j({"model": "gpt-5", "instructions": "Answer in French.", "input": "hello"}),
        _j({"model": "gpt-5", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": "bonj"}]}]}),
        "application/json",
        {
            "gen_ai.system_instructions": [{"type": "text", "content": "Answer in French."}],
            "gen_ai.input.messages": [text("user", "hello")],
            "gen_ai.output.messages": [text("assistant", "bonj") | {"finish_reason": "length"}],
        },
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_conversations_become_the_conventions_messages(case: str) -> None:
    url, request, answer, answer_type, expected = CASES[case]
    found = message_attributes(url, request, answer, answer_type)
    assert found is not None
    assert {key: json.loads(value) for key, value in found} == expected


def test_a_call_that_is_no_conversation_is_none() -> None:
    """Embeddings (or any API the conversation reader does not know): None, so the bodies are given
    as recorded instead of an empty conversation."""
    assert message_attributes("https://api.openai.com/v1/embeddings", b'{"input": "x"}', b"{}", None) is None
    assert message_attributes("https://example.com/x", b"{}", b"{}", None) is None
