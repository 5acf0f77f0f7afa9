"""What `flightlog proxy` passes to mitmproxy, and where it keeps its CA: one frozen value, the same
for a single proxy and for every worker (`addons.workers` sends it to them as JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from addons.ai_listeners import AiListener
from addons.proxy_env import STATE_FILE
from storage.configuration import COMMIT_MS, DEFAULT_OUTBOUND, default

CA_FILE = "mitmproxy-ca-cert.pem"


@dataclass(frozen=True)
class ProxyConfig:
    """Everything `flightlog proxy` passes to mitmproxy."""

    home: Path
    ledger_url: str
    blobs_url: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    modes: tuple[str, ...] = ("regular",)
    ai_listeners: tuple[AiListener, ...] = ()
    """The model APIs' reverse listeners (`addons.ai_listeners`), on concrete ports, after `modes`."""
    secrets: str = ""
    secret_env: tuple[str, ...] = ()
    sync_paths: tuple[str, ...] = ()
    stream_grace: int = default("stream_grace")
    max_request_body: str = default("max_request_body")
    redact_auth_headers: bool = default("redact_auth_headers")
    collector: str = ""
    stats_file: str = ""
    commit_ms: int = COMMIT_MS
    """How long the writer gathers events before a batch commits (`capture_options.commit_ms`)."""
    directory: str = ""
    open_mode: bool = False
    """Calls through the door need no token (local development only; the start line says so)."""
    local_commands: bool = False
    """The door may run rows whose contract runs a command here, with a token naming the tool."""
    extra: tuple[str, ...] = ()
    """Further mitmproxy options as NAME=VALUE, e.g. `ssl_verify_upstream_trusted_ca=FILE`."""
    policy: str = ""
    """The egress policy file (`addons.egress_policy`; empty: FLIGHTLOG_HOME/egress.toml if there is one)."""
    state_file: str = STATE_FILE
    """Its `proxy.json` (a sealed command's own proxy has another, so a running one keeps its own)."""

    @property
    def confdir(self) -> Path:
        return self.home / "mitmproxy"

    @property
    def all_modes(self) -> list[str]:
        return [*self.modes, *(ai.mode for ai in self.ai_listeners)]

    @property
    def outbound_hosts(self) -> list[str]:
        """The model APIs' hosts, and the `host:port` each AI listener forwards to (its traffic is
        outbound, wherever `--ai-upstream` points it)."""
        extra = [ai.hostport for ai in self.ai_listeners]
        return list(dict.fromkeys([*DEFAULT_OUTBOUND, *extra]))
