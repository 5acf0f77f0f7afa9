"""The egress policy on every path through a live proxy, with real clients: one gate for all.

Forward HTTP, a request inside a CONNECT tunnel, a reverse listener, a model API listener and a
forward hop to that listener each carry the same refused request: each gets the same 403 naming the
rule, nothing reaches the upstream, and the Ledger holds the request, the answer the client got and
a `policy.refused` event joined to agent, session and task. A CONNECT to a host refused outright is
answered before the tunnel opens; an MCP `tools/call` refused by its arguments gets a JSON-RPC error
the official client raises, and the server never sees it."""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of, wait_for
from tests.mcp.support import sdk_server
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import Upstream, upstream

POLICY = """
[[rule]]
name = "no-denied"
action = "deny"
paths = ["/denied*"]

[[rule]]
name = "blocked-host"
action = "deny"
hosts = ["blocked.example"]

[[rule]]
name = "no-secret-echo"
action = "deny"
tools = ["echo"]
args = { text = "secret*" }
"""
WHO = "agent=alpha;session=s1;task=t1"
PREFIX = f"/_flightlog/{WHO}"


@dataclass
class World:
    proxy: LiveProxy
    plain: Upstream
    tls: Upstream
    ca: Path
    mcp_port: int
    ledger: Ledger


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("egress-paths")
    (root / "egress.toml").write_text(POLICY)
    with sdk_server("--http-json") as mcp_port, upstream() as plain, upstream(root) as tls:
        args = [
            "--policy", str(root / "egress.toml"),
            "--mode", f"reverse:http://127.0.0.1:{plain.port}@0",
            "--mode", f"reverse:http://127.0.0.1:{mcp_port}@0",
            "--ai-upstream", f"openai=http://127.0.0.1:{plain.port}",
            "--upstream-ca", str(root / "upstream-cert.pem"),
        ]  # fmt: skip
        ledger_url = f"sqlite:///{root / 'ledger.db'}"
        proxy = start_proxy(root / "home", ledger_url, args=args)
        try:
            yield World(proxy, plain, tls, proxy.ca, mcp_port, ledger_of(ledger_url, proxy.blobs_url))
        finally:
            proxy.stop()


def forward(w: World) -> httpx.Client:
    trust = ssl.create_default_context(cafile=str(w.ca))
    return httpx.Client(proxy=f"http://{WHO}:x@127.0.0.1:{w.proxy.port}", verify=trust, timeout=30)


