"""The proxy's settings as one value, resolved once from its options, the environment and defaults.

`LocalRoutes.configure()` calls `resolve(ctx.options)` and hands the result to every part it builds
(the Directory's routes, the Ledger's, the door, the MCP route), so `mitmdump -s
addons/mitmdump_entry.py --set flightlog_directory=DIR` and `flightlog proxy --directory DIR` serve
and dispatch from the same Directory. No part reads mitmproxy's `ctx` or `os.environ` on its own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.configuration import environment
from storage.locations import default_blobs_url, default_ledger_url, default_secrets_file, flightlog_home


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """What the proxy's own routes and door run with.

    `open_mode` lets calls without a token through (local development only; the start line says
    so); `local_commands` lets the door run rows whose contract runs a command here, and then only
    with a token naming the tool.
    """

    home: Path
    ledger_url: str
    blobs_url: str
    directory: Path | None = None
    secrets_file: Path | None = None
    secret_env: tuple[str, ...] = ()
    open_mode: bool = False
    local_commands: bool = False


def resolve(options: Any, environ: Mapping[str, str] | None = None) -> ProxySettings:
    """The settings from mitmproxy's options (missing or empty ones fall back to the environment,
    then to FLIGHTLOG_HOME's defaults)."""
    env = os.environ if environ is None else environ

    def option(name: str, default: Any = "") -> Any:
        value = getattr(options, name, default)
        return default if value is None else value

    home = flightlog_home(env)
    folder = option("flightlog_directory") or environment("directory", env) or ""
    secrets = option("flightlog_secrets")
    return ProxySettings(
        home=home,
        ledger_url=option("flightlog_ledger") or default_ledger_url(env),
        blobs_url=option("flightlog_blobs") or default_blobs_url(env),
        directory=Path(folder).expanduser() if folder else None,
        secrets_file=Path(secrets).expanduser() if secrets else default_secrets_file(home),
        secret_env=tuple(option("flightlog_secret_env", ()) or ()),
        open_mode=bool(option("flightlog_open", False)),
        local_commands=bool(option("flightlog_local_commands", False)),
    )
