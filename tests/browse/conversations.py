"""A Ledger of model calls and mixed exchanges for the exchange list, detail tabs and conversations.

- `c1` OpenAI chat, not streamed: a system prompt, two tools offered, the answer a tool call; cost $0.0000315.
- `c2` the same conversation one turn on (the tool's result sent back), answered as a stream.
- `c3` Anthropic messages streamed, a text block and a tool_use block, cut short (`partial`).
- `c4` OpenAI responses, not streamed.
- `c5` a WebSocket exchange: the 101 answer and three messages.
- `c6` a dispatch through the door: the call, the upstream request and answer, the reply.
- `c7` a gzip-encoded JSON answer; `c8` a PNG image answer.
The streamed and non-streamed forms of each API's answer are also here (`OPENAI_*`, `ANTHROPIC_*`) for
the test that both read as the same text.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from storage.events import Batch, Event
from storage.ledger import Ledger, open_ledger

T1 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city"}},
    {"type": "function", "function": {"name": "github.get_repo", "description": "Read a repository"}},
]
MESSAGES = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Weather in Paris?"},
]
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
}
C1_REQUEST = {"model": "gpt-4o-mini", "messages": MESSAGES, "tools": TOOLS}
C1_ANSWER = {
    "choices": [
        {
            "message": {"role": "assistant", "content": None, "tool_calls": [CALL]},
            "finish_reason": "tool_calls",
        }
    ],
    "usage": {"prompt_tokens": 150, "completion_tokens": 15},
}
C2_REQUEST = {
    "model": "gpt-4o-mini",
    "stream": True,
    "messages": [
        *MESSAGES,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "sunny"}'},
    ],
    "tools": TOOLS,
}
ANSWER_TEXT = "It is 18°C and sunny in Paris."


def sse(*payloads: object, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(p, ensure_ascii=False)}\n\n" for p in payloads]
    return ("".join(lines) + ("data: [DONE]\n\n" if done else "")).encode()


OPENAI_WHOLE = {
    "choices": [{"message": {"role": "assistant", "content": ANSWER_TEXT}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 190, "completion_tokens": 12},
}
OPENAI_STREAM = sse(
    {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
    *({"choices": [{"delta": {"content": part}}]} for part in ("It is 18°C", " and sunny", " in Paris.")),
    {"choices": [{"delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 190, "completion_tokens": 12}},
)
ANTHROPIC_REQUEST = {
    "model": "claude-sonnet-4-5",
    "system": "Answer with the weather tool.",
    "stream": True,
    "messages": [{"role": "user", "content": "Weather in Paris and Lyon?"}],
    "tools": [{"name": "get_weather", "description": "Weather for a city", "input_schema": {}}],
}
ANTHROPIC_WHOLE = {
    "content": [
        {"type": "text", "text": "Checking Paris."},
        {"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {"city": "Paris"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 80, "output_tokens": 30},
}
ANTHROPIC_EVENTS: list[dict[str, object]] = [
    {"type": "message_start", "message": {"usage": {"input_tokens": 80, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " Paris."}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {"type": "tool_use", "id": "tu_1", "name": "get_weather"},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"city": '},
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '"Paris"}'},
    },
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
    {"type": "message_stop"},
]


def anthropic_sse(events: list[dict[str, object]]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


ANTHROPIC_STREAM = anthropic_sse(ANTHROPIC_EVENTS)
ANTHROPIC_CUT = anthropic_sse(ANTHROPIC_EVENTS[:7])
"""The stream cut inside the tool call's arguments: no message_delta, no message_stop."""
RESPONSES_REQUEST = {"model": "gpt-4.1", "instructions": "Be brief.", "input": "Say hi"}
RESPONSES_ANSWER = {
    "status": "completed",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi."}]}],
    "usage": {"input_tokens": 9, "output_tokens": 2},
}
PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)


def _head(start: str, *fields: tuple[str, str]) -> bytes:
    return ("\r\n".join([start, *(f"{k}: {v}" for k, v in fields)]) + "\r\n\r\n").encode()


