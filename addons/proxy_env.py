"""The environment that routes a program through a running flightlog proxy.

Read by `flightlog run` and `flightlog env` from `proxy.json`, which the proxy writes into
FLIGHTLOG_HOME when it listens. Which client reads which variable (measured, see
reference/mitmproxy.md): curl wants lowercase `http_proxy` for http URLs, requests reads
`REQUESTS_CA_BUNDLE`/`CURL_CA_BUNDLE` and not `SSL_CERT_FILE`, httpx and urllib read `SSL_CERT_FILE`,
and Node 20 ignores proxy variables, hence the model APIs' base URLs pointed at reverse listeners
(tagged in `proxy.json` with the API they stand for, `addons.ai_listeners`). Newer Node uses the
proxy variables when `NODE_USE_ENV_PROXY=1`, so that is set too. Measured under `flightlog run`:
20.20.2 and 22.20.0 ignore it; 22.21.0 and 22.23.3 send `fetch` and `http` through the proxy; 24.0.0
sends `fetch` only, 24.21.0 both.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from addons.ai_listeners import AiApi, api_for_host, api_named, mode_target_host
from recording.identity import EMPTY, PATH_PREFIX, Identity

STATE_FILE = "proxy.json"
PASSWORD = "flightlog"
NODE_ENV_PROXY = {"NODE_USE_ENV_PROXY": "1"}
"""Node >= 22.21 and 24.x: fetch (and http, 22.21+ / later 24.x) use HTTP(S)_PROXY; older Node ignores it."""


@dataclass(frozen=True, slots=True)
class Listener:
    mode: str
    host: str
    port: int
    api: str = ""
    """The model API a default AI listener stands for (`addons.ai_listeners`), else empty."""

    def feeds(self) -> AiApi | None:
        """The API whose base-URL variable points here: by tag, else by a reverse target's host."""
        if self.api:
            return api_named(self.api)
        return api_for_host(mode_target_host(self.mode)) if self.mode.startswith("reverse:") else None


@dataclass(frozen=True, slots=True)
class ProxyState:
    """A running proxy as it described itself in `proxy.json`."""

    pid: int
    listeners: tuple[Listener, ...]
    ca: Path

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProxyState:
        return cls(
            pid=int(data["pid"]),
            listeners=tuple(
                Listener(str(x["mode"]), str(x["host"]), int(x["port"]), str(x.get("api", "")))
                for x in data["listeners"]
            ),
            ca=Path(data["ca"]),
        )

    @property
    def forward(self) -> Listener | None:
        """The regular (forward) listener, if any."""
        return next((x for x in self.listeners if x.mode.startswith("regular")), None)

    @property
    def reverse(self) -> tuple[Listener, ...]:
        return tuple(x for x in self.listeners if x.mode.startswith("reverse"))


def read_state(home: Path, name: str = STATE_FILE) -> ProxyState | None:
    """The running proxy of this FLIGHTLOG_HOME, or None when there is none (or it died)."""
    try:
        state = ProxyState.from_json(json.loads((home / name).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    forward = state.forward
    if forward is not None:
        try:
            with socket.create_connection((_connect_host(forward.host), forward.port), timeout=1):
                pass
        except OSError:
            return None
    return state


def _connect_host(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0") else ("::1" if host == "::" else host)


def _url_host(host: str) -> str:
    host = _connect_host(host)
    return f"[{host}]" if ":" in host else host


def proxy_env(
    forward: tuple[str, int], ca: Path, identity: Identity = EMPTY, reverse: tuple[Listener, ...] = ()
) -> dict[str, str]:
    """The variables a child process needs to go through the proxy and trust its CA."""
    userinfo = identity.userinfo()
    # A password is there only because some clients (requests) send proxy credentials only with one.
    cred = f"{userinfo}:{PASSWORD}@" if userinfo else ""
    url = f"http://{cred}{_url_host(forward[0])}:{forward[1]}"
    env = {name: url for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        env[name] = str(ca)
    env |= NODE_ENV_PROXY
    for listener in reverse:
        if (api := listener.feeds()) is not None and api.variable not in env:
            prefix = f"{PATH_PREFIX.rstrip('/')}/{userinfo}" if userinfo else ""  # who, for fetch clients
            env[api.variable] = f"http://{_url_host(listener.host)}:{listener.port}{prefix}{api.path}"
    return env


def export_lines(env: dict[str, str]) -> str:
    """`export NAME='value'` lines for a POSIX shell."""
    import shlex

    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in env.items())
