"""`flightlog browse`: the Ledger in the terminal (the Textual browser in `tui/`).

The browser may import only storage and catalog, so this command hands it what needs more: the join
to the Directory (`directory_lookup`) and the replay (`replay_with_cli`).
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from flightlog.commands.options import BlobsOpt, LedgerOpt, WordsArg
from flightlog.settings import load_settings


def replay_with_cli(action_id: str, ledger_url: str | None = None, blobs_url: str | None = None) -> str:
    """Replay through `flightlog replay ACTION_ID` in a subprocess (the browser cannot import addons).

    The subprocess reads the same Ledger as the browser: `--ledger`/`--blobs` given to `browse` are
    passed on as FLIGHTLOG_LEDGER/FLIGHTLOG_BLOBS.
    """
    env = dict(os.environ)
    if ledger_url:
        env["FLIGHTLOG_LEDGER"] = ledger_url
    if blobs_url:
        env["FLIGHTLOG_BLOBS"] = blobs_url
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "replay", action_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    text = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        from tui.errors import TuiError

        raise TuiError(text.splitlines()[-1] if text else f"replay exited with {done.returncode}")
    return text


def directory_lookup(ledger_url: str, folder: Path | None) -> Any:
    """The join from a tool name to its Directory row and contracts (a `tui.source.DirectoryLookup`).

    The Directory is opened on the first lookup, in the browser's worker thread, so it never delays
    the first screen; a name with no tool row gives None (the browser says so).
    """
    from catalog.contracts import example_args, forms
    from catalog.directory import Directory, open_directory
    from catalog.errors import UnknownRow
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


def browse(
    words: WordsArg = None,
    follow: Annotated[
        float, typer.Option("--follow", help="Seconds between reads of new events (0: off).")
    ] = 1.0,
    ledger_url: LedgerOpt = None,
    blobs_url: BlobsOpt = None,
) -> None:
    """Browse the Ledger in the terminal: newest first, following new events."""
    from tui.app import BrowseApp
    from tui.source import LedgerSource

    settings = load_settings()
    ledger = settings.open_ledger(ledger_url, blobs_url)
    try:
        lookup = directory_lookup(ledger_url or settings.ledger_url, settings.directory)
        replayer = functools.partial(replay_with_cli, ledger_url=ledger_url, blobs_url=blobs_url)
        source = LedgerSource(ledger, directory=lookup, replayer=replayer)
        BrowseApp(source, question=" ".join(words or []), follow_seconds=follow or None).run()
    finally:
        ledger.close()
