"""Authority, tried the way an untrusted client of the proxy would: nothing runs, reads or writes
without a token granting exactly that.

One real proxy (`flightlog proxy`, local commands off) over a Directory folder holding a remote row
(`weather`) and a row that runs a command (`local_touch`, written by the operator). Every local route
and both MCP doors are tried with no token, a wrong one, a forged one, a spent one, one for another
tool, from a foreign Origin (with a valid token), with a `text/plain` body (with a valid token) and
under another Host. Each attempt must be refused; afterwards the Directory is unchanged, no row that
runs a command was ever written, and the marker file the commands would create does not exist.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from authority import tokens
from catalog.directory import open_directory, starter_folder
from catalog.local_rows import contract_hash
from catalog.tool import Tool
from tests.dispatch.conftest import HOSTS_LINE, SECRET, weather
from tests.dispatch.upstreams import raw_upstream
from tests.support.proxy import LiveProxy, live_proxy

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

BASE = "http://flightlog.local"
ATTACK_COUNTS: dict[str, list[int]] = {}
"""door -> [attacks tried, refused]; printed by the last test for the report."""


def shell_row(name: str, marker: Path) -> str:
    """A tool row whose contract runs a command that leaves `marker` behind."""
    return Tool.from_frontmatter(
        {
            "name": name,
            "description": "Touches a file.",
            "upstream": {"method": "CLI", "command": ["sh", "-c", f"touch {marker}"]},
            "cli": True,
        }
    ).to_document()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("attacks")
    home, folder, marker = tmp / "home", tmp / "dir", tmp / "pwned.txt"
    (folder / "tool").mkdir(parents=True)
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={SECRET}\n" + HOSTS_LINE)  # read by default, no --secrets
    with raw_upstream() as (base, received):
        (folder / "tool" / "weather.md").write_text(weather(base).to_document())
        (folder / "tool" / "local_touch.md").write_text(shell_row("local_touch", marker))
        for name in ("ledger_counts.md", "directory_write.md"):  # flightlog's own routes, as rows
            (folder / "tool" / name).write_text((starter_folder() / "tool" / name).read_text())
        url = f"sqlite:///{tmp / 'ledger.db'}"
        env = {"FLIGHTLOG_LEDGER": url, "FLIGHTLOG_BLOBS": (tmp / "blobs").as_uri()}
        with live_proxy(home, url, env=env, args=["--set", f"flightlog_directory={folder}"]) as proxy:
            root = tokens.root_key(home)
            yield {
                "proxy": proxy,
                "home": home,
                "folder": folder,
                "marker": marker,
                "received": received,
                "root": root,
                "url": url,
            }


def mint(world: dict[str, Any], *caveats: str) -> str:
    return tokens.mint(world["root"], list(caveats)).encode()


def credentials(world: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The ways an attacker presents itself; every one must be refused on every route."""
    full = mint(world, "grants = call,ledger,write")
    spent = mint(world, "grants = call,ledger,write", "uses <= 0")
    forged = tokens.mint(b"x" * 32, ["grants = call,ledger,write"]).encode()
    other_tool = mint(world, "grants = call", "tools = weather")
    json_type = {"content-type": "application/json"}
    return {
        "no token": dict(json_type),
        "wrong token": {"authorization": "Bearer hello", **json_type},
        "forged token": {"authorization": f"Bearer {forged}", **json_type},
        "spent token": {"authorization": f"Bearer {spent}", **json_type},
        "token for another tool": {"authorization": f"Bearer {other_tool}", **json_type},
        "foreign origin": {"authorization": f"Bearer {full}", "origin": "http://evil.example", **json_type},
        "cross-site fetch": {"authorization": f"Bearer {full}", "sec-fetch-site": "cross-site", **json_type},
        "text/plain body": {"authorization": f"Bearer {full}", "content-type": "text/plain"},
        "rebound host": {"authorization": f"Bearer {full}", "host": "evil.example", **json_type},
    }


def send(
    proxy: LiveProxy, method: str, path: str, headers: dict[str, str], body: Any = None
) -> httpx.Response:
    content = json.dumps(body).encode() if body is not None else None
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as client:
        return client.request(method, BASE + path, headers=headers, content=content)


