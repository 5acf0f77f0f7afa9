"""flightlog's settings, each declared once: its name, its environment variable, its default, its
help text and its type.

The proxy's mitmproxy options (`flightlog_NAME`, declared by `addons.capture_options` from this table),
`flightlog proxy`'s flags and its `ProxyConfig` take their defaults and help from here, and the
environment is read here only (`environment`): an option given wins, then its variable, then the
default. datasette keeps one settings tuple, mitmproxy derives each flag from its option; so do we.

The floor below everything that reads a setting (storage imports only formats), so the CLI, the
addons, the door and the recording pipeline all read the same row. Nothing is read at import time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from formats.model_apis import PROVIDERS

DEFAULT_OUTBOUND: Final = tuple(provider.host for provider in PROVIDERS)
"""Reverse-proxy targets whose traffic is outbound by default: the model APIs an agent calls
(`formats.model_apis`, the one list of them)."""
COMMIT_MS: Final = 50
"""How long a writer gathers events before a batch commits, when its proxy has the cores to itself."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: `name` (the proxy's option is `flightlog_NAME`, the flag `--NAME` with dashes),
    its mitmproxy type, its default, its help, and the environment variable read when it is not given
    (`env`; empty: none). `option`: the capture addon declares it as a mitmproxy option (False for
    FLIGHTLOG_HOME, which is none, and for `directory`, which the local routes' addon declares)."""

    name: str
    type: Any
    default: Any
    help: str
    env: str = ""
    option: bool = True

    @property
    def option_name(self) -> str:
        return f"flightlog_{self.name}"


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting(
        "home",
        str,
        "",
        "Where flightlog keeps its state (default: ~/.flightlog).",
        env="FLIGHTLOG_HOME",
        option=False,
    ),
    Setting(
        "ledger",
        str,
        "",
        "Ledger database URL (default: FLIGHTLOG_LEDGER).",
        env="FLIGHTLOG_LEDGER",
    ),
    Setting(
        "blobs",
        str,
        "",
        "Blob store URL, file:// or s3:// (default: FLIGHTLOG_BLOBS).",
        env="FLIGHTLOG_BLOBS",
    ),
    Setting(
        "collector",
        str,
        "",
        "This proxy's collector id in the Ledger.",
    ),
    Setting(
        "secrets",
        str,
        "",
        "File of NAME=value secrets replaced by [NAME].",
    ),
    Setting(
        "secret_env",
        Sequence[str],
        [],
        "Names of environment variables whose values are secrets.",
    ),
    Setting(
        "redact_auth_headers",
        bool,
        True,
        "Redact Authorization, Cookie, X-Api-Key and similar header values even when not configured.",
    ),
    Setting(
        "prices",
        str,
        "",
        "A price table file overriding the shipped one.",
    ),
    Setting(
        "stream_grace",
        int,
        25,
        "Seconds to keep reading a streamed answer after its client left (stored as partial).",
    ),
    Setting(
        "max_request_body",
        str,
        "8m",
        "Request bodies larger than this are streamed through unread and recorded as missing.",
    ),
    Setting(
        "ignore_hosts",
        Sequence[str],
        [],
        "Hosts never recorded (flightlog.local always is).",
    ),
    Setting(
        "outbound_hosts",
        Sequence[str],
        list(DEFAULT_OUTBOUND),
        "Reverse-proxy targets whose traffic is outbound (direction out), e.g. model APIs.",
    ),
    Setting(
        "drain_timeout",
        int,
        30,
        "Seconds to keep trying to write what is queued at exit when the Ledger is down.",
    ),
    Setting(
        "commit_ms",
        int,
        COMMIT_MS,
        (
            "Milliseconds the writer gathers events before one batch commits (more: less CPU an event,"
            " a later commit). `flightlog proxy` gives 100 when its processes outnumber the cores."
        ),
    ),
    Setting(
        "stats_file",
        str,
        "",
        "Write the writer's counters here as JSON at exit.",
        env="FLIGHTLOG_STATS_FILE",
    ),
    Setting(
        "witness",
        Sequence[str],
        [],
        (
            "Witnesses the writer publishes signed checkpoints to (file:///PATH, s3://BUCKET/PREFIX with"
            " Object Lock, https://URL); default: FLIGHTLOG_WITNESS (space-separated)."
        ),
        env="FLIGHTLOG_WITNESS",
    ),
    Setting(
        "checkpoint_interval",
        int,
        300,
        "Seconds between the writer's checkpoints (published when the Ledger moved; and once at stop).",
    ),
    Setting(
        "directory",
        str,
        "",
        "The Directory folder served at /api/directory/ and dispatched from (FLIGHTLOG_DIRECTORY).",
        env="FLIGHTLOG_DIRECTORY",
        option=False,
    ),
)
"""Every setting; the capture addon declares those with `option` (`addons.capture_options.OPTIONS`)."""
_BY_NAME: Final = {s.name: s for s in SETTINGS}


def setting(name: str) -> Setting:
    """The setting called `name` (a KeyError names a setting that is not declared)."""
    return _BY_NAME[name]


def default(name: str) -> Any:
    """The default of setting `name` (a list is copied: a caller may change its own)."""
    value = _BY_NAME[name].default
    return list(value) if isinstance(value, list) else value


def environment(name: str, env: Mapping[str, str] | None = None) -> str:
    """What the environment says for setting `name` (its variable's value; empty when unset)."""
    variable = _BY_NAME[name].env
    return (os.environ if env is None else env).get(variable, "") if variable else ""


def options() -> tuple[tuple[str, Any, Any, str], ...]:
    """The proxy's options as mitmproxy's loader takes them: name, type, default, help."""
    return tuple((s.option_name, s.type, s.default, s.help) for s in SETTINGS if s.option)


__all__ = [
    "COMMIT_MS",
    "DEFAULT_OUTBOUND",
    "SETTINGS",
    "Setting",
    "default",
    "environment",
    "options",
    "setting",
]
