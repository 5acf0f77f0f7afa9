"""The model API listeners a proxy opens by default: where they listen, what proxy.json and `env` say,
that a client honouring both the proxy and the base URL is recorded once, and that they open no door
to flightlog's own routes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from addons.ai_listeners import AI_APIS, parse_upstreams, plan, wanted
from addons.proxy_env import Listener, proxy_env
from flightlog import ports
from flightlog.errors import CommandError
from tests.capture.ledger_view import events_where, ledger_of
from tests.capture.test_cli_capture import flightlog
from tests.support.ports import free_block
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream


def test_ports_next_to_the_forward_one_and_a_taken_one_is_refused() -> None:
    """--listen P: the listeners take P+1 and P+2; a taken one is an error naming it; port 0 gives
    distinct free ports for the forward listener, the API listeners and `@0` modes."""
    start = free_block(3)
    planned = ports.plan_ports("127.0.0.1", start, ["openai", "anthropic"])
    planned.held.close()
    assert (planned.forward, planned.named, planned.extra) == (start, [start + 1, start + 2], [])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", start + 2))
        taken.listen()
        with pytest.raises(CommandError, match=f"port {start + 2} for the anthropic listener"):
            ports.plan_ports("127.0.0.1", start, ["openai", "anthropic"])
    assert ports.is_free("127.0.0.1", start) and ports.is_free("127.0.0.1", start + 1)  # nothing kept
    planned = ports.plan_ports("127.0.0.1", 0, ["openai", "anthropic"], 1)
    planned.held.close()
    forward, ai, extra = planned.forward, planned.named, planned.extra
    assert len({forward, *ai, *extra}) == 4 and 0 not in {forward, *ai, *extra}
    assert ports.concrete_modes(["regular", "reverse:http://x@0"], [4242]) == (
        "regular",
        "reverse:http://x@4242",
    )


def test_a_users_reverse_listener_replaces_the_default_and_upstreams_are_checked() -> None:
    """--mode reverse:https://api.openai.com@N leaves only Anthropic to the defaults; a bad
    --ai-upstream (unknown name, a path) is a ValueError that says what is wrong."""
    assert [a.name for a in wanted(["reverse:https://api.openai.com@9000"])] == ["anthropic"]
    assert [a.name for a in wanted([])] == [a.name for a in AI_APIS]
    assert parse_upstreams(["openai=http://127.0.0.1:9/"]) == {"openai": "http://127.0.0.1:9"}
    for bad in ("gemini=http://x", "openai", "openai=http://x/v1", "openai=ftp://x"):
        with pytest.raises(ValueError, match="--ai-upstream"):
            parse_upstreams([bad])


def test_a_tagged_listener_feeds_its_variable_wherever_it_forwards() -> None:
    """A listener tagged `openai` that forwards to a gateway still sets OPENAI_BASE_URL; NODE_USE_ENV_PROXY
    is always set."""
    (ai,) = plan(AI_APIS[:1], [9101], {"openai": "http://127.0.0.1:7000"})
    env = proxy_env(
        ("127.0.0.1", 8080), Path("/ca.pem"), reverse=(Listener(ai.mode, "127.0.0.1", 9101, ai.api),)
    )
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9101/v1"
    assert env["NODE_USE_ENV_PROXY"] == "1"
    assert "ANTHROPIC_BASE_URL" not in env


def test_proxy_publishes_its_listeners_on_the_next_ports(home: Path, tmp_path: Path) -> None:
    """`flightlog proxy --listen 127.0.0.1:P`: proxy.json lists OpenAI on P+1 and Anthropic on P+2,
    tagged; `env` prints their base URLs; `--no-ai-listeners` leaves the forward listener alone."""
    start = free_block(3)
    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    with live_proxy(home, db, args=["--listen", f"127.0.0.1:{start}"]) as proxy:
        published = json.loads((home / "proxy.json").read_text())["listeners"]
        exports = flightlog("env").stdout
    assert [(x["port"], x.get("api")) for x in published] == [
        (start, None), (start + 1, "openai"), (start + 2, "anthropic"),
    ]  # fmt: skip
    assert proxy.ai_port("openai") == start + 1
    assert f"export OPENAI_BASE_URL=http://127.0.0.1:{start + 1}/v1" in exports
    assert f"export ANTHROPIC_BASE_URL=http://127.0.0.1:{start + 2}\n" in exports
    with live_proxy(home, db, args=["--no-ai-listeners"]):
        published = json.loads((home / "proxy.json").read_text())["listeners"]
        exports = flightlog("env").stdout
    assert [x["mode"] for x in published] == ["regular"]
    assert "OPENAI_BASE_URL" not in exports


def test_env_without_a_proxy_prints_the_defaults_and_says_so(home: Path) -> None:
    """No proxy running: `env` prints what `flightlog proxy` uses by default (8080, 8081, 8082) on
    stdout and one line saying so on stderr."""
    result = flightlog("env")
    assert result.returncode == 0, result.stderr
    assert "export HTTP_PROXY=http://127.0.0.1:8080\n" in result.stdout
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8081/v1\n" in result.stdout
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8082\n" in result.stdout
    assert "export NODE_USE_ENV_PROXY=1\n" in result.stdout
    assert "no proxy is running" in result.stderr


def test_a_taken_listener_port_is_one_line_before_mitmproxy_starts(home: Path) -> None:
    """The OpenAI listener's port is held by another program: exit 1, one line naming it."""
    start = free_block(3)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", start + 1))
        taken.listen()
        result = flightlog("proxy", "--listen", f"127.0.0.1:{start}")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert f"port {start + 1} for the openai listener" in lines[0] and "--no-ai-listeners" in lines[0]