def tally(door: str, refused: bool) -> None:
    counts = ATTACK_COUNTS.setdefault(door, [0, 0])
    counts[0] += 1
    counts[1] += int(refused)


def directory_state(world: dict[str, Any]) -> tuple[str, list[str]]:
    d = open_directory(world["url"], world["folder"])
    try:
        return d.snapshot().digest, sorted(r.name for r in d.rows())
    finally:
        d.close()


def attacks(world: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """(door, method, path, body) of every route an attacker would try; `{marker}` rows included."""
    evil = shell_row("PWN", world["marker"])
    call_local = {"tool": "local_touch", "args": {}}
    return [
        ("ledger", "GET", "/api/ledger/counts", None),
        ("ledger", "GET", "/api/ledger/row/ev-1", None),
        ("ledger", "GET", "/api/ledger/ask?q=errors", None),
        ("ledger", "POST", "/api/ledger/query", {"filter": {}}),
        ("join", "GET", "/api/dispatch/uses/weather", None),
        ("join", "GET", "/api/dispatch/task/T1", None),
        ("join", "GET", "/api/dispatch/trace/x:reply", None),
        ("join", "GET", "/api/join/uses/weather", None),
        ("directory", "POST", "/api/directory/write", {"bundle": "tool", "path": "PWN.md", "content": evil}),
        (
            "directory",
            "POST",
            "/api/directory/transact",
            {"changes": [{"operation": "write", "bundle": "tool", "path": "PWN.md", "content": evil}]},
        ),
        (
            "directory",
            "POST",
            "/api/directory/delete",
            {"bundle": "tool", "path": "weather.md", "replaces": "0"},
        ),
        ("dispatch", "POST", "/api/dispatch", call_local),
        ("dispatch", "POST", "/api/dispatch", {"tool": "LEDGER_COUNTS", "args": {}}),
        (
            "dispatch",
            "POST",
            "/api/dispatch",
            {"tool": "DIRECTORY_WRITE", "args": {"bundle": "tool", "path": "PWN.md", "content": evil}},
        ),
        ("dispatch", "GET", "/api/dispatch?tool=local_touch&args={}", None),
        (
            "mcp",
            "POST",
            "/api/mcp",
            _rpc(
                "tools/call",
                {"name": "write", "arguments": {"bundle": "tool", "path": "PWN.md", "content": evil}},
            ),
        ),
        ("mcp", "POST", "/api/mcp", _rpc("tools/call", {"name": "call", "arguments": call_local})),
        (
            "mcp",
            "POST",
            "/api/mcp",
            _rpc("tools/call", {"name": "call", "arguments": {"tool": "LEDGER_COUNTS", "args": {}}}),
        ),
    ]


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def refused(response: httpx.Response) -> bool:
    """Refused: an error status, or (MCP) a tool result marked isError."""
    if response.status_code >= 400:
        return True
    try:
        body = response.json()
    except ValueError:
        return False
    result = body.get("result") if isinstance(body, dict) else None
    return isinstance(result, dict) and result.get("isError") is True


def refusals(world: dict[str, Any]) -> list[str]:
    """The limits named by every `dispatch.refused` event in the Ledger so far."""
    from sqlalchemy import create_engine, text

    engine = create_engine(world["url"])
    with engine.connect() as conn:
        found = [r[0] for r in conn.execute(text("SELECT error FROM events WHERE kind = 'dispatch.refused'"))]
    engine.dispose()
    return [str(e).split(":")[0] for e in found]


def test_every_route_refuses_every_untrusted_caller(world: dict[str, Any]) -> None:
    """Every attack on every route is refused and recorded as a Ledger event naming its limit; the
    Directory is unchanged, no PWN row exists and the marker the commands would leave does not exist
    (no process ran)."""
    proxy: LiveProxy = world["proxy"]
    before = directory_state(world)
    recorded = len(refusals(world))
    tried = 0
    accepted = []
    for who, headers in credentials(world).items():
        for door, method, path, body in attacks(world):
            if who == "text/plain body" and body is None:
                continue  # a CSRF body attack needs a body; a bodiless GET with a valid token is fine
            h = dict(headers)
            if door == "mcp":
                h["accept"] = "application/json, text/event-stream"
            response = send(proxy, method, path, h, body)
            tried += 1
            ok = refused(response)
            tally(door, ok)
            if not ok:
                accepted.append(f"{who}: {method} {path} -> {response.status_code} {response.text[:200]}")
    assert accepted == [], "\n".join(accepted)
    limits = refusals(world)[recorded:]
    assert len(limits) == tried, "every refusal is a Ledger event"
    assert {"token", "signature", "uses", "tools", "origin", "content_type", "host"} <= set(limits), limits
    assert directory_state(world) == before
    assert "PWN" not in before[1]
    assert not world["marker"].exists(), "a command ran"


def test_a_valid_token_is_refused_by_the_right_limit(world: dict[str, Any]) -> None:
    """Positive controls: a Ledger token reads the Ledger; a call token runs weather but not a Ledger
    tool (no confused deputy) and not the command row (local commands are off): each refusal names its
    limit and is recorded as a Ledger event."""
    proxy: LiveProxy = world["proxy"]
    reader = {"authorization": f"Bearer {mint(world, 'grants = ledger')}"}
    assert send(proxy, "GET", "/api/ledger/counts", reader).status_code == 200
    caller = {"authorization": f"Bearer {mint(world, 'grants = call')}", "content-type": "application/json"}
    ran = send(proxy, "POST", "/api/dispatch", caller, {"tool": "weather", "args": {"city": "Bern"}})
    assert ran.status_code == 200 and ran.json()["ok"], ran.text
    deputy = send(proxy, "POST", "/api/dispatch", caller, {"tool": "LEDGER_COUNTS", "args": {}})
    assert deputy.status_code == 403 and deputy.json()["refused"]["limit"] == "grants", deputy.text
    both = {
        "authorization": f"Bearer {mint(world, 'grants = call,ledger')}",
        "content-type": "application/json",
    }
    lent = send(proxy, "POST", "/api/dispatch", both, {"tool": "LEDGER_COUNTS", "args": {}})
    assert lent.status_code == 200 and lent.json()["ok"], lent.text
    named = {
        "authorization": f"Bearer {mint(world, 'tools = local_touch')}",
        "content-type": "application/json",
    }
    local = send(proxy, "POST", "/api/dispatch", named, {"tool": "local_touch", "args": {}})
    assert local.status_code == 403 and local.json()["refused"]["limit"] == "local_command", local.text
    for answer, limit in ((deputy, "grants"), (local, "local_command")):
        action = send(proxy, "GET", f"/api/ledger/action/{answer.json()['action_id']}", reader).json()
        kinds = {e["kind"]: e for e in action["events"]}
        assert kinds["dispatch.refused"]["error"].startswith(f"{limit}: "), action
    assert not world["marker"].exists()


def test_a_narrow_token_cannot_rewrite_its_row_and_a_rewritten_row_refuses_old_tokens(
    world: dict[str, Any],
) -> None:
    """A token for weather cannot rewrite weather's row at all (no `write`); a token that may write
    the Directory still cannot make it run a command (403, nothing written); a row rewritten into
    another contract refuses the token minted for the old one, with limit `contract`."""
    proxy: LiveProxy = world["proxy"]
    row = send(proxy, "GET", "/api/directory/row/weather", {})
    assert row.status_code == 200
    etag = row.headers["etag"].strip('"')
    shell = shell_row("weather", world["marker"])
    body = {"bundle": "tool", "path": "weather.md", "content": shell, "replaces": etag}
    narrow = mint(world, "grants = call", "tools = weather")
    headers = {"authorization": f"Bearer {narrow}", "content-type": "application/json"}
    assert send(proxy, "POST", "/api/directory/write", headers, body).status_code == 403
    writer = {"authorization": f"Bearer {mint(world, 'grants = write')}", "content-type": "application/json"}
    refused_write = send(proxy, "POST", "/api/directory/write", writer, body)
    assert refused_write.status_code == 403, refused_write.text
    assert send(proxy, "GET", "/api/directory/row/weather", {}).headers["etag"].strip('"') == etag

    current = Tool.from_document(row.text)
    bound = mint(world, "grants = call", "tools = weather", f"contract = weather:{contract_hash(current)}")
    caller = {"authorization": f"Bearer {bound}", "content-type": "application/json"}
    call = {"tool": "weather", "args": {"city": "Bern"}}
    assert send(proxy, "POST", "/api/dispatch", caller, call).status_code == 200
    upstream = dict(current.upstream)  # type: ignore[arg-type]
    upstream["url"] = str(upstream["url"]).replace("/v1/weather", "/v2/weather")
    moved = Tool.from_frontmatter({**current.frontmatter(), "upstream": upstream}).to_document()
    rewrite = {"bundle": "tool", "path": "weather.md", "content": moved, "replaces": etag}
    assert send(proxy, "POST", "/api/directory/write", writer, rewrite).status_code == 200
    old = send(proxy, "POST", "/api/dispatch", caller, call)
    assert old.status_code == 403 and old.json()["refused"]["limit"] == "contract", old.text
    assert not world["marker"].exists()


def test_mcp_stdio_door_refuses_writing_a_command_row(world: dict[str, Any]) -> None:
    """`flightlog mcp` (the stdio door, with a token that may write and call): writing a row that
    runs a command is an error result and nothing is written; calling the command row is refused."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    token = mint(world, "grants = call,write")
    clean = {
        k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")
    }
    env = {
        **clean,
        "FLIGHTLOG_HOME": str(world["home"]),
        "FLIGHTLOG_LEDGER": world["url"],
        "FLIGHTLOG_DIRECTORY": str(world["folder"]),
        "FLIGHTLOG_TOKEN": token,
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "flightlog", "mcp"], env=env)
    before = directory_state(world)
    evil = shell_row("PWN", world["marker"])

    async def main() -> list[bool]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            wrote = await session.call_tool("write", {"bundle": "tool", "path": "PWN.md", "content": evil})
            ran = await session.call_tool("call", {"tool": "local_touch", "args": {}})
            bare = await session.call_tool("call", {"tool": "local_touch", "args": {}, "token": "hello"})
            return [bool(wrote.is_error), bool(ran.is_error), bool(bare.is_error)]

    results = anyio.run(main)
    for ok in results:
        tally("mcp stdio", ok)
    assert results == [True, True, True]
    assert directory_state(world) == before and not world["marker"].exists()


def test_a_rebound_page_reaching_the_port_directly_gets_none_of_the_routes(world: dict[str, Any]) -> None:
    """DNS rebinding: a page at evil.example rebound to the proxy's address sends origin-form requests
    with its own Host straight to the port. None of flightlog's routes answers it (no JSON of ours),
    nothing is written and no command runs."""
    import socket

    proxy: LiveProxy = world["proxy"]
    before = directory_state(world)
    body = json.dumps({"tool": "local_touch", "args": {}}).encode()
    for path in ("/api/dispatch", "/api/directory/write", "/api/ledger/counts"):
        request = (
            f"POST {path} HTTP/1.1\r\nHost: evil.example:{proxy.port}\r\nOrigin: http://evil.example:{proxy.port}"
            f"\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as conn:
            conn.sendall(request)
            answer = b""
            while chunk := conn.recv(65536):
                answer += chunk
        tally("rebinding", not answer.startswith(b"HTTP/1.1 2"))
        assert not answer.startswith(b"HTTP/1.1 2"), answer[:300]
    assert directory_state(world) == before and not world["marker"].exists()


def test_zz_report_the_attack_counts(world: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """Every attack tried was refused (the counts per door, for the closing note), and no command ran."""
    assert ATTACK_COUNTS and all(tried == refused for tried, refused in ATTACK_COUNTS.values())
    with capsys.disabled():
        summary = ", ".join(f"{door} {r}/{t} refused" for door, (t, r) in sorted(ATTACK_COUNTS.items()))
        print(f"\nattacks: {summary}; commands run: {int(world['marker'].exists())}")
    assert not world["marker"].exists()
