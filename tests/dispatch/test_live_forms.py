"""Every contract form of a tool, run as written by its real consumer against a live flightlog proxy,
all reaching the upstream with the same request (issue 44: seed 000's 26 forms, 29 with a scoped
token, 30 with an upstream, each executed).

The forms come from `flightlog contracts` in the proxy's FLIGHTLOG_HOME, so they carry the running
proxy's address from `proxy.json` (an ephemeral port, not 127.0.0.1:8080). Each runner of
`tests/dispatch/form_runners.py` is the form's consumer: curl, wget, the shell (the CLI), Python
(httpx, flightlog's SDK and function, the official MCP client), Node with undici (fetch and
WebSocket), a Shortcuts interpreter, the OpenSSH client against a local SSH server, MCP clients
started from each configuration, and the openai and anthropic SDKs against a local stand-in that
answers with a tool call. Twice: with a lent token the forms carry, and with none, the consumer
holding its token in FLIGHTLOG_TOKEN.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from authority import tokens
from catalog.contracts import ALWAYS_FORMS, FORM_NAMES, canonical_json
from tests.dispatch.conftest import HOSTS_LINE, SECRET, flightlog
from tests.dispatch.form_runners import ARGS, BIN, RUNNERS, TOOL, World
from tests.dispatch.model_stand_in import stand_in
from tests.dispatch.test_live_proxy import write_directory
from tests.dispatch.upstreams import Received, raw_upstream
from tests.support.proxy import live_proxy
from tests.support.ssh_server import ssh_server

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

CANNOT_READ_THE_ENVIRONMENT = frozenset({"url", "webhook"})
"""Forms that carry a token only when one is lent: a link and a webhook sender's URL cannot read the
environment of whoever uses them (a Shortcut asks for it instead)."""


def _npm_undici(folder: Path) -> Path:
    npm = shutil.which("npm")
    assert npm and shutil.which("node"), "node and npm are needed to run the JavaScript forms"
    done = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), "undici@7"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"npm could not install undici: {(done.stderr or done.stdout)[-300:]}"
    return folder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, Received]]:
    """A proxy over a Directory holding the weather row (its upstream a local server that keeps every
    request's bytes), the machine's FLIGHTLOG_* variables, undici installed for Node, a local SSH
    server whose sessions run on this machine as flightlog's, and the model APIs' stand-in."""
    tmp = tmp_path_factory.mktemp("forms")
    home = tmp / "home"
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={SECRET}\n" + HOSTS_LINE)
    node = _npm_undici(tmp / "node")
    with raw_upstream() as (base, received), stand_in() as models:
        write_directory(tmp / "dir", base)
        env = {
            "FLIGHTLOG_HOME": str(home),
            "FLIGHTLOG_LEDGER": f"sqlite:///{tmp / 'ledger.db'}",
            "FLIGHTLOG_BLOBS": (tmp / "blobs").as_uri(),
            "FLIGHTLOG_DIRECTORY": str(tmp / "dir"),
        }
        machine = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp), "LANG": "C.UTF-8", **env}
        args = ["--secrets", str(home / "secrets.env")]
        with (
            ssh_server(tmp / "ssh", machine) as ssh,
            live_proxy(home, env["FLIGHTLOG_LEDGER"], env=env, args=args) as proxy,
        ):
            token = tokens.mint(tokens.root_key(home), ["task = T44"]).encode()
            yield World(proxy.url, env, node, ssh, models, token), received


def contracts(world: World, *extra: str) -> dict[str, Any]:
    out = flightlog(world.env, "contracts", TOOL, "--json", "--args", json.dumps(ARGS), *extra)
    assert out.returncode == 0, out.stderr
    shown: dict[str, Any] = json.loads(out.stdout)
    return shown


def named(data: bytes) -> bytes:
    return data.replace(SECRET.encode(), b"[WEATHER_KEY]")


def run_all(
    world: World, shown: dict[str, Any], received: Received
) -> tuple[dict[str, Any], list[tuple[bytes, bytes]]]:
    """Every form run by its runner, in order; the replies, and the requests the upstream received."""
    world.seen["dispatch_form"] = shown["dispatch"]
    before = len(received.requests)
    replies = {name: RUNNERS[name](world, form) for name, form in shown.items()}
    return replies, received.requests[before:]


def test_every_form_has_a_runner() -> None:
    """A form nobody runs cannot ship: the runners' table covers every form name, and the counts are
    seed 000's: 26 always, 3 more with a token, 1 more with an upstream."""
    assert set(RUNNERS) == set(FORM_NAMES)
    assert (len(ALWAYS_FORMS), len(FORM_NAMES) - 1, len(FORM_NAMES)) == (26, 29, 30)


def test_with_a_lent_token_all_30_forms_run_and_reach_the_upstream_alike(
    world: tuple[World, Received],
) -> None:
    """`flightlog contracts weather --token T` renders 30 forms and says so; each, run by its consumer,
    gets the door's `ok` reply; every request the door sent upstream is the same bytes, the upstream
    form sent directly is that request too, and the dry run showed exactly those bytes."""
    w, received = world
    line = flightlog(
        w.env, "contracts", TOOL, "--args", json.dumps(ARGS), "--token", w.token
    ).stdout.splitlines()[0]
    assert line == f'30 forms of the canonical call {{"tool":"{TOOL}","args":{{"city":"Bern"}}}}'
    shown = contracts(w, "--token", w.token)
    assert list(shown) == list(FORM_NAMES)
    assert f"--proxy {w.proxy}" in shown["curl"]["command"] and "127.0.0.1:8080" not in json.dumps(shown)

    replies, upstream = run_all(w, shown, received)

    assert {n: r.get("ok") for n, r in replies.items()} == dict.fromkeys(shown, True)
    assert replies["dispatch_dry_run"]["dry_run"] is True
    assert len(upstream) == len(shown) - 1  # every form but the dry run; the upstream form (last) direct
    door, (head, body) = [(named(h), named(b)) for h, b in upstream[:-1]], upstream[-1]
    assert len(set(door)) == 1, "every form reaches the upstream alike"
    assert (named(head).split(b"\r\n")[0], named(body)) == (door[0][0].split(b"\r\n")[0], door[0][1])
    [wire] = replies["dispatch_dry_run"]["wire"]
    assert (wire["head"].encode(), wire["body"].encode()) == door[0]
    assert w.seen["apple_shortcut"] == shown["dispatch"] | {"body": canonical_json(shown["dispatch"]["body"])}
    assert w.seen["claude_code_env"]["FLIGHTLOG_TOKEN"] == w.token
    assert w.ssh.commands and all("flt_" not in c for c in w.ssh.commands), "the token went over stdin"
    assert [body["tools"][0] for _, body in w.models.seen] == [
        json.loads(shown[n]["code"]) for n in ("openai_tool", "openai_responses_tool", "anthropic_tool")
    ]


def test_without_a_lent_token_every_form_that_can_reads_flightlog_token(
    world: tuple[World, Received],
) -> None:
    """Rendered with no token (27 forms: no links), run by a consumer whose FLIGHTLOG_TOKEN holds one:
    every form that can carry a token reads it there (wget and the JSON-RPC POST did not: 401), and
    reaches the upstream alike; the link and the webhook URL cannot, and are refused for want of one."""
    w, received = world
    holder = replace(w, env={**w.env, "FLIGHTLOG_TOKEN": w.token}, seen={})
    shown = contracts(w)
    assert len(shown) == 27 and list(shown) == [*ALWAYS_FORMS, "upstream"]
    assert "flt_" not in json.dumps(shown)

    replies, upstream = run_all(holder, shown, received)

    refused = {n for n, r in replies.items() if not r.get("ok")}
    assert refused == CANNOT_READ_THE_ENVIRONMENT, {n: replies[n] for n in refused}
    assert {replies[n]["refused"]["limit"] for n in refused} == {"token"}
    door = {(named(h), named(b)) for h, b in upstream[:-1]}
    assert len(door) == 1 and len(upstream) == len(shown) - len(refused) - 1
