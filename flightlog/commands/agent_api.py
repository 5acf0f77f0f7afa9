"""`flightlog find`, `get`, `manifest` and `mcp`: the Directory's agent API on the command line.

The same calls `catalog.agent_api` answers over HTTP and MCP. Every command takes `--directory DIR`
(or FLIGHTLOG_DIRECTORY); without one the native Directory in the Ledger's database is used, seeded
from the starter rows on first use.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from flightlog.commands.call import open_dispatcher
from flightlog.commands.directory import open_from_settings
from flightlog.commands.options import DirectoryOpt, JsonOpt
from flightlog.settings import load_settings
from formats.terminal_text import json_text, shown, shown_lines


def find(
    words: Annotated[list[str], typer.Argument(help="Words, a name, or a question.")],
    k: Annotated[int, typer.Option("--k", help="How many rows at most.")] = 10,
    bundle: Annotated[str | None, typer.Option("--bundle", help="Only rows of this bundle.")] = None,
    as_json: JsonOpt = False,
    directory: DirectoryOpt = None,
) -> None:
    """Rows matching WORDS, each with its score, layer and the words that matched."""
    from catalog.resolver import no_match  # deferred: the index and aliases are slow to import

    query = " ".join(words)
    d = open_from_settings(directory)
    try:
        hits = d.find(query, k=k, bundle=bundle)
    finally:
        d.close()
    if as_json:
        out = {
            "query": query,
            "hits": [
                {
                    "id": h.row.id,
                    "bundle": h.row.bundle,
                    "name": h.row.name,
                    "score": h.score,
                    "layer": h.layer,
                    "matched": list(h.matched),
                    "read_as": list(h.read_as),
                    "summary": h.row.summary,
                }
                for h in hits
            ],
        }
        if not hits:
            out["message"] = no_match(query)
        typer.echo(json_text(out, sort_keys=False))
    else:
        for h in hits:
            fields = (h.score, h.layer, h.row.id, " ".join(h.matched), h.row.summary)
            typer.echo("\t".join(shown(f) for f in fields))
        if not hits:
            typer.echo(no_match(query))
    if not hits:
        raise typer.Exit(1)


def get(
    ids: Annotated[list[str], typer.Argument(help="Row ids from the manifest.")],
    section: Annotated[
        str | None, typer.Option("--section", help="One section: frontmatter, body, or a heading's slug.")
    ] = None,
    offset: Annotated[int | None, typer.Option("--offset", help="Start at this character.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="At most this many characters.")] = None,
    find: Annotated[str | None, typer.Option("--find", help="A window around this literal phrase.")] = None,
    directory: DirectoryOpt = None,
) -> None:
    """Bounded slices of rows, framed `@@ id [start..end of total]`."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.agent_api import AgentApi

    d = open_from_settings(directory)
    try:
        text = AgentApi(d).get(ids, section, offset, limit, find)
    finally:
        d.close()
    typer.echo(shown_lines(text), nl=not text.endswith("\n"))
    if text.startswith("@@ missing") or "\n@@ missing\n" in text:
        raise typer.Exit(1)


def manifest(
    bundle: Annotated[str | None, typer.Option("--bundle", help="Only this bundle's rows.")] = None,
    names: Annotated[bool, typer.Option("--names", help="Ids only (the cheap projection).")] = False,
    sizes: Annotated[bool, typer.Option("--sizes", help="Byte sizes and token estimates instead.")] = False,
    directory: DirectoryOpt = None,
) -> None:
    """The Directory as TSV, one row per capability."""
    # deferred: the Directory (SQLAlchemy) loads slowly; other commands start without it
    from catalog.agent_api import AgentApi

    d = open_from_settings(directory)
    try:
        api = AgentApi(d)
        if sizes:
            for label, size in api.sizes().items():
                typer.echo(f"{label}\t{size.bytes} bytes\t~{size.tokens} tokens")
            return
        typer.echo(shown_lines(api.manifest(bundle, names)), nl=False)
    finally:
        d.close()


