"""One real proxy with two workers, the world the gate's attack tests knock on.

`flightlog proxy --workers 2` over a Directory folder holding a remote row (`weather`, its key bound to
its upstream's host and port), flightlog's own Ledger and Directory rows, and an empty `sandbox` bundle;
a second upstream plays the attacker, keeping every request it receives. The secrets file holds the
weather key (bound to its host) and an OpenAI key (bound by default to api.openai.com).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import create_engine, text

from authority import tokens
from catalog.directory import starter_folder
from catalog.tool import Tool
from tests.dispatch.conftest import SECRET, weather
from tests.dispatch.upstreams import Received, raw_upstream
from tests.support.proxy import LiveProxy, live_proxy

BASE = "http://flightlog.local"
OPENAI_KEY = "sk-openai-canary-5c1d9e7a3b"
JSON = {"content-type": "application/json"}
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}


@dataclass
class World:
    """The running proxy and everything around it."""

    proxy: LiveProxy
    home: Path
    folder: Path
    url: str
    blobs: str
    weather: str
    received: Received
    attacker: str
    stolen: Received
    root: bytes

    def mint(self, *caveats: str) -> str:
        return tokens.mint(self.root, list(caveats)).encode()

    def env(self, **extra: str) -> dict[str, str]:
        """The variables a `flightlog` child of the operator runs with (no proxy variables)."""
        clean = {
            k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
        }
        return {
            **clean,
            "FLIGHTLOG_HOME": str(self.home),
            "FLIGHTLOG_LEDGER": self.url,
            "FLIGHTLOG_BLOBS": self.blobs,
            "FLIGHTLOG_DIRECTORY": str(self.folder),
            **extra,
        }

    def flightlog(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        """The CLI as the operator runs it (FLIGHTLOG_HOME held)."""
        return subprocess.run(
            [sys.executable, "-m", "flightlog", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=self.env(**extra),
        )

    def send(
        self,
        method: str,
        path: str,
        token: str | None = None,
        body: Any = None,
        *,
        headers: dict[str, str] | None = None,
        proxy: str | None = None,
    ) -> httpx.Response:
        """One request to flightlog.local through the proxy, as a client of it would send it."""
        sent = {**JSON, **(headers or {})}
        if token is not None:
            sent["authorization"] = f"Bearer {token}"
        content = json.dumps(body).encode() if body is not None else None
        with httpx.Client(proxy=proxy or self.proxy.url, trust_env=False, timeout=60) as client:
            return client.request(method, BASE + path, headers=sent, content=content)

    def mcp(self, token: str | None, tool: str, arguments: dict[str, Any]) -> httpx.Response:
        """One `tools/call` to flightlog's MCP route over HTTP (stateless, JSON answers)."""
        message = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        return self.send("POST", "/api/mcp", token, message, headers=MCP_ACCEPT)

    def refusals(self) -> list[str]:
        """The `LIMIT: why` of every `dispatch.refused` event so far, oldest first."""
        engine = create_engine(self.url)
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT error FROM events WHERE kind = 'dispatch.refused' ORDER BY at, event_id")
            )
            errors = [str(r[0]) for r in found]
        engine.dispose()
        return errors

    def row(self, bundle: str, path: str) -> str:
        return (self.folder / bundle / path).read_text()

    def write_row(self, bundle: str, path: str, text_: str) -> None:
        """The operator's own edit of the folder (what an editor does: write to a new file, rename)."""
        target = self.folder / bundle / path
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.tmp")
        temp.write_text(text_)
        temp.replace(target)


def limit_of(response: httpx.Response) -> str | None:
    """The limit a refusal names, from the door's, a route's or the MCP route's answer."""
    try:
        body = response.json()
    except ValueError:
        return None
    refused = body.get("refused") if isinstance(body, dict) else None
    if isinstance(refused, dict):
        return str(refused.get("limit"))
    result = body.get("result") if isinstance(body, dict) else None
    if isinstance(result, dict) and result.get("isError"):
        text_ = str((result.get("content") or [{}])[0].get("text", ""))
        try:
            inner = json.loads(text_)
        except ValueError:
            return None
        refused = inner.get("refused") if isinstance(inner, dict) else None
        return str(refused.get("limit")) if isinstance(refused, dict) else None
    return None


def mcp_ok(response: httpx.Response) -> bool:
    """An MCP `tools/call` answered without an error result."""
    if response.status_code != 200:
        return False
    result = response.json().get("result")
    return isinstance(result, dict) and not result.get("isError")


def tool_row(name: str, upstream: Any, *, cli: bool = False) -> str:
    """A tool row's document."""
    front: dict[str, Any] = {"name": name, "description": f"{name} (test row)", "upstream": upstream}
    if cli:
        front["cli"] = True
    return Tool.from_frontmatter(front).to_document()


@contextmanager
def gate_world(
    tmp: Path, *, workers: int = 2, rows: Callable[[str, str], dict[str, str]] | None = None
) -> Iterator[World]:
    """The proxy (`--workers N`) over the test folder, with the two upstreams running; `rows(weather,
    attacker)` gives more tool rows (file name -> document) written before the proxy starts."""
    home, folder = tmp / "home", tmp / "dir"
    home.mkdir()
    (folder / "tool").mkdir(parents=True)
    (folder / "sandbox").mkdir()
    url, blobs = f"sqlite:///{tmp / 'ledger.db'}", (tmp / "blobs").as_uri()
    with ExitStack() as stack:
        base, received = stack.enter_context(raw_upstream())
        attacker, stolen = stack.enter_context(raw_upstream())
        bound = urlsplit(base).netloc
        (home / "secrets.env").write_text(
            f"WEATHER_KEY={SECRET}\nWEATHER_KEY.hosts={bound}\nOPENAI_API_KEY={OPENAI_KEY}\n"
        )
        (folder / "tool" / "weather.md").write_text(weather(base).to_document())
        for name in ("ledger_counts.md", "directory_write.md", "dispatch.md"):
            (folder / "tool" / name).write_text((starter_folder() / "tool" / name).read_text())
        for name, document in (rows(base, attacker) if rows else {}).items():
            (folder / "tool" / name).write_text(document)
        env = {"FLIGHTLOG_LEDGER": url, "FLIGHTLOG_BLOBS": blobs}
        args = ["--workers", str(workers), "--set", f"flightlog_directory={folder}"]
        proxy = stack.enter_context(live_proxy(home, url, env=env, args=args))
        yield World(proxy, home, folder, url, blobs, base, received, attacker, stolen, tokens.root_key(home))
