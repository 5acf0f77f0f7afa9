"""Every door x every verb x every caveat: a caveat that forbids the request refuses it, naming
itself; one that does not limit that verb lets it through; a token allowing all of it runs it.

The doors are read from the code, not listed by hand: the proxy's route table (`build_routes`: each
route's prefix, door and declared verbs), `flightlog mcp`'s door (`StdioDoor`, the server's verbs)
and `flightlog call`. The caveats are `authority.caveats.KEYS`, the verbs `authority.gate.VERBS`. A new
route, verb, door or caveat without an entry here fails `test_the_table_covers_every_door_verb_and_caveat`.

Each request runs in-process through the real parts: the proxy's `LocalRoutes.answer` (the gate, the
Ledger routes, the Directory, the door, the MCP route's SDK server), the MCP server `flightlog mcp`
serves (the official client, in memory), the door as `flightlog call` builds it; a real SQLite Ledger,
a Directory folder and a local upstream.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from addons.local_routes import LocalRoutes, build_routes
from authority import tokens
from authority.caveats import DOORS, KEYS, format_instant
from authority.gate import RULES, VERBS
from catalog.graphql_call import OPERATION
from catalog.local_rows import contract_hash
from catalog.mcp_server import build_server
from door.proxy_settings import ProxySettings
from flightlog.commands.agent_api import StdioDoor
from flightlog.commands.call import open_dispatcher
from flightlog.settings import load_settings
from recording.identity import Identity
from tests.dispatch.conftest import HOSTS_LINE, SECRET, weather
from tests.dispatch.upstreams import raw_upstream

NOTE = itertools.count()


@dataclass
class Request:
    """What one case asks: the verb, and for a write the row it creates (unique per case)."""

    verb: str
    row: str = ""

    @property
    def document(self) -> str:
        return f"---\nname: {self.row}\ndescription: a note\n---\n"


Outcome = tuple[bool, str | None]
"""(allowed, the limit a refusal names)."""
Driver = Callable[["World", Request, str, str | None], Outcome]
"""Runs a request through one door with a token (and the agent it claims, None: none)."""


@dataclass
class World:
    home: Path
    folder: Path
    routes: LocalRoutes
    root: bytes
    weather_hash: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("table")
    home, folder = tmp / "home", tmp / "dir"
    (folder / "tool").mkdir(parents=True)
    (folder / "sandbox").mkdir()
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={SECRET}\n" + HOSTS_LINE)
    url, blobs = f"sqlite:///{tmp / 'ledger.db'}", (tmp / "blobs").as_uri()
    with raw_upstream() as (base, _), pytest.MonkeyPatch.context() as env:
        row = weather(base)
        (folder / "tool" / "weather.md").write_text(row.to_document())
        for name, value in (("HOME", home), ("LEDGER", url), ("BLOBS", blobs), ("DIRECTORY", folder)):
            env.setenv(f"FLIGHTLOG_{name}", str(value))
        env.delenv("FLIGHTLOG_TOKEN", raising=False)
        settings = ProxySettings(home, url, blobs, folder, home / "secrets.env")
        routes = LocalRoutes(settings)
        yield World(home, folder, routes, tokens.root_key(home), contract_hash(row))
        routes.done()


# -- the doors ------------------------------------------------------------------------------------

CALL = {"tool": "weather", "args": {"city": "Bern"}}
GRAPHQL = {"query": OPERATION, "variables": CALL}


def _http(world: World, method: str, path: str, token: str, agent: str | None, body: Any = None) -> Outcome:
    headers = {
        "host": "flightlog.local",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream" if path == "/api/mcp" else "application/json",
        "authorization": f"Bearer {token}",
    }
    if agent:
        headers["x-flightlog-agent"] = agent
    content = json.dumps(body).encode() if body is not None else b""
    status, _, answer = world.routes.answer(method, path.partition("?")[0], {}, headers, content)
    return _outcome(status < 300, answer)


def _outcome(ok: bool, answer: bytes | str) -> Outcome:
    try:
        found = json.loads(answer)
    except ValueError:
        return ok, None
    if isinstance(found, dict) and isinstance(found.get("data"), dict):  # GraphQL: the door's reply inside
        found = found["data"].get("call") or {}
    if isinstance(found, dict) and isinstance(found.get("result"), dict):  # JSON-RPC
        result = found["result"]
        text = (result.get("content") or [{}])[0].get("text", "")
        return _outcome(not result.get("isError"), text) if result.get("isError") else (ok, None)
    refused = found.get("refused") if isinstance(found, dict) else None
    return (ok and not refused), (refused or {}).get("limit") if isinstance(refused, dict) else None


def _mcp_body(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _write_args(r: Request) -> dict[str, Any]:
    return {"bundle": "sandbox", "path": f"{r.row}.md", "content": r.document}


def http_route(prefix: str) -> dict[str, Driver]:
    """The drivers of one route of the proxy's table, by verb."""
    table: dict[str, dict[str, Driver]] = {
        "/api/ledger/": {"ledger": lambda w, r, t, a: _http(w, "GET", "/api/ledger/counts", t, a)},
        "/api/join/": {"ledger": lambda w, r, t, a: _http(w, "GET", "/api/join/task/T1", t, a)},
        "/api/dispatch": {
            "call": lambda w, r, t, a: _http(w, "POST", "/api/dispatch", t, a, CALL),
            "ledger": lambda w, r, t, a: _http(w, "GET", "/api/dispatch/uses/weather", t, a),
        },
        "/api/directory/": {
            "read": lambda w, r, t, a: _http(w, "GET", "/api/directory/manifest", t, a),
            "write": lambda w, r, t, a: _http(w, "POST", "/api/directory/write", t, a, _write_args(r)),
        },
        "/api/graphql": {"call": lambda w, r, t, a: _http(w, "POST", "/api/graphql", t, a, GRAPHQL)},
        "/api/mcp": {
            "read": lambda w, r, t, a: _http(w, "POST", "/api/mcp", t, a, _mcp_body("manifest", {})),
            "write": lambda w, r, t, a: _http(
                w, "POST", "/api/mcp", t, a, _mcp_body("write", _write_args(r))
            ),
            "call": lambda w, r, t, a: _http(w, "POST", "/api/mcp", t, a, _mcp_body("call", CALL)),
        },
    }
    return table[prefix]


