"""The agent API over MCP (stdio), with the official SDK's `MCPServer`.

The SDK is imported only inside `build_server`, so nothing else in flightlog pays for it. Tools keep
the agent API's order (manifest, search, get, snapshot, write, delete; transact, history, restore
with `database_tools`) and its hand-written input schemas (smaller than generated ones: they are
paid in every session's prompt). Every result is one text block; a failure is an `isError`
result carrying the refusal text, never a protocol error. The manifest is also the resource
`flightlog://manifest`, for clients that preload resources into the cached prefix. Given a
dispatcher, a `call` tool runs rows through flightlog's door (what the contracts' MCP forms call).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from catalog.agent_api import MCP_READ_CAP, AgentApi
from catalog.agent_tools import ToolSpec, check_arguments, tools
from catalog.directory import Directory
from catalog.errors import CatalogError

if TYPE_CHECKING:
    from mcp.server import MCPServer

MANIFEST_URI: Final = "flightlog://manifest"
CHANGES: Final = frozenset({"write", "delete", "transact", "restore"})
INSTRUCTIONS: Final = (
    "flightlog's Directory lists every capability as a row holding its runnable call. Read the manifest "
    "(or search it), then get every id you need in one call."
)


Dispatch = Callable[[dict[str, Any], str | None], tuple[bool, str]]
"""Runs one canonical call (with an optional scoped token): (ok, the JSON reply as text)."""
Authorize = Callable[[str, str, dict[str, Any]], None]
"""Asks the gate whether the session may make one request: (the verb, `read` or `write`; the agent
API's request name; its arguments as the HTTP bodies name them). Raises a `CatalogError` (the gate's
refusal, filed by whoever wired it) when not. Which rows a write changes is the wiring side's to
read (`authority.targets.rows_of_request`): authority judges the Directory, not the other way round."""


def build_server(
    directory: Directory,
    *,
    database_tools: bool = False,
    dispatch: Dispatch | None = None,
    authorize: Authorize | None,
) -> MCPServer:
    """An `MCPServer` serving the agent API over `directory` (reads capped at 15,000 characters).

    With `dispatch`, the `call` tool runs Directory rows through it (the proxy's door, wired by the
    command line: the catalog itself never imports the addons). `authorize` is the gate every verb
    asks first (its write verbs for the rows they change); None only where the transport already
    judged each request before it reached the server (the proxy's `/api/mcp`).
    """
    from mcp.server import MCPServer
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.types import CallToolResult, TextContent, ToolAnnotations

    api = AgentApi(directory, cap=MCP_READ_CAP)
    advice = api.advice()

    def guarded(verb: Any) -> Any:
        @functools.wraps(verb)
        def run(**kwargs: Any) -> CallToolResult:
            given = {k: v for k, v in kwargs.items() if v is not None}
            try:
                if authorize is not None:
                    verb_name = "write" if verb.__name__ in CHANGES else "read"
                    authorize(verb_name, verb.__name__, _arguments(given))
                text, failed = str(verb(**given)), False
            except CatalogError as e:
                text, failed = str(e), True
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=failed)

        return run

    def manifest(
        bundle: str | None = None,
        names: bool | None = None,
        offset: int | None = None,
        limit: int | None = None,
    ) -> str:
        return api.manifest(bundle, bool(names), offset, limit)

    def search(query: str, k: int | None = None, bundle: str | None = None) -> str:
        return api.search(query, k, bundle)

    def get(
        ids: list[str],
        section: str | None = None,
        offset: int | None = None,
        limit: int | None = None,
        find: str | None = None,
    ) -> str:
        return api.get(ids, section, offset, limit, find)

    def snapshot() -> str:
        return api.snapshot()

    def write(bundle: str, path: str, content: str, replaces: str | None = None) -> str:
        return api.write(bundle, path, content, replaces)

    def delete(bundle: str, path: str, replaces: str | None = None) -> str:
        return api.delete(bundle, path, replaces)

    def transact(changes: list[dict[str, Any]], expectedRevision: int | None = None) -> str:
        return api.transact(changes, expectedRevision)

    def history(before: str | None = None, limit: int | None = None) -> str:
        return api.history(before, limit)

    def restore(revision: int, expectedRevision: int) -> str:
        return api.restore(revision, expectedRevision)

    def call(tool: str, args: dict[str, Any] | None = None, token: str | None = None) -> Any:
        assert dispatch is not None
        ok, reply = dispatch({"tool": tool, "args": args or {}}, token)
        return CallToolResult(content=[TextContent(type="text", text=reply)], is_error=not ok)

    verbs = {
        f.__name__: f for f in (manifest, search, get, snapshot, write, delete, transact, history, restore)
    }

    def registered(spec: ToolSpec) -> Tool:
        description = f"{spec.description} {advice}" if spec.name == "manifest" else spec.description
        hints = ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        )
        tool = StrictTool.from_function(
            call if spec.name == "call" else guarded(verbs[spec.name]),
            name=spec.name,
            title=spec.title,
            description=description,
            annotations=hints,
            structured_output=False,
        )
        return tool.model_copy(update={"parameters": spec.schema, "spec": spec})

    class StrictTool(Tool):
        """A tool whose arguments are checked against its hand-written schema before the SDK sees
        them: the SDK's own model drops unknown names and answers a raw validation message."""

        spec: ToolSpec | None = None

        async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
            if self.spec is not None:
                try:
                    arguments = check_arguments(self.spec, arguments)
                except CatalogError as e:
                    return CallToolResult(content=[TextContent(type="text", text=str(e))], is_error=True)
            return await super().run(arguments, context, convert_result)

    server: MCPServer = MCPServer(
        "flightlog",
        version=_version(),
        instructions=INSTRUCTIONS,
        tools=[registered(spec) for spec in tools(database_tools, call=dispatch is not None)],
        log_level="WARNING",
    )

    @server.resource(
        MANIFEST_URI,
        name="manifest",
        description="The Directory's manifest (TSV), the same text as the manifest tool.",
        mime_type="text/tab-separated-values",
    )
    def manifest_resource() -> str:
        if authorize is not None:
            authorize("read", "manifest", {})
        return api.whole_manifest()  # whole: a client preloads it on purpose (the tool pages)

    return server


def _arguments(given: dict[str, Any]) -> dict[str, Any]:
    """The agent API's arguments as the Directory's HTTP bodies name them (`expectedRevision`)."""
    return {("expected_revision" if k == "expectedRevision" else k): v for k, v in given.items()}


def _version() -> str:
    """flightlog's installed version, for `serverInfo.version` (a client logs and compares it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("flightlog")
    except PackageNotFoundError:
        return "0+unknown"


def serve(
    directory: Directory,
    *,
    database_tools: bool = False,
    dispatch: Dispatch | None = None,
    authorize: Authorize,
) -> None:
    """Serve over stdio until the client closes the stream, every verb judged by `authorize`."""
    build_server(directory, database_tools=database_tools, dispatch=dispatch, authorize=authorize).run()
