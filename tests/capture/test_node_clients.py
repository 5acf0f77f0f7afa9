"""Node programs under `flightlog run`, with no code change: Node 20's global fetch (which ignores
proxy variables) and the npm `openai` SDK follow OPENAI_BASE_URL / ANTHROPIC_BASE_URL to the proxy's
model API listeners, with a proxy already running and with none (run starts one); Node 24 honours
NODE_USE_ENV_PROXY=1, so its fetch also goes through the forward proxy.

The listeners are the default ones, pointed at a local upstream with `--ai-upstream NAME=URL` (the
public APIs cannot be reached here): the same plan, proxy.json tag and variable as the default.
npm installs the SDK (and Node 24) into the test session's temporary folder; a failed install fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

FETCH_APP = """
const openai = process.env.OPENAI_BASE_URL, anthropic = process.env.ANTHROPIC_BASE_URL;
(async () => {
  const chat = await fetch(`${openai}/chat/completions`, {
    method: "POST", headers: {"content-type": "application/json", authorization: "Bearer sk-node"},
    body: JSON.stringify({model: "gpt-4o-mini", messages: [{role: "user", content: "hi"}]}),
  });
  const answer = await chat.json();
  const msg = await fetch(`${anthropic}/v1/messages`, {
    method: "POST", headers: {"content-type": "application/json", "x-api-key": "sk-ant-node"},
    body: JSON.stringify({model: "claude-3-5-haiku-latest", max_tokens: 16, stream: true,
                          messages: [{role: "user", content: "hi"}]}),
  });
  const stream = await msg.text();
  console.log(JSON.stringify({chat: chat.status, said: answer.choices[0].message.content,
                              messages: msg.status, events: stream.split("event: ").length - 1}));
})().catch((e) => { console.error(String(e.cause || e)); process.exit(2); });
"""

SDK_APP = """
import OpenAI from "openai";
const client = new OpenAI({apiKey: "sk-node-sdk", maxRetries: 0});  // OPENAI_BASE_URL from the environment
const stream = await client.chat.completions.create({
  model: "gpt-4o-mini", messages: [{role: "user", content: "Say hello"}],
  stream: true, stream_options: {include_usage: true},
});
let text = "";
for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
console.log(text);
"""


def _npm_install(folder: Path, package: str) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        pytest.fail("npm is needed to install the Node clients")
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), package],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.fail(f"npm could not install {package}: {(done.stderr or done.stdout).strip()[-300:]}")
    return folder / "node_modules"


@pytest.fixture(scope="session")
def openai_npm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the npm `openai` SDK installed; an app written there imports it."""
    folder = tmp_path_factory.mktemp("npm-openai")
    _npm_install(folder, "openai")
    return folder


