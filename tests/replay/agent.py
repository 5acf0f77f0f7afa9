"""An agent-shaped script for the replay tests: the openai SDK, streamed, with a tool call.

The first call offers a `get_weather` tool and streams back a call of it; the script runs the tool
locally and sends its result in a second call that depends on the first answer (the tool-call id and
arguments the model gave). It prints what it did, one line per step, and exits 1 on an API error.
`AGENT_BASE_URL` is the model API; the proxy comes from the usual variables (`flightlog run` sets them).
`AGENT_EXTRA_TOOL=1` offers a second tool, for the drift tests.
"""

from __future__ import annotations

import json
import os
import sys

import openai

TOOLS: list[dict[str, object]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
EXTRA = {
    "type": "function",
    "function": {"name": "get_time", "description": "The time in a city.", "parameters": {"type": "object"}},
}


def get_weather(city: str) -> str:
    return f"18C and sunny in {city}"


def streamed(client: openai.OpenAI, messages: list[dict[str, object]], tools: list[dict[str, object]]):  # type: ignore[no-untyped-def]
    """One streamed call: (text, tool calls as {id, name, arguments}) assembled from the deltas."""
    stream = client.chat.completions.create(
        model="gpt-4o-mini",
        messages=messages,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    text, calls = "", {}
    for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.id or slot["id"]
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
    return text, [calls[i] for i in sorted(calls)]


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else "What is the weather in Paris?"
    tools = TOOLS + ([EXTRA] if os.environ.get("AGENT_EXTRA_TOOL") else [])
    client = openai.OpenAI(base_url=os.environ["AGENT_BASE_URL"], api_key="sk-test", max_retries=0)
    messages: list[dict[str, object]] = [{"role": "user", "content": prompt}]
    try:
        _, calls = streamed(client, messages, tools)
        print(f"model asked for: {', '.join(c['name'] + c['arguments'] for c in calls)}")
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {"name": c["name"], "arguments": c["arguments"]},
                    }
                    for c in calls
                ],
            }
        )
        for c in calls:
            result = get_weather(json.loads(c["arguments"])["city"])
            print(f"tool {c['name']} -> {result}")
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
        text, _ = streamed(client, messages, tools)
    except openai.APIError as e:
        print(f"agent: API error: {e}", file=sys.stderr)
        return 1
    print(f"final: {text.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