def _event(action: str, role: str, kind: str, at: datetime, n: int, **kw: object) -> Event:
    payload = kw.pop("payload", None)
    state = kw.pop("payload_state", "complete" if payload else "none")
    return Event(
        event_id=f"{action}-{role}",
        action_id=action,
        kind=kind,
        at=at,
        collector="conv",
        seq=n,
        payload=payload,  # type: ignore[arg-type]
        payload_state=state,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def _exchange(
    n: int,
    url: str,
    request: object,
    answer: bytes,
    *,
    ms: int,
    ctype: str = "application/json",
    **kw: object,
) -> list[Event]:
    action, at = f"c{n}", T1 + timedelta(minutes=n)
    host = url.split("/")[2]
    usage = {
        k: kw.pop(k) for k in ("model", "tokens_in", "tokens_out", "cost_usd", "payload_state") if k in kw
    }
    extra: tuple[tuple[str, str], ...] = kw.pop("answer_fields", ())  # type: ignore[assignment]
    body = (request if isinstance(request, bytes) else json.dumps(request).encode()) if request else None
    common = {"method": "POST", "url": url, "host": host, "agent": "alpha", "session": "s9", **kw}
    return [
        _event(
            action,
            "request",
            "http.request",
            at,
            10 * n,
            direction="out",
            payload=body,
            redacted=("OPENAI_API_KEY",),
            head=_head(
                f"POST {url} HTTP/1.1",
                ("Host", host),
                ("Authorization", "Bearer [OPENAI_API_KEY]"),
                ("Content-Type", "application/json"),
            ),
            **common,
        ),
        _event(
            action,
            "response",
            "http.response",
            at + timedelta(milliseconds=ms),
            10 * n + 1,
            direction="in",
            status=200,
            payload=answer,
            head=_head("HTTP/1.1 200 OK", ("Content-Type", ctype), *extra),
            **usage,
            **common,
        ),
    ]


def conversation_events() -> tuple[Event, ...]:
    events = [
        *_exchange(
            1,
            "https://api.openai.com/v1/chat/completions",
            C1_REQUEST,
            json.dumps(C1_ANSWER).encode(),
            ms=420,
            model="gpt-4o-mini",
            tokens_in=150,
            tokens_out=15,
            cost_usd=0.0000315,
        ),
        *_exchange(
            2,
            "https://api.openai.com/v1/chat/completions",
            C2_REQUEST,
            OPENAI_STREAM,
            ms=1250,
            ctype="text/event-stream",
            model="gpt-4o-mini",
            tokens_in=190,
            tokens_out=12,
            cost_usd=0.0000357,
        ),
        *_exchange(
            3,
            "https://api.anthropic.com/v1/messages",
            ANTHROPIC_REQUEST,
            ANTHROPIC_CUT,
            ms=2300,
            ctype="text/event-stream",
            model="claude-sonnet-4-5",
            tokens_in=80,
            tokens_out=1,
            cost_usd=0.000255,
            payload_state="partial",
        ),
        *_exchange(
            4,
            "https://api.openai.com/v1/responses",
            RESPONSES_REQUEST,
            json.dumps(RESPONSES_ANSWER).encode(),
            ms=300,
            model="gpt-4.1",
            tokens_in=9,
            tokens_out=2,
            cost_usd=0.000034,
        ),
        *_exchange(
            7,
            "https://api.example.com/v1/items",
            b"",
            gzip.compress(b'{"items": [1, 2, 3]}', mtime=0),
            ms=35,
            answer_fields=(("Content-Encoding", "gzip"),),
        ),
        *_exchange(8, "https://img.example.com/logo.png", b"", PNG, ms=12, ctype="image/png"),
    ]
    ws_at = T1 + timedelta(minutes=5)
    events += [
        _event(
            "c5",
            "request",
            "http.request",
            ws_at,
            50,
            direction="out",
            method="GET",
            url="https://ws.example.com/feed",
            host="ws.example.com",
            head=_head("GET /feed HTTP/1.1"),
        ),
        _event(
            "c5",
            "response",
            "http.response",
            ws_at + timedelta(milliseconds=40),
            51,
            direction="in",
            status=101,
            url="https://ws.example.com/feed",
            host="ws.example.com",
            head=_head("HTTP/1.1 101 Switching Protocols"),
        ),
        *(
            _event(
                "c5",
                f"ws:{i}",
                f"websocket.{side}",
                ws_at + timedelta(seconds=i + 1),
                52 + i,
                direction="out" if side == "client" else "in",
                url="https://ws.example.com/feed",
                host="ws.example.com",
                payload=text.encode(),
            )
            for i, (side, text) in enumerate(
                [("client", "subscribe"), ("server", '{"tick": 1}'), ("server", '{"tick": 2}')]
            )
        ),
    ]
    d_at = T1 + timedelta(minutes=6)
    door = {"tool": "github.get_repo", "agent": "alpha", "session": "s9"}
    events += [
        _event(
            "c6",
            "call",
            "dispatch.call",
            d_at,
            60,
            direction="in",
            method="POST",
            url="flightlog:dispatch/http/github.get_repo",
            payload=b'{"tool": "github.get_repo", "args": {}}',
            head=_head("POST /api/dispatch HTTP/1.1"),
            **door,
        ),
        _event(
            "c6",
            "upstream-request",
            "dispatch.upstream.request",
            d_at + timedelta(milliseconds=5),
            61,
            direction="out",
            method="GET",
            url="https://api.github.com/repos/acme/app",
            host="api.github.com",
            head=_head("GET /repos/acme/app HTTP/1.1", ("Authorization", "token [GITHUB_TOKEN]")),
            redacted=("GITHUB_TOKEN",),
            **door,
        ),
        _event(
            "c6",
            "upstream-response",
            "dispatch.upstream.response",
            d_at + timedelta(milliseconds=95),
            62,
            direction="in",
            status=200,
            head=_head("HTTP/1.1 200 OK"),
            payload=b'{"name": "app"}',
            **door,
        ),
        _event(
            "c6",
            "reply",
            "dispatch.reply",
            d_at + timedelta(milliseconds=100),
            63,
            direction="out",
            status=200,
            head=_head("HTTP/1.1 200 OK"),
            payload=b'{"ok": true, "result": {"name": "app"}}',
            **door,
        ),
    ]
    return tuple(events)


def fill(ledger: Ledger) -> None:
    ledger.append(Batch("conv", 1, conversation_events()))


@pytest.fixture
def conversation_ledger(tmp_path: Path) -> Iterator[Ledger]:
    """The model calls and mixed exchanges on SQLite."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'conv.db'}", (tmp_path / "blobs").as_uri())
    fill(ledger)
    yield ledger
    ledger.close()
