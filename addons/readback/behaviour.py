"""What an agent did in a recording, read from its exchanges: the facts `flightlog diff` compares.

One `Step` per recorded request: which endpoint, which model, which tools it offered the model,
which tool calls the answer made (streamed or not; OpenAI chat and responses, Anthropic messages),
which MCP tool it called (a JSON-RPC `tools/call` over HTTP), its status, tokens and cost (the
columns capture filled from the answer). Pure: bodies come in as bytes, nothing is read here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from addons.readback.recorded import Exchange, PayloadReader, body
from recording.encodings import EncodingError, decode


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


def plain(body: bytes, content_encoding: str | None) -> bytes:
    """The body without its content-encoding (as is when undecodable)."""
    if not body or not content_encoding:
        return body
    try:
        return decode(body, content_encoding)
    except (EncodingError, ValueError):
        return body


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def sse_documents(body: bytes) -> Iterator[Any]:
    """The JSON documents of an SSE body's `data:` lines (others skipped)."""
    for line in body.splitlines():
        if line.startswith(b"data:"):
            doc = _json(line[5:].strip())
            if doc is not None:
                yield doc


def offered(request: Any) -> tuple[str, ...]:
    """Tool names offered in a model request (OpenAI `function.name`, Anthropic / responses `name`)."""
    if not isinstance(request, dict) or not isinstance(request.get("tools"), list):
        return ()
    names = []
    for tool in request["tools"]:
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
            if isinstance(name, str):
                names.append(name)
    return tuple(names)


def _calls_in(doc: Any) -> Iterator[str]:
    """Tool-call names in one answer document or stream event, of any of the common shapes."""
    if not isinstance(doc, dict):
        return
    for choice in doc.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        for part in (choice.get("message"), choice.get("delta")):
            if isinstance(part, dict):
                for call in part.get("tool_calls") or []:
                    fn = call.get("function") if isinstance(call, dict) else None
                    if isinstance(fn, dict) and fn.get("name"):
                        yield str(fn["name"])
    for block in [*(doc.get("content") or []), doc.get("content_block"), doc.get("item")]:
        if (
            isinstance(block, dict)
            and block.get("type") in ("tool_use", "function_call")
            and block.get("name")
        ):
            yield str(block["name"])
    for item in doc.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "function_call" and item.get("name"):
            yield str(item["name"])


def called(answer: bytes, streamed: bool) -> tuple[str, ...]:
    """The tool calls an answer made, in order (a streamed call is named in its first delta only)."""
    docs = list(sse_documents(answer)) if streamed else [_json(answer)]
    names: list[str] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("type") == "response.completed":
            continue  # the responses API repeats its items in the closing event
        names += _calls_in(doc)
    return tuple(names)


def mcp_called(request: Any) -> tuple[str, ...]:
    """MCP tools called by a JSON-RPC request body (one message or a batch)."""
    messages = request if isinstance(request, list) else [request]
    return tuple(
        str(m["params"]["name"])
        for m in messages
        if isinstance(m, dict)
        and m.get("method") == "tools/call"
        and isinstance(m.get("params"), dict)
        and m["params"].get("name")
    )


def step(
    method: str,
    url: str,
    request_body: bytes,
    answer_body: bytes,
    answer_type: str | None,
    columns: dict[str, Any],
) -> Step:
    """One step from a request's and its answer's (decoded) bodies and the answer event's columns."""
    request = _json(request_body)
    streamed = (answer_type or "").split(";")[0].strip().lower() == "text/event-stream"
    model = columns.get("model") or (request.get("model") if isinstance(request, dict) else None)
    return Step(
        endpoint=endpoint(method, url),
        model=str(model) if model else None,
        tools_offered=offered(request),
        tool_calls=called(answer_body, streamed),
        mcp_calls=mcp_called(request),
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
        request_body = plain(body(x.request, read), head.get("content-encoding"))
        answer = x.response
        answer_body = b""
        answer_type = None
        if answer is not None and answer_head is not None:
            answer_body = plain(body(answer, read), answer_head.get("content-encoding"))
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
