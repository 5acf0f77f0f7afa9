"""The Directory is live everywhere: a folder edit is seen before the next call any door answers.

The issue: after a row was edited on disk, the running proxy's door ran the old contract and a token
bound to the old contract hash kept passing; `trace` compared a past call with today's row, so an
edit made an honest call MISMATCH. Here the operator edits `tool/weather.md` (an editor's write to a
temporary file and rename) while a proxy with two workers and a `flightlog mcp` session run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from catalog.local_rows import contract_hash
from catalog.tool import Tool
from tests.dispatch.gate_world import World, gate_world, limit_of

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

CALL = {"tool": "weather", "args": {"city": "Bern"}}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with gate_world(tmp_path_factory.mktemp("live")) as made:
        yield made


def moved(world: World, version: str) -> str:
    """weather's row with its upstream path changed to `/VERSION/weather`."""
    current = Tool.from_document(world.row("tool", "weather.md"))
    upstream = dict(current.upstream)  # type: ignore[arg-type]
    upstream["url"] = str(upstream["url"]).split("/v")[0] + f"/{version}/weather?q={{city}}&key=[WEATHER_KEY]"
    return Tool.from_frontmatter({**current.frontmatter(), "upstream": upstream}).to_document()


def last_target(world: World) -> str:
    head = world.received.requests[-1][0]
    return head.split(b" ")[1].decode()


def test_the_proxy_runs_the_edited_row_at_the_next_call(world: World) -> None:
    """Edited on disk, weather's row is what the next call runs, on whichever worker it lands (eight
    calls after each edit); a token bound to the old contract is refused by `contract` at once, and
    one bound to the new contract runs."""
    row = Tool.from_document(world.row("tool", "weather.md"))
    old = world.mint("grants = call", "tools = weather", f"contract = weather:{contract_hash(row)}")
    assert world.send("POST", "/api/dispatch", old, CALL).status_code == 200
    anyone = world.mint("grants = call")
    for version in ("v2", "v3"):
        world.write_row("tool", "weather.md", moved(world, version))
        for _ in range(8):
            ran = world.send("POST", "/api/dispatch", anyone, CALL)
            assert ran.status_code == 200, ran.text
            assert last_target(world).startswith(f"/{version}/weather"), last_target(world)
        refused = world.send("POST", "/api/dispatch", old, CALL)
        assert refused.status_code == 403 and limit_of(refused) == "contract", refused.text
    now = Tool.from_document(world.row("tool", "weather.md"))
    bound = world.mint("grants = call", "tools = weather", f"contract = weather:{contract_hash(now)}")
    assert world.send("POST", "/api/dispatch", bound, CALL).status_code == 200


def test_the_proxys_directory_routes_read_the_edit(world: World) -> None:
    """The Directory's own route answers the edited text at the next request, on either worker
    (four reads after each of two edits; the first read of a worker opens, and so syncs, by itself)."""
    for version in ("v4", "v4b"):
        world.write_row("tool", "weather.md", moved(world, version))
        for _ in range(4):
            got = world.send("GET", "/api/directory/row/weather")
            assert got.status_code == 200 and f"/{version}/weather" in got.text


def test_flightlog_mcp_sees_an_edit_without_restarting(world: World) -> None:
    """One `flightlog mcp` session (the official client over stdio): `get` shows the edited row and
    `call` runs its new contract, both after the edit and without a new session."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    token = world.mint("grants = call")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "flightlog", "mcp"], env=world.env(FLIGHTLOG_TOKEN=token)
    )

    async def main() -> list[Any]:
        seen: list[Any] = []
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for version in ("v5", "v6"):
                world.write_row("tool", "weather.md", moved(world, version))
                got = await session.call_tool("get", {"ids": ["weather"]})
                ran = await session.call_tool("call", CALL)
                seen.append((version, got.content[0].text, ran.content[0].text, last_target(world)))
        return seen

    for version, text, reply, target in anyio.run(main):
        assert f"/{version}/weather" in text
        assert json.loads(reply)["ok"] is True, reply
        assert target.startswith(f"/{version}/weather")


def test_trace_compares_a_call_with_the_row_it_ran_under(world: World) -> None:
    """A call made under v7, traced after the row moved to v8, matches the contract it ran under
    (exit 0, `matches the contract`); the trace names the revision's hash it compared with."""
    world.write_row("tool", "weather.md", moved(world, "v7"))
    ran = world.send("POST", "/api/dispatch", world.mint("grants = call"), CALL)
    assert ran.status_code == 200
    world.write_row("tool", "weather.md", moved(world, "v8"))
    reader = world.mint("grants = ledger")
    events = world.send("GET", f"/api/ledger/action/{ran.json()['action_id']}", reader).json()["events"]
    request = next(e["event_id"] for e in events if e["kind"] == "dispatch.upstream.request")
    done = world.flightlog("trace", request)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "matches the contract" in done.stdout and "MISMATCH" not in done.stdout
    traced = json.loads(world.flightlog("trace", request, "--json").stdout)
    assert "/v7/weather" in json.dumps(traced["contract"]) and traced["row_hash"]