@pytest.fixture(scope="session")
def node24(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Node 24 from the npm registry (the `node` package ships the binary)."""
    modules = _npm_install(tmp_path_factory.mktemp("npm-node24"), "node@24")
    return str(modules / "node" / "bin" / "node")


def _node() -> str:
    node = shutil.which("node")
    assert node is not None, "node is needed"
    return node


def _flightlog(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, timeout=180, env=env
    )


def _ai_upstreams(up: Upstream) -> list[str]:
    return ["--ai-upstream", f"openai={up.base}", "--ai-upstream", f"anthropic={up.base}"]


@contextmanager
def _proxy_if(running: bool, home: Path, up: Upstream) -> Iterator[list[str]]:
    """A proxy already running for FLIGHTLOG_HOME (run takes no proxy options), or none (run gets
    the `--ai-upstream` options for the proxy it starts)."""
    if not running:
        yield _ai_upstreams(up)
        return
    with live_proxy(home, f"sqlite:///{home / 'ledger.db'}", args=_ai_upstreams(up)):
        yield []


def _recorded(home: Path, session: str, count: int) -> list[tuple[str, str, str | None, str | None, str]]:
    ledger = ledger_of(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        events = wait_for(ledger, "session = :s", {"s": session}, count)
        return [(e.kind, (e.url or "").rsplit("/", 2)[-1], e.agent, e.model, e.direction) for e in events]
    finally:
        ledger.close()


@pytest.mark.parametrize("running", [True, False], ids=["proxy-running", "no-proxy"])
def test_node20_fetch_follows_the_base_urls_and_is_recorded(
    home: Path, tmp_path: Path, http_upstream: Upstream, running: bool
) -> None:
    """Node's global fetch to OPENAI_BASE_URL and ANTHROPIC_BASE_URL (set by run): the app gets the
    same answers as straight from the upstream, and the Ledger holds both exchanges once, outbound,
    with the agent and the model."""
    app = tmp_path / "app.js"
    app.write_text(FETCH_APP)
    base = {"OPENAI_BASE_URL": f"{http_upstream.base}/v1", "ANTHROPIC_BASE_URL": http_upstream.base}
    bare = subprocess.run(
        [_node(), str(app)], capture_output=True, text=True, timeout=60, env=os.environ | base
    )
    assert bare.returncode == 0, bare.stderr
    with _proxy_if(running, home, http_upstream) as options:
        ran = _flightlog("run", *options, "--agent", "node-a", "--session", "n20", "--", _node(), str(app))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == json.loads(bare.stdout) == {
        "chat": 200, "said": "hi", "messages": 200, "events": 7,
    }  # fmt: skip
    recorded = _recorded(home, "n20", 4)
    assert sorted(recorded) == sorted(
        [
            ("http.request", "completions", "node-a", None, "out"),
            ("http.response", "completions", "node-a", "gpt-4o-mini", "out"),
            ("http.request", "messages", "node-a", None, "out"),
            ("http.response", "messages", "node-a", "claude-3-5-haiku-latest", "out"),
        ]
    ), recorded


@pytest.mark.parametrize("running", [True, False], ids=["proxy-running", "no-proxy"])
def test_npm_openai_sdk_under_run_is_recorded(
    home: Path, openai_npm: Path, http_upstream: Upstream, running: bool
) -> None:
    """The npm `openai` SDK, streaming with usage, configured by nothing but OPENAI_BASE_URL from
    run: the app prints the streamed text, the Ledger holds the exchange with model and tokens."""
    app = openai_npm / f"app-{running}.mjs"
    app.write_text(SDK_APP)
    with _proxy_if(running, home, http_upstream) as options:
        ran = _flightlog(
            "run", *options, "--agent", "sdk-a", "--session", f"sdk-{running}", "--", _node(), str(app)
        )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Hello!"
    ledger = ledger_of(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    try:
        events = wait_for(ledger, "session = :s", {"s": f"sdk-{running}"}, 2)
    finally:
        ledger.close()
    assert [(e.kind, e.agent, e.direction) for e in events] == [
        ("http.request", "sdk-a", "out"),
        ("http.response", "sdk-a", "out"),
    ]
    answer = events[1]
    assert (answer.url, answer.model, answer.tokens_in, answer.tokens_out) == (
        f"{http_upstream.base}/v1/chat/completions", "gpt-4o-mini", 12, 3,
    )  # fmt: skip


NODE24_APP = """
(async () => {
  const chat = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions`, {
    method: "POST", headers: {"content-type": "application/json"},
    body: JSON.stringify({model: "gpt-4o-mini", messages: [{role: "user", content: "hi"}]}),
  });
  const direct = await fetch(process.argv[2]);
  const bytes = (await direct.arrayBuffer()).byteLength;
  console.log(JSON.stringify({chat: chat.status, direct: direct.status, bytes}));
})().catch((e) => { console.error(String(e.cause || e)); process.exit(2); });
"""


def test_node24_fetch_uses_the_forward_proxy_with_node_use_env_proxy(
    home: Path, tmp_path: Path, http_upstream: Upstream, https_upstream: Upstream, node24: str
) -> None:
    """Node 24 with NODE_USE_ENV_PROXY=1 (set by run): fetch to any HTTPS host goes through the
    forward proxy (trusting its CA from NODE_EXTRA_CA_CERTS) and is recorded; fetch to OPENAI_BASE_URL
    goes through the forward proxy to the model API listener, which records it exactly once."""
    app = tmp_path / "app24.js"
    app.write_text(NODE24_APP)
    cert = tmp_path / "upstream-cert.pem"  # written by the https_upstream fixture
    direct = f"{https_upstream.base}/bytes/33"
    ran = _flightlog(
        "run", "--ai-upstream", f"openai={http_upstream.base}", "--upstream-ca", str(cert),
        "--session", "n24", "--", node24, str(app), direct,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"chat": 200, "direct": 200, "bytes": 33}
    recorded = _recorded(home, "n24", 4)
    assert sorted((kind, tail) for kind, tail, *_ in recorded) == [
        ("http.request", "33"),
        ("http.request", "completions"),
        ("http.response", "33"),
        ("http.response", "completions"),
    ]
