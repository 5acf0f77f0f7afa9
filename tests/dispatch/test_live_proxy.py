"""The door through a live flightlog proxy: real clients, a local upstream, a Directory folder on disk."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from sqlalchemy import create_engine, text

from authority import tokens
from catalog.contracts import forms
from tests.dispatch.conftest import HOSTS_LINE, SECRET, flightlog, rows, weather
from tests.dispatch.upstreams import Received, raw_upstream
from tests.support.proxy import LiveProxy, live_proxy

DOOR = "http://flightlog.local/api/dispatch"


def write_directory(folder: Path, base: str) -> None:
    """A Directory folder with the weather row and a JSON-RPC row, as Markdown with frontmatter."""
    (folder / "tool").mkdir(parents=True)
    (folder / "tool" / "weather.md").write_text(weather(base).to_document())
    rpc = rows(base)["rpc"]
    (folder / "tool" / "rpc.md").write_text(rpc.to_document())
    assert yaml.safe_load((folder / "tool" / "weather.md").read_text().split("---")[1])["name"] == "weather"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveProxy, Received, dict[str, str]]]:
    """One proxy for the module: a FLIGHTLOG_HOME (secrets, refused hosts), a Directory folder, an upstream.

    The door writes its own events synchronously, so tests read them while the proxy runs.
    """
    tmp = tmp_path_factory.mktemp("live")
    home = tmp / "home"
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={SECRET}\n" + HOSTS_LINE)
    (home / "refused_hosts.txt").write_text("old.example\n")
    with raw_upstream() as (base, received):
        write_directory(tmp / "dir", base)
        env = {
            "FLIGHTLOG_HOME": str(home),
            "FLIGHTLOG_LEDGER": f"sqlite:///{tmp / 'ledger.db'}",
            "FLIGHTLOG_BLOBS": (tmp / "blobs").as_uri(),
            "FLIGHTLOG_DIRECTORY": str(tmp / "dir"),
        }
        # what `flightlog run` lends its child: a token in FLIGHTLOG_TOKEN (here one that may also read
        # the Ledger, for the join routes)
        env["FLIGHTLOG_TOKEN"] = tokens.mint(tokens.root_key(home), ["grants = call,ledger"]).encode()
        secrets = str(home / "secrets.env")
        with live_proxy(home, env["FLIGHTLOG_LEDGER"], env=env, args=["--secrets", secrets]) as proxy:
            yield proxy, received, env


def events(env: dict[str, str]) -> list[dict[str, object]]:
    engine = create_engine(env["FLIGHTLOG_LEDGER"])
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT event_id, action_id, kind, url, host, tool, task, error FROM events")
        )
        found = [dict(r._mapping) for r in rows]
    engine.dispose()
    return found


def root(env: dict[str, str]) -> bytes:
    return tokens.root_key(Path(env["FLIGHTLOG_HOME"]))


def lent(env: dict[str, str]) -> dict[str, str]:
    """The bearer header of the token the world lends its clients (deny by default)."""
    return {"Authorization": f"Bearer {env['FLIGHTLOG_TOKEN']}"}


def test_call_through_the_proxy_end_to_end(world: tuple[LiveProxy, Received, dict[str, str]]) -> None:
    """httpx through the proxy: the upstream gets the secret, the reply and the Ledger never hold it."""
    proxy, received, env = world
    before = len(received.requests)
    token = tokens.mint(root(env), ["task = T5", "uses <= 3"]).encode()
    reply = httpx.post(
        DOOR,
        json={"tool": "weather", "args": {"city": "Bern"}},
        headers={"Authorization": f"Bearer {token}"},
        proxy=proxy.url,
        timeout=30,
    )
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["ok"] and SECRET not in reply.text
    [(head, sent)] = received.requests[before:]
    assert SECRET.encode() in head and SECRET.encode() in sent
    mine = [e for e in events(env) if e["action_id"] == body["action_id"]]
    assert sorted(str(e["kind"]) for e in mine) == [
        "dispatch.call",
        "dispatch.reply",
        "dispatch.upstream.request",
        "dispatch.upstream.response",
    ]
    assert {e["task"] for e in mine} == {"T5"} and {e["tool"] for e in mine} == {"weather"}


def test_contract_forms_run_as_written(world: tuple[LiveProxy, Received, dict[str, str]]) -> None:
    """The curl, one-line URL, `flightlog call`, Python snippet and MCP stdio forms of a row reach the
    upstream with the identical request; rendered without a token, they read FLIGHTLOG_TOKEN (as
    `flightlog run` sets it), the link carries one."""
    proxy, received, env = world
    before = len(received.requests)
    shown = forms(weather("http://unused"), {"city": "Bern"}, proxy=proxy.url)
    child = {**os.environ, "FLIGHTLOG_TOKEN": env["FLIGHTLOG_TOKEN"]}
    curl = subprocess.run(
        shown["curl"]["command"], shell=True, capture_output=True, text=True, timeout=30, env=child
    )
    assert curl.returncode == 0 and json.loads(curl.stdout)["ok"], curl.stdout + curl.stderr
    linked = forms(weather("http://unused"), {"city": "Bern"}, proxy=proxy.url, token=env["FLIGHTLOG_TOKEN"])
    link = httpx.get(linked["url"]["url"], proxy=proxy.url, timeout=30)
    assert link.status_code == 200 and link.json()["ok"], link.text
    argv = shlex.split(shown["cli"]["command"])
    assert argv[0] == "flightlog"
    cli = flightlog(env, *argv[1:])
    assert cli.returncode == 0 and json.loads(cli.stdout)["ok"], cli.stdout + cli.stderr
    snippet = subprocess.run(
        [sys.executable, "-c", shown["python"]["code"]], capture_output=True, text=True, timeout=60, env=child
    )
    assert snippet.returncode == 0 and json.loads(snippet.stdout)["ok"], snippet.stdout + snippet.stderr
    assert mcp_stdio(shown["mcp_stdio"], env)["ok"] is True
    assert len(received.requests) == before + 5
    heads = {h.replace(SECRET.encode(), b"[WEATHER_KEY]") for h, _ in received.requests[before:]}
    assert len(heads) == 1, "every form reaches the upstream with the same request"


def mcp_stdio(form: dict[str, object], env: dict[str, str]) -> dict[str, object]:
    """Run an MCP form with the official client (`flightlog` run as this interpreter's module)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = form["server"]
    assert isinstance(server, dict) and server["command"] == "flightlog"
    clean = {
        k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "flightlog", *server["args"]], env={**clean, **env}
    )

    async def main() -> str:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(str(form["tool"]), form["arguments"])  # type: ignore[arg-type]
            return str(result.content[0].text)  # type: ignore[union-attr]

    reply: dict[str, object] = json.loads(anyio.run(main))
    return reply


