"""A small MCP server built with the official SDK (`mcp.server.MCPServer`), for the tests and the bench.

`python tests/mcp/sdk_server.py` serves stdio; `--http PORT` serves streamable HTTP at `/mcp` (SSE
answers; `--http-json PORT`: JSON answers); `--sse PORT` the older HTTP+SSE transport at `/sse`.
Tools: `echo`, `add`, `fail` (an `isError` result), `count` (progress notifications), `big` (a large
answer), `crash` (the server exits mid-call), `touch` (a notification outside the call: over
streamable HTTP it goes on the session's long-lived GET stream).
"""

from __future__ import annotations

import os
import sys

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("flightlog-test-server")


@server.tool()
def echo(text: str) -> str:
    """Say `text` back."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """The sum of two integers."""
    return a + b


@server.tool()
def fail(why: str) -> str:
    """Always fails, with `why`."""
    raise ToolError(why)


@server.tool()
def big(size: int) -> str:
    """A text of `size` bytes (to make messages over the recording limit)."""
    return "x" * size


@server.tool()
def crash(code: int) -> str:
    """Exits the server at once with `code`, leaving the call unanswered."""
    os._exit(code)


@server.tool()
async def count(n: int, ctx: Context) -> str:
    """Counts to `n`, reporting progress at each step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return f"counted to {n}"


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Says `uri` changed, as a notification of the session, not of this call."""
    await ctx.request_context.session.send_resource_updated(uri)
    return f"touched {uri}"


@server.resource("note://greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed note."""
    return "hello"


@server.prompt()
def review(code: str) -> str:
    """Ask for a review of `code`."""
    return f"Please review: {code}"


if __name__ == "__main__":
    if len(sys.argv) > 2:  # --http PORT (SSE answers), --http-json PORT (JSON answers), --sse PORT (old)
        import uvicorn

        mode, port = sys.argv[1], int(sys.argv[2])
        if mode == "--sse":
            app = server.sse_app()
        else:
            app = server.streamable_http_app(json_response=mode == "--http-json")
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
    else:
        server.run()
