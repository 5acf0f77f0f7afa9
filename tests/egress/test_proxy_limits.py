"""Budgets, rates and asks through a live proxy, with real clients.

- a loop of model calls (the openai SDK, plain and streamed) stops at the budget's cap, off by at
  most the one call in flight, each refusal recorded naming the budget and what was spent;
- a rate limit refuses the call past its window;
- an `ask` holds a request until `flightlog approve` (another process) answers: an approval lets
  exactly that request through, the next like it is held again, and a refusal answers 403."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import Upstream, upstream

POLICY = """
ask_timeout = "60s"

[[rule]]
name = "review"
action = "ask"
paths = ["/ask/*"]

[[budget]]
name = "alpha-tokens"
tokens = 40
agents = ["alpha", "gamma"]

[[rate]]
name = "two-a-minute"
requests = 2
window = "1m"
agents = ["rated"]
"""


@dataclass
class World:
    proxy: LiveProxy
    plain: Upstream
    ledger: Ledger
    home: Path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("egress-limits")
    (root / "egress.toml").write_text(POLICY)
    with upstream() as plain:
        args = [
            "--policy",
            str(root / "egress.toml"),
            "--ai-upstream",
            f"openai=http://127.0.0.1:{plain.port}",
        ]
        ledger_url = f"sqlite:///{root / 'ledger.db'}"
        proxy = start_proxy(root / "home", ledger_url, args=args)
        try:
            yield World(proxy, plain, ledger_of(ledger_url, proxy.blobs_url), root / "home")
        finally:
            proxy.stop()


def _client(w: World, agent: str) -> openai.OpenAI:
    base = f"http://127.0.0.1:{w.proxy.ai_port('openai')}/_flightlog/agent={agent}/v1"
    return openai.OpenAI(base_url=base, api_key="sk-test", max_retries=0)


def _loop(w: World, agent: str, stream: bool, calls: int = 6) -> list[str]:
    outcomes = []
    client = _client(w, agent)
    for _ in range(calls):
        try:
            if stream:
                chunks = client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], stream=True,
                    stream_options={"include_usage": True},
                )  # fmt: skip
                list(chunks)
            else:
                client.chat.completions.create(
                    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
                )
            outcomes.append("ok")
        except openai.PermissionDeniedError as e:
            assert isinstance(e.body, dict) and e.body["rule"] == "alpha-tokens", e.body
            outcomes.append("refused")
    return outcomes


@pytest.mark.parametrize(("agent", "stream", "each"), [("alpha", False, 18), ("gamma", True, 15)])
def test_a_loop_of_model_calls_stops_at_the_budget(world: World, agent: str, stream: bool, each: int) -> None:
    """40 tokens a day: a loop making one call at a time passes while under the cap, so the call that
    crosses it passes too and the next is refused: off by at most that one call (3 calls of 18 or
    15 tokens, then refusals). Streamed answers count as plain ones. Each refusal is recorded with
    the budget's name and the tokens spent; another agent is not limited by it."""
    assert _loop(world, agent, stream) == ["ok", "ok", "ok", "refused", "refused", "refused"]
    refusals = wait_for(world.ledger, "kind = 'policy.refused' AND agent = :a", {"a": agent}, 3)
    assert len(refusals) == 3
    spent = f"alpha-tokens: 40 tokens a day (UTC) for agent {agent}: {3 * each} tokens"
    assert all(r.error is not None and r.error.startswith(spent) for r in refusals), refusals
    answered = events_where(
        world.ledger, "kind = 'http.response' AND agent = :a AND status = 200", {"a": agent}
    )
    assert sum((e.tokens_in or 0) + (e.tokens_out or 0) for e in answered) == 3 * each
    assert _loop(world, "beta", stream, calls=4) == ["ok"] * 4


def test_a_rate_limit_refuses_past_its_window(world: World) -> None:
    """Two calls a minute for agent `rated`: the third is refused at once, naming the rate."""
    proxy = f"http://rated:x@127.0.0.1:{world.proxy.port}"
    url = f"http://127.0.0.1:{world.plain.port}/fixed?rated"
    with httpx.Client(proxy=proxy, timeout=30) as client:
        statuses = [client.get(url).status_code for _ in range(3)]
        third = client.get(url)
    assert statuses == [200, 200, 403]
    refusal = third.json()["error"]
    assert refusal["rule"] == "two-a-minute" and refusal["retry_after_s"] > 0


