"""The model APIs a proxy listens for by default: one reverse listener each, and the variable it feeds.

Clients that ignore proxy variables (Node 20's fetch, SDKs with their own HTTP stack) still honour
a base-URL variable. So `flightlog proxy` opens a reverse listener per API below on a port fixed
before mitmproxy starts (`flightlog.ports`), and publishes it in `proxy.json` tagged with the API's
name: `run` and `env` read the variable from the tag, so a listener pointed elsewhere with
`--ai-upstream NAME=URL` (a gateway, or a test's local upstream) feeds the same variable by the same
code as the default one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from formats.model_apis import PROVIDERS, Provider, provider_for_host, provider_named

AiApi = Provider
AI_APIS: Final = PROVIDERS
"""In port order: the first listens on the forward port + 1, the next on + 2 (`formats.model_apis`,
the one list of model APIs: what a listener stands for is what usage and budgets read)."""


@dataclass(frozen=True, slots=True)
class AiListener:
    """One planned reverse listener: the API it stands for, where it forwards, its concrete port."""

    api: str
    target: str
    port: int

    @property
    def mode(self) -> str:
        """The mitmproxy mode spec; `proxy.json` lists the listener under exactly this string."""
        return f"reverse:{self.target}@{self.port}"

    @property
    def hostport(self) -> str:
        """`host:port` of the target, for the outbound-hosts option (its traffic is direction out)."""
        parts = urlsplit(self.target)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return f"{parts.hostname}:{port}"


api_named = provider_named
api_for_host = provider_for_host


def mode_target_host(mode: str) -> str:
    """The target host of a `reverse:URL[@PORT]` spec (`reverse:https://api.openai.com@0` -> the host)."""
    return mode.partition(":")[2].split("://", 1)[-1].split("@")[0].split("/")[0].split(":")[0]


def parse_upstreams(values: Iterable[str]) -> dict[str, str]:
    """`--ai-upstream NAME=URL` pairs; a bad one raises ValueError saying what is wrong."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, url = item.partition("=")
        if not sep or api_named(name) is None:
            names = ", ".join(api.name for api in AI_APIS)
            raise ValueError(f"--ai-upstream wants NAME=URL with NAME one of {names}, not {item!r}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(f"--ai-upstream {item!r}: URL must be http(s)://HOST[:PORT] with no path")
        out[name] = url.rstrip("/")
    return out


def wanted(user_modes: Sequence[str]) -> tuple[AiApi, ...]:
    """The APIs that get a default listener: those the user gave no reverse listener of their own."""
    given = {mode_target_host(m) for m in user_modes if m.startswith("reverse:")}
    return tuple(api for api in AI_APIS if api.host not in given)


def plan(apis: Sequence[AiApi], ports: Sequence[int], upstreams: Mapping[str, str]) -> tuple[AiListener, ...]:
    """One listener per API on the port at the same position, forwarding to its upstream."""
    return tuple(
        AiListener(api.name, upstreams.get(api.name, api.url), port)
        for api, port in zip(apis, ports, strict=True)
    )