def test_dry_run_through_the_proxy_matches_the_real_call(
    world: tuple[LiveProxy, Received, dict[str, str]],
) -> None:
    """?dry_run=1 through the proxy shows, byte for byte with names, what the real call then sends."""
    proxy, received, env = world
    before = len(received.requests)
    call = {"tool": "weather", "args": {"city": "Zürich", "days": 1}}
    dry = httpx.post(DOOR + "?dry_run=1", json=call, proxy=proxy.url, timeout=30, headers=lent(env)).json()
    assert len(received.requests) == before
    assert httpx.post(DOOR, json=call, proxy=proxy.url, timeout=30, headers=lent(env)).json()["ok"]
    [(head, body)] = received.requests[before:]
    [shown] = dry["wire"]
    assert shown["head"].encode() == head.replace(SECRET.encode(), b"[WEATHER_KEY]")
    assert shown["body"].encode() == body.replace(SECRET.encode(), b"[WEATHER_KEY]")


def test_refusals_through_the_proxy_are_recorded(world: tuple[LiveProxy, Received, dict[str, str]]) -> None:
    """A refused host in a percent-encoded relay URL and a spent token are refused by name, and recorded."""
    proxy, received, env = world
    before = len(received.requests)
    hidden = {"tool": "rpc", "args": {"target": "https://relay.example/?u=https%3A%2F%2Fold.example%2F"}}
    first = httpx.post(DOOR, json=hidden, proxy=proxy.url, timeout=30, headers=lent(env))
    assert first.status_code == 403 and first.json()["refused"]["limit"] == "refused_host"
    token = tokens.mint(root(env), ["uses <= 0"]).encode()
    call = {"tool": "weather", "args": {"city": "x"}}
    second = httpx.post(DOOR, json=call, params={"token": token}, proxy=proxy.url, timeout=30)
    assert second.status_code == 403 and second.json()["refused"]["limit"] == "uses"
    assert len(received.requests) == before
    actions = {first.json()["action_id"], second.json()["action_id"]}
    refused = [e for e in events(env) if e["kind"] == "dispatch.refused" and e["action_id"] in actions]
    assert sorted(str(e["error"]).split(":")[0] for e in refused) == ["refused_host", "uses"]