def test_a_client_using_proxy_and_base_url_is_recorded_once(home: Path, http_upstream: Upstream) -> None:
    """httpx (as the Python SDKs use it) sends the base-URL request through the forward proxy to the
    OpenAI listener: the forward listener takes it as the listener's own (no second hop), so it is
    recorded once, and stored as it went upstream, exactly like the same request sent to the listener
    directly: the identity prefix gone from the path, the upstream's Host, no proxy headers."""
    with live_proxy(
        home, f"sqlite:///{home / 'ledger.db'}", args=["--ai-upstream", f"openai={http_upstream.base}"]
    ) as proxy:
        base = f"http://127.0.0.1:{proxy.ai_port('openai')}/_flightlog/session=hop/v1"
        answer = httpx.post(
            f"{base}/chat/completions",
            json={"model": "gpt-4o-mini"},
            proxy=f"http://agent=a:@127.0.0.1:{proxy.port}",
            headers={"Proxy-Connection": "keep-alive"},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"] == "hi"
        direct = httpx.post(f"{base}/chat/completions", json={"model": "gpt-4o-mini"}, timeout=30)
        assert direct.json() == answer.json()
    ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)  # the stopped proxy drained: all is committed
    events = events_where(ledger, "session = 'hop'", {})  # a recorded hop would be more than these 4
    ledger.close()
    assert [e.kind for e in events] == ["http.request", "http.request", "http.response", "http.response"]
    assert {e.direction for e in events} == {"out"}
    hop, straight = (e for e in events if e.kind == "http.request")
    assert hop.agent == "a" and straight.agent is None
    assert {hop.url, straight.url} == {f"{http_upstream.base}/v1/chat/completions"}
    start = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {http_upstream.base[7:]}\r\n".encode()
    for head in (hop.head, straight.head):
        assert head.startswith(start), head
        assert b"_flightlog" not in head and b"proxy-authorization" not in head.lower(), head
    assert b"Proxy-Connection: keep-alive" in hop.head  # plain mitmdump forwards it: so does flightlog


def test_model_api_listeners_never_answer_flightlog_local(home: Path, http_upstream: Upstream) -> None:
    """A request with Host: flightlog.local to the OpenAI listener (even with keep_host_header, which
    keeps that Host) is forwarded to the listener's target, not answered by flightlog's routes."""
    args = ["--ai-upstream", f"openai={http_upstream.base}", "--set", "keep_host_header=true"]
    with live_proxy(home, f"sqlite:///{home / 'ledger.db'}", args=args) as proxy:
        port = proxy.ai_port("openai")
        for path in ("/api/ledger/counts", "/api/directory/manifest"):
            answer = httpx.get(
                f"http://127.0.0.1:{port}{path}", headers={"host": "flightlog.local"}, timeout=30
            )
            assert answer.status_code == 404 and answer.text == "not found\n", (path, answer.text)
    received = [path for _, path, *_ in http_upstream.received]
    assert received == ["/api/ledger/counts", "/api/directory/manifest"], received  # the upstream answered


def test_an_exported_hop_replays_cleanly_with_mitmdump(
    home: Path, http_upstream: Upstream, tmp_path: Path
) -> None:
    """A call sent through the forward listener to the OpenAI listener (identity prefix, proxy
    credentials), exported as a mitmproxy flow file and replayed with plain `mitmdump -C`: the
    upstream receives the request as it first did, with no prefix, no identity and no proxy header."""
    from tests.capture.test_cli_capture import flightlog

    db = f"sqlite:///{home / 'ledger.db'}"
    with live_proxy(home, db, args=["--ai-upstream", f"openai={http_upstream.base}"]) as proxy:
        base = f"http://127.0.0.1:{proxy.ai_port('openai')}/_flightlog/session=exported/v1"
        httpx.post(
            f"{base}/chat/completions",
            json={"model": "gpt-4o-mini"},
            proxy=f"http://agent=a:@127.0.0.1:{proxy.port}",
            headers={"X-Flightlog-Task": "t1"},
            timeout=30,
        ).raise_for_status()
    first = http_upstream.received[-1]
    flows = tmp_path / "flows.mitm"
    exported = flightlog("export", "--format", "mitmproxy", "--session", "exported", "-o", str(flows))
    assert exported.returncode == 0, exported.stderr
    mitmdump = Path(sys.executable).with_name("mitmdump")
    replayed = subprocess.run(
        [str(mitmdump), "-n", "-q", "-C", str(flows), "--set", f"confdir={tmp_path / 'conf'}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    again = http_upstream.received[-1]
    assert again is not first and (again[0], again[1]) == ("POST", "/v1/chat/completions"), again
    for name in (b"_flightlog", b"proxy-authorization", b"x-flightlog"):
        assert name not in again[2].lower(), again[2]
    assert again[3] == first[3]
