"""`flightlog browse`: the Ledger in the terminal (the Textual browser in `tui/`).

The browser may import only storage and catalog, so this command hands it what needs more: the join
to the Directory (`directory_lookup`), the reading of MCP messages under an exchange (`mcp_reader`),
the replay (`replayer`, which runs `readback.replay` in process) and the export of a
selection (`exporter`, `readback.export` into a file).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.errors import UnknownRow
from flightlog.commands.options import BlobsOpt, LedgerOpt, WordsArg
from flightlog.errors import CommandError
from flightlog.failures import known_errors
from flightlog.settings import load_settings
from formats.extras import require
from tui.errors import TuiError

if TYPE_CHECKING:
    # deferred: SQLAlchemy loads slowly; other commands start without it
    from storage.ledger import Ledger


def replayer(ledger: Ledger) -> Callable[[str], str]:
    """The browser's replay (a `tui.source.Replayer`): `flightlog replay ACTION_ID`, in process.

    The browser may not import addons; this command may, and hands the browser a function that
    replays through the Ledger the browser reads (the new exchange lands in it). A failure the
    user can act on becomes one `TuiError` line, which the browser shows as a notice.
    """

    def replay_action(action_id: str) -> str:
        # deferred: mitmproxy/httpx load slowly; other commands start without them
        from readback.replay import replay

        try:
            return replay(ledger, action_id, {}).render()
        except known_errors() as e:
            lines = str(e).strip().splitlines()
            raise TuiError(lines[0] if lines else f"replay of {action_id} failed ({type(e).__name__})") from e

    return replay_action


def mcp_reader(ledger: Ledger) -> Callable[[Any], bytes | None]:
    """The browser's MCP message reader (a `tui.source.McpReader`): a message under an exchange is a
    pointer into the exchange's payload, followed by `readback.mcp_bytes` (which the browser
    may not import)."""

    def read(event: Any) -> bytes | None:
        # deferred: the recording wing loads only when an MCP message is shown
        from readback.mcp_bytes import message_bytes

        return message_bytes(ledger, {"event_id": event.event_id, "payload_sha256": event.payload_sha256})

    return read


SUFFIXES = {"har": "har", "mitmproxy": "flows", "jsonl": "jsonl"}


def exporter(ledger: Ledger, folder: Path) -> Callable[[str, list[str]], str]:
    """The browser's export (a `tui.source.Exporter`): `flightlog export --action ...` into a new file.

    The file goes in `folder` (the directory browse was started in), named by the time and format; the
    line returned says how many exchanges went where.
    """

    def export_actions(fmt: str, action_ids: list[str]) -> str:
        from flightlog.failures import known_errors
        from readback.export import export, plan
        from readback.recorded import Selection
        from tui.errors import TuiError

        if fmt not in SUFFIXES:
            raise TuiError(f"export as {', '.join(SUFFIXES)}, not {fmt!r}")
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
        path = folder / f"flightlog-{stamp}.{SUFFIXES[fmt]}"
        try:
            ids = plan(ledger, Selection(actions=tuple(action_ids)), fmt)
            with path.open("wb") as out:
                count = export(ledger, fmt, ids, out)
        except OSError as e:
            raise TuiError(f"cannot write {path}: {e.strerror}") from e
        except known_errors() as e:
            lines = str(e).strip().splitlines()
            raise TuiError(lines[0] if lines else f"export failed ({type(e).__name__})") from e
        what = "events" if fmt == "jsonl" else "exchanges"
        return f"exported {count} {what} as {fmt} to {path}"

    return export_actions


def directory_lookup(ledger_url: str, folder: Path | None) -> Any:
    """The join from a tool name to its Directory row and contracts (a `tui.source.DirectoryLookup`).

    The Directory is opened on the first lookup, in the browser's worker thread, so it never delays
    the first screen; a name with no tool row gives None (the browser says so).
    """
    # deferred: the Directory (SQLAlchemy), Textual load slowly; other commands start without them
    from catalog.contracts import example_args, forms
    from catalog.directory import Directory, open_directory
    from catalog.tool import Tool
    from tui.source import ToolInfo

    opened: list[Directory] = []

    def lookup(name: str) -> ToolInfo | None:
        if not opened:
            opened.append(open_directory(ledger_url, folder))
        try:
            doc = opened[0].tool(name)
        except UnknownRow:
            return None
        tool = Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle)
        row = {"id": doc.id, "name": doc.name, "type": doc.bundle, "description": doc.description}
        return ToolInfo(doc.name, row, forms(tool, example_args(tool)))

    return lookup


WebOpt = Annotated[
    bool, typer.Option("--web", help="Serve the browser as a web page (on 127.0.0.1 unless --listen says).")
]
ListenOpt = Annotated[
    str | None, typer.Option("--listen", help="HOST:PORT the web page is served on (with --web).")
]
OpenOpt = Annotated[
    bool,
    typer.Option(
        "--open-to-network", help="Let --listen name an address other machines reach (they see the Ledger)."
    ),
]


def web_command(words: list[str], follow: float) -> str:
    """The shell command textual-serve runs for each page opened: this browser, in the terminal form
    (the Ledger's URLs travel in the environment, never on a command line `ps` shows)."""
    argv = [sys.executable, "-m", "flightlog", "browse", "--follow", repr(follow), "--", *words]
    return shlex.join(argv)


def serve_web(words: list[str], follow: float, listen: str | None, open_to_network: bool) -> None:
    """`browse --web`: the guarded textual-serve server (`tui.web`) until Ctrl-C."""
    require("textual_serve.server", "web")
    from tui.web import DEFAULT_LISTEN, GuardedServer, parse_listen

    try:
        where = parse_listen(listen or DEFAULT_LISTEN, open_to_network=open_to_network)
    except TuiError as e:
        raise CommandError(str(e)) from e
    try:
        GuardedServer(web_command(words, follow), where, title="flightlog browse").serve()
    except OSError as e:  # the port is taken, the address is not this machine's
        raise CommandError(f"cannot listen on {where.netloc}: {e.strerror or e}") from e


def browse(
    words: WordsArg = None,
    follow: Annotated[
        float, typer.Option("--follow", help="Seconds between reads of new events (0: off).")
    ] = 1.0,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
    web: WebOpt = False,
    listen: ListenOpt = None,
    open_to_network: OpenOpt = False,
) -> None:
    """Browse the Ledger in the terminal (or a web page, --web): newest first, following new events."""
    if web:
        for name, url in (("FLIGHTLOG_LEDGER", ledger_url), ("FLIGHTLOG_BLOBS", blobs_url)):
            if url:
                os.environ[name] = url  # the page's browser process reads them from its environment
        serve_web(words or [], follow, listen, open_to_network)
        return
    if listen or open_to_network:
        raise CommandError("--listen and --open-to-network go with --web")
    # deferred: Textual loads slowly; other commands start without it
    from egress.approvals import AskBook
    from tui.app import BrowseApp
    from tui.source import LedgerSource

    settings = load_settings()
    ledger = settings.open_existing_ledger(ledger_url, blobs_url)
    try:
        lookup = directory_lookup(ledger_url or settings.ledger_url, settings.directory)
        source = LedgerSource(
            ledger,
            directory=lookup,
            replayer=replayer(ledger),
            exporter=exporter(ledger, Path.cwd()),
            mcp_reader=mcp_reader(ledger),
        )
        question = " ".join(words or [])
        BrowseApp(source, question=question, follow_seconds=follow or None, asks=AskBook(settings.home)).run()
    finally:
        ledger.close()