def test_join_commands_on_the_cli(world: tuple[LiveProxy, Received, dict[str, str]]) -> None:
    """The join on the CLI (`uses`, `task`, `trace`) and as routes under flightlog.local agree."""
    proxy, _, env = world
    token = tokens.mint(root(env), ["task = T8"]).encode()
    call = {"tool": "weather", "args": {"city": "Bern"}}
    action = httpx.post(DOOR, json=call, params={"token": token}, proxy=proxy.url, timeout=30).json()[
        "action_id"
    ]
    uses = flightlog(env, "uses", "weather", "--json")
    assert uses.returncode == 0 and action in {e["action_id"] for e in json.loads(uses.stdout)}, uses.stderr
    task = flightlog(env, "task", "T8", "--json")
    assert len(json.loads(task.stdout)) == 4
    trace = flightlog(env, "trace", f"{action}:upstream.0.request")
    assert trace.returncode == 0 and "matches the contract" in trace.stdout, trace.stdout + trace.stderr
    routed = httpx.get(f"{DOOR}/trace/{action}:reply", proxy=proxy.url, timeout=30, headers=lent(env))
    assert routed.status_code == 200 and routed.json()["mismatch"] is False, routed.text
    in_task = httpx.get(f"{DOOR}/task/T8", proxy=proxy.url, timeout=30, headers=lent(env)).json()["events"]
    assert {e["action_id"] for e in in_task} == {action}


def test_identity_from_the_proxy_url_files_the_call(
    world: tuple[LiveProxy, Received, dict[str, str]],
) -> None:
    """A client whose proxy URL carries `agent=...;session=...` (as `flightlog run` sets it) is filed so."""
    proxy, _, env = world
    with_identity = proxy.url.replace("http://", "http://agent=alpha;session=s42@")
    call = {"tool": "weather", "args": {"city": "Bern"}}
    action = httpx.post(DOOR, json=call, proxy=with_identity, timeout=30, headers=lent(env)).json()[
        "action_id"
    ]
    engine = create_engine(env["FLIGHTLOG_LEDGER"])
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT agent, session, head FROM events WHERE action_id = :a"), {"a": action}
        )
        found = [tuple(r) for r in rows]
    engine.dispose()
    assert {(a, s) for a, s, _ in found} == {("alpha", "s42")}
    assert all(b"agent=alpha" not in bytes(h) for _, _, h in found)


def test_mcp_http_form_runs_through_the_proxy(world: tuple[LiveProxy, Received, dict[str, str]]) -> None:
    """The `mcp_http` form, run by the official MCP client over streamable HTTP through the proxy:
    the agent API's tools are listed, the `call` tool reaches the upstream once, and a browser page
    of another origin is refused."""
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    proxy, received, env = world
    before = len(received.requests)
    form = forms(weather("http://unused"), {"city": "Bern"}, proxy=proxy.url, token=env["FLIGHTLOG_TOKEN"])[
        "mcp_http"
    ]
    server = form["server"]
    assert isinstance(server, dict) and server["url"] == "http://flightlog.local/api/mcp"

    async def main() -> tuple[list[str], str]:
        headers = form["headers"]
        assert isinstance(headers, dict)
        async with (
            httpx2.AsyncClient(proxy=str(server["proxy"]), headers=headers, timeout=60) as client,
            streamable_http_client(str(server["url"]), http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            result = await session.call_tool(str(form["tool"]), form["arguments"])  # type: ignore[arg-type]
            return names, str(result.content[0].text)  # type: ignore[union-attr]

    names, text = anyio.run(main)
    assert {"manifest", "search", "get", "call"} <= set(names)
    assert json.loads(text)["ok"] is True
    assert len(received.requests) == before + 1
    foreign = httpx.post(
        str(server["url"]),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Origin": "http://evil.example", "Accept": "application/json, text/event-stream"},
        proxy=proxy.url,
        timeout=30,
    )
    assert foreign.status_code == 403


def test_zz_nothing_stored_twice_and_no_secret_on_disk(
    world: tuple[LiveProxy, Received, dict[str, str]],
) -> None:
    """After the proxy drains: generic capture recorded none of the door's traffic; no secret on disk."""
    proxy, _, env = world
    proxy.stop()
    found = events(env)
    assert found and [e for e in found if str(e["kind"]).startswith("http.")] == [], "stored twice"
    tmp = Path(env["FLIGHTLOG_HOME"]).parent
    files = [*tmp.glob("ledger.db*"), *(tmp / "blobs").rglob("*")]
    for path in files:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
            assert b"flt_" not in path.read_bytes(), f"a token was recorded in {path}"
