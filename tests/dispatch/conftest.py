"""Fixtures for the door: a Ledger, a few tool rows pointing at local upstreams, a dispatcher."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from authority import tokens
from catalog.secret_hosts import SecretHosts
from catalog.tool import Tool
from door.dispatch import Dispatcher
from storage.ledger import Ledger, open_ledger
from tests.dispatch.upstreams import Received, raw_upstream

SECRET = "sk-canary-7f3a9c1e5b"
SECRETS = {"WEATHER_KEY": SECRET}
SECRET_HOSTS = SecretHosts({"WEATHER_KEY": ("127.0.0.1",)})
"""The weather key goes to the local upstreams (127.0.0.1, any port) and nowhere else."""
HOSTS_LINE = "WEATHER_KEY.hosts=127.0.0.1\n"
"""The same binding, as a secrets file's line."""
ROOT = b"r" * 32
REFUSED = ("old.example",)


def weather(base: str) -> Tool:
    """A tool whose upstream takes the secret in a header, the query string and the JSON body."""
    return Tool.from_frontmatter(
        {
            "name": "weather",
            "description": "Today's weather for a city.",
            "args": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
                "additionalProperties": False,
            },
            "upstream": {
                "method": "POST",
                "url": base + "/v1/weather?q={city}&key=[WEATHER_KEY]",
                "headers": {"X-Api-Key": "[WEATHER_KEY]", "Accept": "application/json"},
                "body": {"city": "{city}", "days": "{days}", "auth": "Bearer [WEATHER_KEY]"},
            },
        }
    )


def flightlog(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a child with the test's FLIGHTLOG_* variables and no proxy variables."""
    clean = {
        k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
    }
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def rows(base: str) -> dict[str, Tool]:
    """The test Directory: weather, a JSON-RPC relay, a shell command, an unbound secret, a flow row."""
    made = [
        weather(base),
        Tool.from_frontmatter(
            {
                "name": "rpc",
                "description": "A JSON-RPC call whose params carry a URL.",
                "args": {"type": "object", "properties": {"target": {"type": "string"}}},
                "upstream": {
                    "method": "POST",
                    "url": base + "/rpc",
                    "body": {"jsonrpc": "2.0", "id": 1, "method": "fetch", "params": {"url": "{target}"}},
                },
            }
        ),
        Tool.from_frontmatter(
            {
                "name": "shell",
                "description": "Runs a command.",
                "args": {"type": "object", "properties": {"url": {"type": "string"}}},
                "upstream": {"method": "CLI", "command": "sh -c 'curl -s {url}'"},
                "cli": True,
            }
        ),
        Tool.from_frontmatter(
            {
                "name": "echo_cli",
                "description": "Prints its argument as JSON.",
                "args": {"type": "object", "properties": {"word": {"type": "string"}}},
                "upstream": {
                    "method": "CLI",
                    "command": [
                        "python3",
                        "-c",
                        "import json,sys; print(json.dumps({'said': sys.argv[1]}))",
                        "{word}",
                    ],
                },
                "cli": True,
            }
        ),
        Tool.from_frontmatter(
            {
                "name": "no_opt_in",
                "description": "A command row that did not opt in.",
                "upstream": {"method": "CLI", "command": ["true"]},
            }
        ),
        Tool.from_frontmatter(
            {
                "name": "unbound",
                "description": "Needs a secret nobody bound.",
                "upstream": {
                    "method": "GET",
                    "url": base + "/x",
                    "headers": {"Authorization": "Bearer [MISSING_KEY]"},
                },
            }
        ),
        Tool.from_frontmatter(
            {
                "name": "flowish",
                "description": "A row of another bundle.",
                "upstream": {"method": "GET", "url": base},
            },
            bundle="flow",
        ),
    ]
    return {t.name: t for t in made}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    opened = open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri())
    yield opened
    opened.close()


@pytest.fixture
def upstream() -> Iterator[tuple[str, Received]]:
    with raw_upstream() as up:
        yield up


Factory = Callable[..., Dispatcher]


NO_TOKEN: Any = object()
"""Passed as `token=`: the call carries no token at all (the default is one naming its tool)."""


def token_for(*tools: str, caveats: tuple[str, ...] = ()) -> str:
    """A token from the test root key naming `tools` (and further caveats)."""
    return tokens.mint(ROOT, [f"tools = {','.join(tools)}", *caveats]).encode()


class TokenedDispatcher(Dispatcher):
    """The door as a caller holding a token that names the tool it calls (deny by default means a
    network door refuses calls without one); `token=NO_TOKEN` sends none."""

    def dispatch(self, call: Any, **kw: Any) -> Any:  # type: ignore[override]
        given = kw.pop("token", None)
        if given is NO_TOKEN:
            given = None
        elif given is None and isinstance(call, dict) and isinstance(call.get("tool"), str) and call["tool"]:
            given = token_for(call["tool"])
        return super().dispatch(call, token=given, **kw)


@pytest.fixture
def make_dispatcher(upstream: tuple[str, Received]) -> Factory:
    def make(ledger: Ledger, **extra: Any) -> Dispatcher:
        table = rows(upstream[0])
        extra.setdefault("local_commands", True)
        extra.setdefault("secret_hosts", SECRET_HOSTS)
        return TokenedDispatcher(table.get, ledger, SECRETS, ROOT, REFUSED, **extra)

    return make
