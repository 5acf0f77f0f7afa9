"""Real clients with the variables `flightlog run` sets (the proxy *and* the model base URLs) get a
slow model stream as it arrives, and the Ledger's first-token time is the one they saw.

curl, the openai and anthropic Python SDKs, and Node 22's fetch (NODE_USE_ENV_PROXY=1, from npm into
the session's temporary folder) each stream a chat answer of five events 0.2 s apart from a local
stand-in for the model API. Every client honouring the proxy variables reaches the model listener
through the forward listener: before that hop was taken as the listener's own request, the whole
answer came at its end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from addons.proxy_env import proxy_env
from recording.identity import Identity
from tests.capture.ledger_view import ledger_of, wait_for
from tests.capture.test_node_clients import _npm_install
from tests.support.proxy import LiveProxy, live_proxy
from tests.support.upstream import upstream

pytestmark = pytest.mark.slow

PACE = 0.2
"""Seconds between the stand-in's stream events: the first text comes at least 5 of them before the
answer's end (OpenAI's first chunk is text; Anthropic's after two events of its own)."""

OPENAI = """
import json, sys, time
from openai import OpenAI
started = time.monotonic(); first = None; text = ""
stream = OpenAI(api_key="sk-test", max_retries=0).chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
    stream_options={"include_usage": True}, extra_query={"delay": sys.argv[1]})
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        first = first or time.monotonic() - started
        text += chunk.choices[0].delta.content
print(json.dumps({"first": first, "total": time.monotonic() - started, "text": text}))
"""
ANTHROPIC = """
import json, sys, time
from anthropic import Anthropic
started = time.monotonic(); first = None; text = ""
with Anthropic(api_key="sk-ant-test", max_retries=0).messages.stream(
    model="claude-3-5-haiku-latest", max_tokens=10, messages=[{"role": "user", "content": "hi"}],
    extra_query={"delay": sys.argv[1]}) as stream:
    for piece in stream.text_stream:
        first = first or time.monotonic() - started
        text += piece
print(json.dumps({"first": first, "total": time.monotonic() - started, "text": text}))
"""
NODE = """
const started = performance.now(); let first = null; let text = "";
const response = await fetch(`${process.env.OPENAI_BASE_URL}/chat/completions?delay=${process.argv.at(-1)}`, {
  method: "POST", headers: {"content-type": "application/json", authorization: "Bearer sk-node"},
  body: JSON.stringify({model: "gpt-4o-mini", stream: true, messages: [{role: "user", content: "hi"}]}),
});
for await (const piece of response.body) {
  const part = new TextDecoder().decode(piece);
  if (part.includes("content")) first ??= (performance.now() - started) / 1000;
  text += part;
}
console.log(JSON.stringify({first, total: (performance.now() - started) / 1000, text}));
"""


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveProxy]:
    base = tmp_path_factory.mktemp("client-streams")
    with upstream() as up:
        args = ["--ai-upstream", f"openai={up.base}", "--ai-upstream", f"anthropic={up.base}"]
        with live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=args) as proxy:
            yield proxy


@pytest.fixture(scope="module")
def node22(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Node 22 from the npm registry (the `node` package ships the binary)."""
    modules = _npm_install(tmp_path_factory.mktemp("npm-node22"), "node@22")
    return str(modules / "node" / "bin" / "node")


def _env(proxy: LiveProxy, session: str) -> dict[str, str]:
    """What `flightlog run --session SESSION` sets for its child, over this environment."""
    ours = proxy_env(("127.0.0.1", proxy.port), proxy.ca, Identity(session=session), reverse=proxy.listeners)
    return {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | ours


def _curl(env: dict[str, str]) -> dict[str, object]:
    """curl as an agent's shell would call the base URL: through the proxy, streaming."""
    body = json.dumps(
        {"model": "gpt-4o-mini", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    )
    argv = ["curl", "-sS", "-N", "-o", "/dev/null", "-w", "%{time_starttransfer} %{time_total}"]
    argv += ["-H", "content-type: application/json", "--data", body]
    done = subprocess.run(
        [*argv, f"{env['OPENAI_BASE_URL']}/chat/completions?delay={PACE}"],
        env=env, capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    first, total = (float(x) for x in done.stdout.split())
    return {"first": first, "total": total, "text": "Hello!"}


def _client(name: str, env: dict[str, str], node: str) -> dict[str, object]:
    if name == "curl":
        return _curl(env)
    if name == "node22":
        argv = [node, "--input-type=module", "-e", NODE, str(PACE)]
    else:
        argv = [sys.executable, "-c", OPENAI if name == "openai" else ANTHROPIC, str(PACE)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1500:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", ["curl", "openai", "anthropic", "node22"])
def test_a_slow_model_stream_reaches_the_client_as_it_arrives_and_is_timed_as_it_saw_it(
    running: LiveProxy, node22: str, name: str
) -> None:
    """The client's first text comes long before the answer's end (held back, it came with the end),
    the exchange is recorded once (through the forward listener or not), and its first byte in the
    Ledger is no later than the client's first text."""
    session = f"{name}-{uuid.uuid4().hex[:8]}"
    seen = _client(name, _env(running, session), node22)
    assert seen["text"] in ("Hello!", "Hello!") or "Hel" in str(seen["text"]), seen
    first, total = float(seen["first"]), float(seen["total"])  # type: ignore[arg-type]
    assert total - first > 2.5 * PACE, seen
    ledger = ledger_of(running.ledger_url, running.blobs_url)
    events = wait_for(ledger, "session = :s", {"s": session}, 2)
    ledger.close()
    assert [e.kind for e in events] == ["http.request", "http.response"], events
    answer = events[1]
    assert answer.payload_state == "complete" and answer.model, answer
    assert answer.first_byte_ms is not None and answer.first_byte_ms / 1000 < first + 0.1, (answer, seen)
    assert answer.last_byte_ms is not None and answer.last_byte_ms / 1000 > 3.5 * PACE, answer