PATHS: dict[str, Any] = {
    "forward HTTP": lambda w: forward(w).get(f"http://127.0.0.1:{w.plain.port}/denied/1"),
    "inside CONNECT": lambda w: forward(w).get(f"https://localhost:{w.tls.port}/denied/2"),
    "reverse listener": lambda w: httpx.get(
        f"http://127.0.0.1:{w.proxy.reverse_port(str(w.plain.port))}{PREFIX}/denied/3"
    ),
    "model listener": lambda w: httpx.post(
        f"http://127.0.0.1:{w.proxy.ai_port('openai')}{PREFIX}/denied/4", json={"model": "m"}
    ),
    "forward hop to the model listener": lambda w: forward(w).post(
        f"http://127.0.0.1:{w.proxy.ai_port('openai')}/denied/5", json={"model": "m"}
    ),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_listener_refuses_by_the_same_rule(world: World, path: str) -> None:
    """The same refused request on each path: a 403 whose JSON names the rule and its limit, no
    byte of it upstream, and in the Ledger its request, the 403, and a `policy.refused` naming the
    rule, joined to the caller's agent, session and task (from proxy credentials or the path prefix)."""
    number = list(PATHS).index(path) + 1
    answer = PATHS[path](world)
    assert answer.status_code == 403, answer.text
    body = answer.json()["error"]
    assert body["rule"] == "no-denied" and body["type"] == "refused"
    assert body["message"].startswith("refused by flightlog's egress policy rule no-denied: ")
    assert "paths=/denied*" in body["limit"]
    assert answer.headers["x-flightlog-refused"] == "no-denied"
    seen = [p for _, p, _, _ in [*world.plain.received, *world.tls.received]]
    assert not [p for p in seen if p.startswith(f"/denied/{number}")]
    (refused,) = wait_for(
        world.ledger, "kind = 'policy.refused' AND url LIKE :u", {"u": f"%/denied/{number}"}, 1
    )
    assert (refused.agent, refused.session, refused.task) == ("alpha", "s1", "t1")
    assert refused.error is not None and refused.error.startswith("no-denied: deny paths=/denied*")
    assert refused.status == 403
    action = wait_for(world.ledger, "action_id = :a", {"a": refused.action_id}, 3)
    assert sorted(e.kind for e in action) == ["http.request", "http.response", "policy.refused"]


def test_allowed_requests_pass_on_every_path(world: World) -> None:
    """What no rule refuses goes through as before, recorded, with no refusal event."""
    client = forward(world)
    assert client.get(f"http://127.0.0.1:{world.plain.port}/fixed").status_code == 200
    assert client.get(f"https://localhost:{world.tls.port}/fixed").status_code == 200
    port = world.proxy.reverse_port(str(world.plain.port))
    assert httpx.get(f"http://127.0.0.1:{port}{PREFIX}/fixed").status_code == 200
    assert events_where(world.ledger, "kind = 'policy.refused' AND url LIKE '%/fixed'", {}) == []


def test_a_connect_to_a_refused_host_is_answered_before_the_tunnel(world: World) -> None:
    """A host refused whatever the request is refused at its CONNECT: the client's tunnel fails
    with a 403 (nothing is resolved or connected), and the attempt opens an action of its own."""
    with pytest.raises(httpx.ProxyError, match="403"):
        forward(world).get("https://blocked.example/anything")
    (refused,) = wait_for(world.ledger, "kind = 'policy.refused' AND host = 'blocked.example'", {}, 1)
    assert refused.method == "CONNECT" and refused.error.startswith("blocked-host: ")  # type: ignore[union-attr]
    (attempt,) = events_where(
        world.ledger, "action_id = :a AND kind = 'connection.attempt'", {"a": refused.action_id}
    )
    assert attempt.url == "blocked.example:443" and attempt.agent == "alpha"


async def _mcp(base: str) -> tuple[Any, str]:
    async with streamable_http_client(f"{base}/mcp") as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        allowed = (await s.call_tool("echo", {"text": "hello"})).model_dump(mode="json")
        try:
            await s.call_tool("echo", {"text": "secret plans"})
        except MCPError as e:
            return allowed, str(e)
    raise AssertionError("the refused call was answered")


def test_an_mcp_tool_call_is_refused_by_its_arguments(world: World) -> None:
    """The official MCP client through the proxy: `echo` with a harmless text is answered by the
    server; `echo` with a text the rule names is answered by the proxy with a JSON-RPC error naming
    the rule (the client raises it), and the server never sees it: the answer recorded carries the
    proxy's refusal header, and the refusal event names the tool."""
    port = world.proxy.reverse_port(str(world.mcp_port))
    allowed, error = anyio.run(_mcp, f"http://127.0.0.1:{port}")
    assert allowed["content"][0]["text"] == "hello"
    assert "refused by flightlog policy rule no-secret-echo" in error and "args.text=secret*" in error
    (refused,) = wait_for(world.ledger, "kind = 'policy.refused' AND tool = 'echo'", {}, 1)
    answers = wait_for(world.ledger, "action_id = :a AND kind = 'http.response'", {"a": refused.action_id}, 1)
    assert b"X-Flightlog-Refused: no-secret-echo" in answers[0].head
    assert refused.payload_sha256 is not None
    payload = json.loads(world.ledger.payload(refused.payload_sha256))
    assert payload["error"]["code"] == -32001 and payload["error"]["data"]["rule"] == "no-secret-echo"


def test_the_policy_is_reread_when_edited_and_a_bad_edit_keeps_the_last(world: World) -> None:
    """An edit of the policy file is in force within a couple of seconds; an edit that does not
    parse keeps the last good policy, said in one line in the proxy's log."""
    policy_file = world.proxy.home.parent / "egress.toml"
    url = f"http://127.0.0.1:{world.plain.port}/fixed?edit=1"
    try:
        policy_file.write_text(
            POLICY + '\n[[rule]]\nname = "no-fixed"\naction = "deny"\npaths = ["/fixed*"]\n'
        )
        assert _eventually(lambda: forward(world).get(url).status_code == 403)
        policy_file.write_text("[[rule]\nthis is not toml")
        assert _eventually(lambda: "keeping the last good egress policy" in world.proxy.log())
        assert forward(world).get(url).status_code == 403
        line = next(x for x in world.proxy.log().splitlines() if "keeping the last good" in x)
        assert "not TOML" in line and str(policy_file) in line
    finally:
        policy_file.write_text(POLICY)
    assert _eventually(lambda: forward(world).get(url).status_code == 200)


def _eventually(check: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_workers_reread_the_policy_their_supervisor_sees_change(tmp_path: Path) -> None:
    """With `--workers 2` the supervisor looks at the policy file for both workers and nudges them
    (they do not wake to look themselves): after an edit, every worker refuses by the new rule, and
    the re-read is said once for the proxy, not once per worker."""
    policy = tmp_path / "egress.toml"
    policy.write_text(POLICY)
    with upstream() as plain:
        proxy = start_proxy(
            tmp_path / "home",
            f"sqlite:///{tmp_path / 'l.db'}",
            args=["--workers", "2", "--policy", str(policy)],
        )
        try:
            url = f"http://127.0.0.1:{plain.port}/fixed?w"

            def statuses() -> set[int]:  # a new connection each time: both workers get some
                return {httpx.get(url, proxy=proxy.url).status_code for _ in range(12)}

            assert statuses() == {200}
            policy.write_text(POLICY + '[[rule]]\nname = "no-fixed"\naction = "deny"\npaths = ["/fixed*"]\n')
            assert _eventually(lambda: statuses() == {403})
        finally:
            log = proxy.stop()
        assert log.count("egress policy re-read from") == 1, log


def test_a_host_header_claiming_another_host_is_judged_and_recorded_by_where_it_goes(world: World) -> None:
    """A request sent to 127.0.0.1 claiming `Host: other.example` goes through, recorded under the
    address it went to (the claim kept in its head), not under the claimed name; one claiming a host
    a rule refuses (`blocked.example`, domain fronting) is refused and never reaches the upstream."""
    client = forward(world)
    url = f"http://127.0.0.1:{world.plain.port}"
    passed = client.get(f"{url}/fixed?claim=1", headers={"Host": "other.example"})
    assert passed.status_code == 200
    fronted = client.get(f"{url}/fixed?claim=2", headers={"Host": "blocked.example"})
    assert fronted.status_code == 403 and fronted.json()["error"]["rule"] == "blocked-host"
    assert "Host header claims blocked.example" in fronted.json()["error"]["limit"]
    seen = [p for _, p, _, _ in world.plain.received]
    assert "/fixed?claim=1" in seen and "/fixed?claim=2" not in seen
    (recorded,) = wait_for(world.ledger, "kind = 'http.request' AND url LIKE :u", {"u": "%claim=1"}, 1)
    assert recorded.url == f"{url}/fixed?claim=1" and recorded.host == "127.0.0.1"
    assert b"Host: other.example" in recorded.head
