"""What an agent did in a recording, read from its exchanges: the facts `flightlog diff` compares.

One `Step` per recorded request: which endpoint, which model, which tools it offered the model and
which tool calls the answer made (read as the browser reads the conversation, `formats.conversation`:
OpenAI chat and responses, Anthropic messages, streamed or not), which MCP tools it called (each
JSON-RPC `tools/call` of the body, `formats.jsonrpc`), its status, tokens and cost (the columns
capture filled from the answer). Pure: bodies come in as bytes, nothing is read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from formats import codings, documents, jsonrpc
from formats.conversation import conversation
from readback.recorded import Exchange, PayloadReader, body


@dataclass(frozen=True, slots=True)
class Step:
    """One request of the agent and what came of it."""

    endpoint: str
    model: str | None = None
    tools_offered: tuple[str, ...] = ()
    tool_calls: tuple[str, ...] = ()
    mcp_calls: tuple[str, ...] = ()
    status: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "model": self.model,
            "tools_offered": list(self.tools_offered),
            "tool_calls": list(self.tool_calls),
            "mcp_calls": list(self.mcp_calls),
            "status": self.status,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
        }


def endpoint(method: str, url: str) -> str:
    """`POST host/path`: what identifies a request's kind across runs (ports and queries vary)."""
    parts = urlsplit(url)
    return f"{method.upper()} {parts.hostname or ''}{parts.path or '/'}"


def mcp_called(request_body: bytes) -> tuple[str, ...]:
    """MCP tools called by a JSON-RPC request body (one message or a batch)."""
    found = (jsonrpc.classify(value) for _, _, value in jsonrpc.messages(request_body, "application/json"))
    return tuple(m.tool for m in found if m.tool)


def step(
    method: str,
    url: str,
    request_body: bytes,
    answer_body: bytes,
    answer_type: str | None,
    columns: dict[str, Any],
) -> Step:
    """One step from a request's and its answer's (decoded) bodies and the answer event's columns."""
    conv = conversation(url, request_body, answer_body, answer_type)
    model = columns.get("model") or documents.parse_object(request_body).get("model")
    return Step(
        endpoint=endpoint(method, url),
        model=str(model) if model else None,
        tools_offered=tuple(name for name, _ in conv.tools) if conv else (),
        tool_calls=tuple(call.name for call in conv.answer.tool_calls) if conv else (),
        mcp_calls=mcp_called(request_body),
        status=columns.get("status"),
        tokens_in=int(columns.get("tokens_in") or 0),
        tokens_out=int(columns.get("tokens_out") or 0),
        cost_usd=float(columns.get("cost_usd") or 0.0),
    )


def steps(exchanges: Sequence[Exchange], read: PayloadReader) -> list[Step]:
    """The steps of recorded exchanges, in recorded order (bodies read and decoded)."""
    out = []
    for x in exchanges:
        head, answer_head = x.request_head, x.response_head
        request_body = codings.readable(body(x.request, read), head.get("content-encoding")).data
        answer = x.response
        answer_body = b""
        answer_type = None
        if answer is not None and answer_head is not None:
            answer_body = codings.readable(body(answer, read), answer_head.get("content-encoding")).data
            answer_type = answer_head.get("content-type")
        columns: dict[str, Any] = {}
        if answer is not None:
            columns = {
                "model": answer.model or x.request.model,
                "status": answer.status,
                "tokens_in": answer.tokens_in,
                "tokens_out": answer.tokens_out,
                "cost_usd": answer.cost_usd,
            }
        out.append(
            step(x.request.method or "", x.request.url or "", request_body, answer_body, answer_type, columns)
        )
    return out
