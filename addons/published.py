"""What a running proxy publishes: `proxy.json` in FLIGHTLOG_HOME (how `flightlog run` and
`flightlog env` find it) and its one start line; in a worker, the supervisor is told instead and
publishes for every worker."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from addons.proxy_config import CA_FILE, ProxyConfig
from addons.proxy_env import STATE_FILE

if TYPE_CHECKING:
    from addons.worker_link import WorkerLink


class Ready:
    """Once mitmproxy listens: prints the start line and writes `proxy.json`, or, in a worker,
    tells the supervisor (which does both once every worker listens)."""

    def __init__(
        self, config: ProxyConfig, announce: Callable[[str], None], link: WorkerLink | None = None
    ) -> None:
        self.config = config
        self.announce = announce
        self.link = link

    def running(self) -> None:
        from mitmproxy import ctx

        server = ctx.master.addons.get("proxyserver")
        apis = {ai.mode: ai.api for ai in self.config.ai_listeners}
        listeners = []
        for instance in server.servers:
            addrs = instance.listen_addrs
            if addrs:
                spec = instance.mode.full_spec
                listener = {"mode": spec, "host": addrs[0][0], "port": addrs[0][1]}
                listeners.append(listener | ({"api": apis[spec]} if spec in apis else {}))
        if self.link is not None:
            from addons.egress_policy import watched_files
            from recording.processing_watch import watched

            self.link.ready(listeners, [str(p) for p in (*watched(ctx.options), *watched_files(ctx.options))])
            return
        write_state(self.config, os.getpid(), listeners)
        self.announce(start_line(self.config, listeners))

    def done(self) -> None:
        forget_state(self.config.home, os.getpid(), self.config.state_file)


def write_state(config: ProxyConfig, pid: int, listeners: list[dict[str, Any]], **more: object) -> None:
    """`proxy.json`: how `flightlog run` and `flightlog env` find the running proxy."""
    ca = config.confdir / CA_FILE
    state = {"pid": pid, "listeners": listeners, "ca": str(ca), "ledger": config.ledger_url, **more}
    (config.home / config.state_file).write_text(json.dumps(state))


def forget_state(home: Path, pid: int, name: str = STATE_FILE) -> None:
    """Remove `proxy.json` if it is `pid`'s (a proxy started since keeps its own)."""
    state = home / name
    try:
        if json.loads(state.read_text()).get("pid") == pid:
            state.unlink()
    except (OSError, ValueError):
        pass


def start_line(config: ProxyConfig, listeners: list[dict[str, Any]], workers: int = 1) -> str:
    """The one line a started proxy prints: where it listens, records, and how to trust its CA."""
    where = ", ".join(f"{item['mode']} on {item['host']}:{item['port']}" for item in listeners)
    return (
        f"flightlog proxy: listening {where}"
        + (f" ({workers} workers)" if workers > 1 else "")
        + f"; recording to {redact_url(config.ledger_url)} "
        f"(blobs {config.blobs_url}); trust the CA at {config.confdir / CA_FILE} (or run `flightlog env`)"
        + (
            "; OPEN MODE: calls need no token, anyone who reaches this port can run rows"
            if config.open_mode
            else ""
        )
        + ("; local commands enabled (only with a token naming the tool)" if config.local_commands else "")
    )


def redact_url(url: str) -> str:
    """A database URL without its password, for the start line."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
