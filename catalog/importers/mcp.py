"""MCP importer: an MCP server's `tools/list` becomes rows with MCP contracts.

The server is started as a subprocess and asked through the official client (`mcp.client.stdio`),
following `next_cursor` until the listing is complete. Each tool becomes a row with its input schema
as `args` and the contract `{method: "MCP", server: {command, args, name, version}, tool, arguments}`
(`name` and `version`: the identity the server announced, which joins recorded calls to the row), where
`arguments` maps each declared argument to its `{placeholder}` (absent optional ones drop out) or is
left out, meaning "the call's arguments unchanged", when a name cannot be a placeholder.

The command is stored as it was given: give absolute paths for a row that must run from anywhere.
The SDK is imported only when an import runs.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any, Final

from catalog.errors import ImporterError, ToolError
from catalog.importers import ARG_NAME, Document, documents, row_name
from catalog.tool import Tool

TIMEOUT: Final = 30.0


def import_mcp(
    command: Sequence[str], *, prefix: str = "", bundle: str = "tool", timeout: float = TIMEOUT
) -> list[Document]:
    """Documents for every tool the MCP server started by `command` lists."""
    return documents(tools_from_mcp(command, prefix=prefix, bundle=bundle, timeout=timeout))


def tools_from_mcp(
    command: Sequence[str], *, prefix: str = "", bundle: str = "tool", timeout: float = TIMEOUT
) -> list[Tool]:
    """One tool per entry of the server's `tools/list`, in the server's order."""
    listed, info = list_server(command, timeout=timeout)
    server: dict[str, Any] = {"command": command[0], "args": list(command[1:])}
    server |= {key: info[key] for key in ("name", "version") if isinstance(info.get(key), str) and info[key]}
    return [_tool(entry, server, prefix, bundle) for entry in listed]


def list_server_tools(command: Sequence[str], *, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """The server's tools as plain dicts (`name`, `description`, `inputSchema`)."""
    return list_server(command, timeout=timeout)[0]


def list_server(
    command: Sequence[str], *, timeout: float = TIMEOUT
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The server's tools as plain dicts, and the identity it announced (its `serverInfo`)."""
    if not command:
        raise ImporterError("no MCP server command given")
    if shutil.which(command[0]) is None:
        raise ImporterError(f'cannot start the MCP server: "{command[0]}" is not an executable')
    import anyio

    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        try:
            return anyio.run(_list, list(command), timeout, errlog)
        except TimeoutError as e:
            raise ImporterError(f"the MCP server {command[0]} did not list its tools in {timeout:g} s") from e
        except Exception as e:
            errlog.seek(0)
            last = [line for line in errlog.read().splitlines() if line.strip()][-1:]
            detail = last[0] if last else _first_line(e)
            raise ImporterError(f"the MCP server {command[0]} failed: {detail}") from e


async def _list(
    command: list[str], timeout: float, errlog: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.types import PaginatedRequestParams

    params = StdioServerParameters(command=command[0], args=command[1:])
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(timeout):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            started = await session.initialize()
            info = started.server_info.model_dump(by_alias=True, exclude_none=True)
            cursor: str | None = None
            while True:
                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                tools += [t.model_dump(by_alias=True, exclude_none=True) for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    return tools, info


def _first_line(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _tool(entry: dict[str, Any], server: dict[str, Any], prefix: str, bundle: str) -> Tool:
    name = str(entry.get("name", ""))
    schema = dict(entry.get("inputSchema") or {"type": "object", "properties": {}})
    schema.pop("$schema", None)
    properties = schema.get("properties") or {}
    contract: dict[str, Any] = {"method": "MCP", "server": server, "tool": name}
    if all(ARG_NAME.match(arg) for arg in properties):
        contract["arguments"] = {arg: "{" + arg + "}" for arg in properties}
    description = str(entry.get("description") or "").strip()
    origin = shlex.join([server["command"], *server["args"]])
    try:
        return Tool.from_frontmatter(
            {
                "name": row_name(prefix + name),
                "description": description.split("\n\n")[0] or f"The {name} tool of an MCP server.",
                "args": schema,
                "upstream": contract,
            },
            f"# {prefix + name}\n\n{description}\n\n## Upstream\n\nImported from the MCP server `{origin}`.\n"
            if description
            else f"# {prefix + name}\n\n## Upstream\n\nImported from the MCP server `{origin}`.\n",
            bundle=bundle,
        )
    except ToolError as e:
        raise ImporterError(f"MCP tool {name}: {e}") from e
