"""`flightlog browse`, `replay`, `serve-replay` and `export`: look at the Ledger and use what it kept."""

from __future__ import annotations

import typer

from flightlog.commands.pending import not_built


def register(app: typer.Typer) -> None:
    """Add the browse and replay commands to the root app."""

    @app.command()
    def browse() -> None:
        """Browse the Ledger in the terminal."""
        not_built("browse", 6)

    @app.command()
    def replay(action_id: str) -> None:
        """Send a recorded request again and diff the answers."""
        not_built("replay", 6)

    @app.command("serve-replay")
    def serve_replay() -> None:
        """A hermetic proxy that answers from the Ledger."""
        not_built("serve-replay", 6)

    @app.command()
    def export() -> None:
        """Export events as HAR, a mitmproxy flow file or JSON lines."""
        not_built("export", 6)
