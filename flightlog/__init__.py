"""flightlog: the command line and the settings that wire storage, catalog, addons and tui together.

`flightlog.call(tool, args)` runs one canonical call through the dispatch door in this process, as
`flightlog call` does (the `function` form); `flightlog.client.Flightlog` calls the door through the
proxy (the `sdk` form).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def call(
    tool: str, args: dict[str, Any] | None = None, *, token: str | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """Run `{"tool": tool, "args": args}` through the door here; the door's reply (a refusal too).

    The same door as `flightlog call` (door `cli`, recorded in the Ledger), over the Directory,
    Ledger, secrets and keys FLIGHTLOG_HOME and the FLIGHTLOG_* variables name; `token` defaults to
    FLIGHTLOG_TOKEN. Bad settings raise flightlog's own errors, as the command line reports them.
    """
    from flightlog.direct import call as run  # deferred: the door loads only when a call is made

    return run(tool, args or {}, token=token, dry_run=dry_run)