def _stdio(world: World, tool: str, arguments: dict[str, Any], token: str, agent: str | None) -> Outcome:
    door = StdioDoor(world.folder, agent, None, token)
    directory = door._door()[0].directory
    server = build_server(directory, dispatch=door.dispatch, authorize=door.authorize)

    async def main() -> Any:
        from mcp import Client

        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    result = anyio.run(main)
    text = result.content[0].text
    if result.is_error and text.startswith("refused by "):
        return False, text.split()[2].rstrip(":")
    return _outcome(not result.is_error, text) if result.is_error else (True, None)


STDIO: dict[str, Driver] = {
    "read": lambda w, r, t, a: _stdio(w, "manifest", {}, t, a),
    "write": lambda w, r, t, a: _stdio(w, "write", _write_args(r), t, a),
    "call": lambda w, r, t, a: _stdio(w, "call", CALL, t, a),
}


def _cli(world: World, r: Request, token: str, agent: str | None) -> Outcome:
    door = open_dispatcher(load_settings(), None, None, None)
    try:
        result = door.dispatch(CALL, door="cli", token=token, identity=Identity(agent=agent))
    finally:
        door.close()
    refused = result.reply.get("refused")
    return (result.status < 300 and not refused), refused["limit"] if refused else None


CLI: dict[str, Driver] = {"call": _cli}

ENTRANCES: dict[str, tuple[str, dict[str, Driver]]] = {
    **{p: (door, http_route(p)) for p, door in (("/api/ledger/", "http"), ("/api/join/", "http"),
       ("/api/dispatch", "http"), ("/api/graphql", "http"), ("/api/directory/", "http"),
       ("/api/mcp", "mcp"))},
    "flightlog mcp": ("mcp", STDIO),
    "flightlog call": ("cli", CLI),
}  # fmt: skip
"""Every way in: its door and, per verb it serves, how to run one request through it."""


# -- the caveats ----------------------------------------------------------------------------------

PAST = format_instant(datetime.now(UTC) - timedelta(hours=1))
FUTURE = format_instant(datetime.now(UTC) + timedelta(hours=1))
RIGHTS = {"call": "call", "write": "write", "ledger": "ledger"}