def mcp(
    database_tools: Annotated[
        bool, typer.Option("--database-tools", help="Also serve transact, history and restore.")
    ] = False,
    agent: Annotated[str | None, typer.Option("--agent", help="The agent this session acts for.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="The task its calls are filed under.")] = None,
    directory: DirectoryOpt = None,
) -> None:
    """Serve the Directory's agent API over MCP stdio (every verb judged with the session's token)."""
    import importlib
    import threading

    # deferred: the MCP SDK loads slowly; other commands start without it
    from catalog.mcp_server import serve

    # The SDK's import is the largest part of starting up: overlap it with opening the Directory.
    preload = threading.Thread(target=importlib.import_module, args=("mcp.server",), daemon=True)
    preload.start()
    d = open_from_settings(directory)
    d.network = True  # a network door: its writes never touch a row that runs a command here
    d.follow()  # and a long-lived one: a folder edit is seen at the next verb
    preload.join()
    door = StdioDoor(directory, agent, task)
    try:
        serve(d, database_tools=database_tools, dispatch=door.dispatch, authorize=door.authorize)
    finally:
        d.close()


class StdioDoor:
    """`flightlog mcp`'s door (door `mcp`), built on the first verb so the server starts without it.

    The session acts with FLIGHTLOG_TOKEN (what a client configuration or `flightlog run` sets),
    else with a token minted from the operator's policy in FLIGHTLOG_HOME (`authority.lending`): never
    more than that policy grants. Every verb asks the gate with it (`authorize`), for the agent and
    task the command was started with; a `call` naming its own token runs with that one instead.
    Refusals are filed in the Ledger like the proxy's."""

    def __init__(
        self, directory: Path | None, agent: str | None, task: str | None, token: str | None = None
    ) -> None:
        import threading

        self.directory = directory
        self.agent, self.task, self.token = agent, task, token
        self._lock = threading.Lock()
        self._built: tuple[Any, str] | None = None

    def _door(self) -> tuple[Any, str]:
        import os
        from datetime import UTC, datetime

        # deferred: the policy reads the Directory (SQLAlchemy), loaded on the first verb only
        from authority import tokens
        from authority.lending import mint_policy_token

        with self._lock:
            if self._built is None:
                settings = load_settings()
                door = open_dispatcher(settings, self.directory, None, None, network=True)
                self._built = door, self.token or os.environ.get("FLIGHTLOG_TOKEN") or ""
            door, lent = self._built
            minted = not (self.token or os.environ.get("FLIGHTLOG_TOKEN"))
            expires = tokens.decode(lent).limits().expires if lent else None
            if minted and (not lent or (expires is not None and expires <= datetime.now(UTC))):
                # the policy's token, minted again when it lapses: a session outlives its 24 h
                lent = mint_policy_token(load_settings().home, door.directory)
                self._built = door, lent
            return door, lent

    def _identity(self) -> Any:
        from recording.identity import Identity

        return Identity(agent=self.agent, task=self.task)

    def dispatch(self, call: dict[str, Any], token: str | None) -> tuple[bool, str]:
        """The `call` tool: one canonical call through the door."""
        door, lent = self._door()
        result = door.dispatch(call, door="mcp", token=token or lent, identity=self._identity())
        return bool(result.reply.get("ok")), json.dumps(result.reply, ensure_ascii=False)

    def authorize(self, verb: str, request: str, arguments: dict[str, Any]) -> None:
        """The gate for one request of the session (a use spent when it spends): a write is judged
        on the rows it changes; a refusal is filed and raised as the verb's error."""
        from datetime import UTC, datetime

        from authority.gate import Ask, GateRefused, admit
        from authority.targets import rows_of_request

        door, lent = self._door()
        rows = rows_of_request(door.directory, request, arguments) if verb == "write" else ()
        who = self._identity()
        ask = Ask(verb, "mcp", datetime.now(UTC), rows, who.agent, who.task)
        try:
            admit(lent, ask, door.root_key, door.book)
        except GateRefused as e:
            door.file_refusal("mcp", f"MCP {verb}".encode(), (e.limit, str(e)), who)
            raise GateRefused(e.limit, f"refused by {e.limit}: {e}") from e
