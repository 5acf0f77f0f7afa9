"""`flightlog.call(tool, args)`: the dispatch door in this process, as a Python function (the
`function` form). It is `flightlog call` without the command line: the same settings, secrets, root
key and refused hosts (`flightlog.commands.call.open_dispatcher`), the same door name (`cli`), so a
call made this way is recorded and limited exactly as one made from the shell."""

from __future__ import annotations

import os
from typing import Any

from flightlog.commands.call import open_dispatcher
from flightlog.settings import load_settings


def call(
    tool: str, args: dict[str, Any], *, token: str | None = None, dry_run: bool = False
) -> dict[str, Any]:
    """One canonical call through a door opened for it (closed afterwards); the door's reply."""
    door = open_dispatcher(load_settings(), None, None, None)
    try:
        given = token if token is not None else os.environ.get("FLIGHTLOG_TOKEN") or None
        result = door.dispatch({"tool": tool, "args": args}, door="cli", token=given, dry_run=dry_run)
    finally:
        door.close()
        door.ledger.close()
        if door.directory is not None:
            door.directory.close()
    return dict(result.reply)