def forbidding(key: str, door: str, r: Request) -> tuple[list[str], str | None] | None:
    """Caveats under which `key` forbids the request (and the agent it claims), or None when the
    caveat does not limit this verb (the request must then go through)."""
    rows = VERBS[r.verb].rows
    other = next(d for d in DOORS if d != door)
    return {
        "grants": ([f"grants = {'call' if r.verb != 'call' else 'ledger'}"], None)
        if r.verb in RIGHTS
        else None,
        "doors": ([f"doors = {other}"], None),
        "uses": (["uses <= 0"], None),
        "expires": ([f"expires < {PAST}"], None),
        "for": (["for = alpha"], None),
        "task": (["task = A", "task = B"], None),
        "tools": (["tools = someone_else"], None) if rows else None,
        "bundles": (["bundles = elsewhere"], None) if rows else None,
        "folders": (["folders = elsewhere/inside"], None) if rows else None,
        "contract": ([f"contract = weather:{'0' * 16}"], None) if rows else None,
    }[key]


def allowing(key: str, door: str, r: Request, world: World) -> list[str]:
    """A caveat of `key` that allows the request (with agent alpha claimed)."""
    if r.verb == "write":
        name, bundle, folder, bound = r.row, "sandbox", f"sandbox/{r.row}.md", None
    else:
        name, bundle, folder, bound = "weather", "tool", "tool", f"weather:{world.weather_hash}"
    return {
        "grants": [f"grants = {RIGHTS.get(r.verb, 'call')}"],
        "doors": [f"doors = {door}"],
        "uses": ["uses <= 100"],
        "expires": [f"expires < {FUTURE}"],
        "for": ["for = alpha"],
        "task": ["task = A"],
        "tools": [f"tools = {name}"],
        "bundles": [f"bundles = {bundle}"],
        "folders": [f"folders = {folder}"],
        "contract": [f"contract = {bound}"] if bound else [],
    }[key]


CASES = [
    (entrance, verb, key) for entrance, (_, drivers) in ENTRANCES.items() for verb in drivers for key in KEYS
]


def test_the_table_covers_every_door_verb_and_caveat(tmp_path: Path) -> None:
    """The routes the proxy registers, with their doors and verbs, are exactly the HTTP entrances
    here; with `flightlog mcp` and `flightlog call` every door and every verb is driven; every caveat
    has a forbidding case."""
    routes, _ = build_routes(ProxySettings(tmp_path, f"sqlite:///{tmp_path / 'l.db'}", tmp_path.as_uri()))
    declared = {p: (r.door, set(r.verbs)) for p, r in routes.routes.items()}
    driven = {p: (door, set(drivers)) for p, (door, drivers) in ENTRANCES.items() if p.startswith("/")}
    assert declared == driven
    assert {door for door, _ in ENTRANCES.values()} == set(DOORS)
    assert set().union(*(set(d) for _, d in ENTRANCES.values())) == set(VERBS)
    assert set(KEYS) == {key for _, _, key in CASES} == set(RULES)
    for key in KEYS:
        assert forbidding(key, "http", Request("call")) is not None, key


@pytest.mark.parametrize(("entrance", "verb", "key"), CASES)
def test_a_caveat_refuses_what_it_forbids(world: World, entrance: str, verb: str, key: str) -> None:
    """Under the caveat that forbids it, the request is refused naming that caveat; under a caveat
    that does not limit the verb, it goes through."""
    door, drivers = ENTRANCES[entrance]
    request = Request(verb, f"note{next(NOTE)}")
    case = forbidding(key, door, request)
    caveats, agent = case if case is not None else (allowing(key, door, request, world), "alpha")
    allowed, limit = drivers[verb](world, request, tokens.mint(world.root, caveats).encode(), agent)
    if case is None:
        assert (allowed, limit) == (True, None), f"{key} does not limit {verb}, yet: {limit}"
    else:
        assert (allowed, limit) == (False, key)


@pytest.mark.parametrize(("entrance", "verb"), sorted({(e, v) for e, v, _ in CASES}))
def test_a_token_allowing_everything_a_request_needs_runs_it(world: World, entrance: str, verb: str) -> None:
    """The control: one token carrying every caveat, each set to allow the request, runs it."""
    door, drivers = ENTRANCES[entrance]
    request = Request(verb, f"note{next(NOTE)}")
    caveats = [c for key in KEYS for c in allowing(key, door, request, world)]
    assert drivers[verb](world, request, tokens.mint(world.root, caveats).encode(), "alpha") == (True, None)
    if verb == "write":
        assert (world.folder / "sandbox" / f"{request.row}.md").exists()
