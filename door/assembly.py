"""The one way a `Dispatcher` (and the proxy's `Door` around it) is built.

`open_dispatcher(...)` is what both the proxy (from its `ProxySettings`, when the first call
arrives) and `flightlog call` (from the CLI's settings) use, so the two run the same door over the
same Directory, Ledger, secrets (FLIGHTLOG_HOME/secrets.env unless another file is named), root key
and refused hosts. Refused hosts and secrets are re-read when their files change (`LiveConfig`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from authority.targets import located_in
from authority.tokens import root_key
from catalog.contracts import render_upstream
from catalog.directory import Directory, open_directory
from catalog.errors import NotCallable, UnknownRow
from catalog.tool import Tool
from door.dispatch import Dispatcher
from door.dispatch_record import door_collector
from door.gatekeeper import Gatekeeper
from door.http_face import Door, record_refusal
from door.live_config import LiveConfig
from door.proxy_settings import ProxySettings
from door.routes import Headers, Query
from readback.ledger_routes import api_token
from storage.chain.signing import LedgerKeys
from storage.ledger import Ledger, open_ledger


def find_in(directory: Directory) -> Callable[[str], Tool | None]:
    """`name -> Tool | None` over an open Directory (`Directory.tool(name)` gives its document)."""

    def find(name: str) -> Tool | None:
        try:
            doc = directory.tool(name)
        except NotCallable:
            raise  # found, outside tool/: the refusal says so, not "no tool named"
        except UnknownRow:
            return None
        return Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle)

    return find


def gatekeeper(dispatcher: Dispatcher) -> Gatekeeper:
    """The gate's shell for the proxy's routes, over the door's root key and Ledger; refusals are
    filed by the door (`Dispatcher.file_refusal`)."""

    def record(
        door: str, method: str, path: str, query: Query, headers: Headers, refusal: tuple[str, str]
    ) -> None:
        record_refusal(dispatcher, door, method, path, query, headers, refusal)

    own = dispatcher.secrets.get("FLIGHTLOG_LEDGER_TOKEN", "")
    return Gatekeeper(dispatcher.root_key, dispatcher.book, own, record)


def own_secrets(home: Path) -> dict[str, str]:
    """The secrets flightlog itself holds: the bearer token of its Ledger routes, so the starter
    rows (`Authorization: Bearer [FLIGHTLOG_LEDGER_TOKEN]`) can be called by a caller who may read
    the Ledger (the door checks that right before it spends this)."""
    return {"FLIGHTLOG_LEDGER_TOKEN": api_token(home)}


def open_rows(ledger_url: str, folder: Path | None, *, network: bool) -> Directory:
    """The Directory in the Ledger's database (the folder's space, or the native one). `network`:
    served to a network door for long, so its commits never touch a row that runs a command here,
    and it follows its folder (an edit is seen at the next call: `Directory.follow`)."""
    directory = open_directory(ledger_url, folder.expanduser() if folder else None)
    directory.network = network
    if network:
        directory.follow()
    return directory


def open_dispatcher(
    home: Path,
    ledger: Ledger,
    directory: Directory,
    secrets_file: Path | None,
    secret_env: tuple[str, ...] = (),
    *,
    open_mode: bool = False,
    local_commands: bool = False,
) -> Dispatcher:
    """The door over `directory` and `ledger`, with the secrets, root key and refused hosts of `home`."""
    live = LiveConfig(home, secrets_file, secret_env, own_secrets(home))
    hosts, secrets, _ = live.current()
    dispatcher = Dispatcher(
        find_in(directory),
        ledger,
        secrets,
        root_key(home),
        hosts,
        open_mode=open_mode,
        local_commands=local_commands,
        live=live,
        directory=directory,
        locate=located_in(directory),
        secret_hosts=live.secret_hosts,
        collector=door_collector(home),
    )
    dispatcher.local_dispatch = Door(dispatcher, render_upstream, directory).handle
    return dispatcher


def proxy_door(settings: ProxySettings, directory: Directory | None = None) -> Door:
    """The proxy's door, built from its resolved settings (on the first call, not at start-up)."""
    rows = directory or open_rows(settings.ledger_url, settings.directory, network=True)
    dispatcher = open_dispatcher(
        settings.home,
        open_ledger(settings.ledger_url, settings.blobs_url, keys=LedgerKeys(settings.home)),
        rows,
        settings.secrets_file,
        settings.secret_env,
        open_mode=settings.open_mode,
        local_commands=settings.local_commands,
    )
    return Door(dispatcher, render_upstream, rows)
