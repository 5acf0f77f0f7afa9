"""Making the door's own upstream calls, and the exact bytes each one sends and receives.

The door calls upstreams directly with httpx (`trust_env=False`): never through the proxy, so generic
capture never sees these calls and nothing is stored twice; the door records them itself.

Requests are built by `catalog.wire` (the same builder the dry run and the join's contract check use),
so what the dry run shows is what is sent and what the join expects is what was recorded.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from catalog.wire import body_bytes, build, cli_argv, cli_head, head_of, mcp_requests
from egress.sender import send_raw
from formats import codings, jsonrpc


@dataclass(frozen=True, slots=True)
class Exchange:
    """One upstream round trip as bytes: what was sent and what came back (or the failure)."""

    method: str
    url: str
    request_head: bytes
    request_body: bytes
    status: int | None = None
    response_head: bytes = b""
    response_body: bytes = b""
    content_encoding: str | None = None
    error: str | None = None
    sent: float | None = None
    """`time.monotonic()` when the request left (None: not measured), for its event's own time."""
    answered: float | None = None
    """`time.monotonic()` when the answer (or the failure) was in."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the upstream answered: every exchange in order (the last one carries the result)."""

    exchanges: tuple[Exchange, ...]
    ok: bool
    result: Any
    status: int | None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def send(client: httpx.Client, request: Mapping[str, Any]) -> tuple[Exchange, httpx.Response | None]:
    """One HTTP round trip; the answer's body as received (content-encoding kept)."""
    built = build(request)
    head = head_of(built)
    base = Exchange(built.method, str(built.url), head, built.content, sent=time.monotonic())
    try:
        received = send_raw(client, built)
    except httpx.HTTPError as e:
        return _failed(base, f"{type(e).__name__}: {e}"), None
    response = received.response
    answered = Exchange(
        base.method,
        base.url,
        head,
        built.content,
        status=response.status_code,
        response_head=received.head,
        response_body=received.raw,
        content_encoding=response.headers.get("content-encoding"),
        sent=base.sent,
        answered=time.monotonic(),
    )
    return answered, response


def _failed(base: Exchange, error: str) -> Exchange:
    return Exchange(
        base.method,
        base.url,
        base.request_head,
        base.request_body,
        error=error,
        sent=base.sent,
        answered=time.monotonic(),
    )


def decoded(exchange: Exchange, response: httpx.Response | None) -> bytes:
    """The answer's body with its content codings undone (for the reply; the Ledger keeps it raw)."""
    if response is None:
        return b""
    return codings.readable(exchange.response_body, exchange.content_encoding).data


def as_result(body: bytes, content_type: str | None) -> Any:
    """A JSON answer as its value, text as text, anything else as a base64-free note of its size."""
    if content_type and "json" in content_type:
        try:
            return json.loads(body)
        except ValueError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return {"binary_bytes": len(body)}


def call_http(client: httpx.Client, request: Mapping[str, Any]) -> Outcome:
    """Execute an HTTP contract: one exchange; ok when the upstream answered 2xx."""
    exchange, response = send(client, request)
    if response is None:
        return Outcome((exchange,), False, None, None, exchange.error)
    body = decoded(exchange, response)
    result = as_result(body, response.headers.get("content-type"))
    return Outcome((exchange,), 200 <= response.status_code < 300, result, response.status_code)


def _jsonrpc_answer(body: bytes, content_type: str | None, want_id: int) -> dict[str, Any] | None:
    """The JSON-RPC answer with `want_id` from a JSON or an SSE (text/event-stream) body."""
    for _, _, message in jsonrpc.messages(body, content_type or ""):
        if isinstance(message, dict) and message.get("id") == want_id:
            return message
    return None


def call_mcp(client: httpx.Client, contract: Mapping[str, Any]) -> Outcome:
    """Execute an MCP contract over streamable HTTP; the tools/call result is the result."""
    exchanges: list[Exchange] = []
    session: str | None = None
    answer: dict[str, Any] | None = None
    status: int | None = None
    for i, request in enumerate(mcp_requests(contract)):
        if session is not None:
            request = {**request, "headers": {**request["headers"], "mcp-session-id": session}}
        exchange, response = send(client, request)
        exchanges.append(exchange)
        if response is None:
            return Outcome(tuple(exchanges), False, None, None, exchange.error)
        status = response.status_code
        if status >= 400:
            error = f"the MCP server answered {status}"
            return Outcome(tuple(exchanges), False, as_result(exchange.response_body, "json"), status, error)
        session = session or response.headers.get("mcp-session-id")
        if i != 1:
            answer = _jsonrpc_answer(
                decoded(exchange, response), response.headers.get("content-type"), i // 2 + 1
            )
            if answer is None:
                return Outcome(tuple(exchanges), False, None, status, "the MCP server gave no answer")
            if "error" in answer:
                return Outcome(tuple(exchanges), False, answer["error"], status, "the MCP server refused")
    result = (answer or {}).get("result")
    ok = isinstance(result, dict) and not result.get("isError", False)
    return Outcome(tuple(exchanges), ok, result, status)


def call_cli(contract: Mapping[str, Any], timeout: float) -> Outcome:
    """Run a CLI contract (no shell), stdin from the contract's `stdin`, with a timeout.

    Recorded as one exchange: the request head is `CLI <argv as a shell line>`, its body the stdin;
    the answer's status is the exit code and its body the stdout (stderr goes into the error).
    """
    argv = cli_argv(contract)
    stdin = body_bytes(contract.get("stdin"))
    head = cli_head(argv)
    base = Exchange("CLI", "cli:" + argv[0], head, stdin, sent=time.monotonic())
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        failed = Exchange(
            base.method,
            base.url,
            head,
            stdin,
            response_body=out,
            error=f"timed out after {timeout} s",
            sent=base.sent,
            answered=time.monotonic(),
        )
        return Outcome((failed,), False, None, None, failed.error)
    except OSError as e:
        return Outcome((_failed(base, f"cannot run {argv[0]}: {e.strerror}"),), False, None, None, e.strerror)
    stderr = done.stderr.decode("utf-8", "replace").strip()
    exchange = Exchange(
        base.method,
        base.url,
        head,
        stdin,
        status=done.returncode,
        response_head=f"exit {done.returncode}".encode(),
        response_body=done.stdout,
        error=stderr[-2000:] or None,
        sent=base.sent,
        answered=time.monotonic(),
    )
    result = as_result(done.stdout, "json" if done.stdout.lstrip()[:1] in (b"{", b"[") else None)
    return Outcome(
        (exchange,), done.returncode == 0, result, done.returncode, None if done.returncode == 0 else stderr
    )