def _flightlog(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"FLIGHTLOG_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "flightlog", *args], env=env, capture_output=True, text=True)


def _held(home: Path, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = json.loads(_flightlog(home, "approve", "--json").stdout)
        if listed:
            assert len(listed) == 1, listed
            return dict(listed[0])
        time.sleep(0.2)
    raise AssertionError("no request was held for an answer")


def test_an_ask_lets_exactly_the_approved_request_through(world: World) -> None:
    """A request an `ask` rule matches waits; `flightlog approve` (another process) lists it with
    who sent it and the rule, and approving its id lets that one request through to the upstream.
    The same request sent again is held again: `approve ID --refuse` answers it with a 403 naming
    the rule and saying the operator refused it."""
    proxy = f"http://agent=alpha;session=s9:x@127.0.0.1:{world.proxy.port}"
    results: dict[str, httpx.Response] = {}

    def send(name: str) -> None:
        with httpx.Client(proxy=proxy, timeout=90) as client:
            results[name] = client.get(f"http://127.0.0.1:{world.plain.port}/ask/{name}")

    first = threading.Thread(target=send, args=("first",))
    first.start()
    held = _held(world.home)
    assert (held["agent"], held["session"], held["rule"]) == ("alpha", "s9", "review")
    assert held["target"].endswith("/ask/first")
    assert not [p for _, p, _, _ in world.plain.received if p.startswith("/ask/")]
    approved = _flightlog(world.home, "approve", held["id"])
    assert approved.returncode == 0 and f"approved {held['id']}" in approved.stdout
    first.join(30)
    assert results["first"].status_code == 404  # the upstream's own answer: it got there
    assert [p for _, p, _, _ in world.plain.received if p.startswith("/ask/")] == ["/ask/first"]

    second = threading.Thread(target=send, args=("second",))
    second.start()
    again = _held(world.home)
    assert again["id"] != held["id"]
    assert _flightlog(world.home, "approve", again["id"], "--refuse").returncode == 0
    second.join(30)
    refused = results["second"]
    assert refused.status_code == 403 and refused.json()["error"]["rule"] == "review"
    assert "refused by" in refused.json()["error"]["limit"]
    assert [p for _, p, _, _ in world.plain.received if p.startswith("/ask/")] == ["/ask/first"]
    gone = _flightlog(world.home, "approve", held["id"])
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1 and "is waiting for an answer" in gone.stderr


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_browser_answers_held_requests(world: World) -> None:
    """In `flightlog browse`, `A` lists the held requests; `y` lets the selected one through to the
    upstream and `n` refuses the next (its client gets the 403 naming the rule)."""
    from egress.approvals import AskBook
    from tests.browse.tui_support import make_app, settle
    from tui.app import BrowseApp
    from tui.asks import AsksScreen

    proxy = f"http://agent=alpha:x@127.0.0.1:{world.proxy.port}"
    results: dict[str, httpx.Response] = {}

    def send(name: str) -> None:
        with httpx.Client(proxy=proxy, timeout=90) as client:
            results[name] = client.get(f"http://127.0.0.1:{world.plain.port}/ask/{name}")

    base = make_app(world.ledger)
    app = BrowseApp(base.source, follow_seconds=None, asks=AskBook(world.home))
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        for name, key, status in (("tui-yes", "y", 404), ("tui-no", "n", 403)):
            thread = threading.Thread(target=send, args=(name,))
            thread.start()
            await pilot.press("A")
            assert isinstance(app.screen, AsksScreen)
            for _ in range(100):
                await pilot.pause(0.1)
                if app.screen.shown:
                    break
            (held,) = app.screen.shown
            assert held.target.endswith(f"/ask/{name}") and held.agent == "alpha"
            await pilot.press(key)
            await pilot.pause(0.2)
            thread.join(30)
            assert results[name].status_code == status
            await pilot.press("escape")
    assert [p for _, p, _, _ in world.plain.received if p.startswith("/ask/tui")] == ["/ask/tui-yes"]
    assert results["tui-no"].json()["error"]["rule"] == "review"


def test_a_rate_holds_across_the_proxys_workers(tmp_path: Path) -> None:
    """Four calls a minute for agent `rated`, through a proxy with two workers: twelve calls on twelve
    connections (the kernel spreads them over both workers) let exactly four through; each worker
    counting its own share let up to eight."""
    (tmp_path / "egress.toml").write_text(
        '[[rate]]\nname = "four-a-minute"\nrequests = 4\nwindow = "1m"\nagents = ["rated"]\n'
    )
    with upstream() as plain:
        args = ["--policy", str(tmp_path / "egress.toml"), "--workers", "2"]
        proxy = start_proxy(tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}", args=args)
        try:
            statuses = []
            for i in range(12):
                with httpx.Client(proxy=f"http://rated:x@127.0.0.1:{proxy.port}", timeout=30) as client:
                    statuses.append(client.get(f"http://127.0.0.1:{plain.port}/fixed?n={i}").status_code)
        finally:
            proxy.stop()
    assert sorted(statuses) == [200] * 4 + [403] * 8, statuses
    assert statuses[:4] == [200] * 4
