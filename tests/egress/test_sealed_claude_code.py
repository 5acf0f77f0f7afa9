"""A coding agent under `flightlog run --sealed`: Claude Code (npm `@anthropic-ai/claude-code`,
pinned) against a local fake Anthropic server, with a policy that allows its API and denies the
public API host it also tries. It does its work; its model call is recorded with model and tokens
under the run's agent; every attempt at the denied host is refused and recorded naming the rule. It
holds a placeholder for its key (lent by `run`): the fake API receives the real key, swapped in at
the boundary (`egress.credential_swap`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy import text

from flightlog.sealed import why_not
from storage.ledger import open_ledger
from tests.capture.test_node_clients import _npm_install
from tests.egress.netns_hosts import network_host
from tests.egress.sealed_support import nobody_folder
from tests.support.upstream import upstream

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"
REAL_KEY = "sk-ant-api03-CLAUDEcodeREALkey0123456789abcdefghijklmnop"


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `claude` command, installed with npm into the test session's temporary folder."""
    modules = _npm_install(tmp_path_factory.mktemp("npm-claude-code"), CLAUDE_CODE)
    return modules / ".bin" / "claude"


@pytest.fixture
def world() -> Iterator[Path]:
    """Claude Code's home and working directory, where the sandbox's user (nobody) may write."""
    with nobody_folder("h48-claude-") as folder:
        yield folder


@pytest.mark.skipif(why_not() is not None, reason="sealing needs root here (test_sealed tests the refusal)")
def test_claude_code_sealed_works_through_its_api_and_is_refused_elsewhere(
    claude: Path, tmp_path: Path, world: Path
) -> None:
    """Claude Code, sealed as root (so run as nobody, in `world`: its home and working directory),
    answers its prompt through the fake API on a test host; the Ledger holds that call (model,
    tokens, agent, and a cost equal to the one Claude Code reports) and the refusals of its attempts
    at api.anthropic.com, naming the rule."""
    with network_host() as host, ExitStack() as stack:
        address = host.address
        with host.inside():
            api = stack.enter_context(upstream(host=address))
        policy = tmp_path / "egress.toml"
        policy.write_text(
            'default = "deny"\n'
            f'[[rule]]\nname = "its-api"\naction = "allow"\nhosts = ["{address}:{api.port}"]\n'
            '[[rule]]\nname = "no-public-api"\naction = "deny"\nhosts = ["api.anthropic.com"]\n'
        )
        secrets = tmp_path / "secrets.env"
        secrets.write_text(f"ANTHROPIC_API_KEY={REAL_KEY}\nANTHROPIC_API_KEY.hosts={address}:{api.port}\n")
        home, ledger_url = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        env |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "HOME": str(world)}
        command = [
            sys.executable, "-m", "flightlog", "run", "--sealed", "--agent", "claude-code",
            "--read", str(claude.parent.parent),  # installed where nobody cannot walk: named, bound in
            "--policy", str(policy), "--ai-upstream", f"anthropic=http://{address}:{api.port}",
            "--secrets", str(secrets),
            "--", str(claude), "-p", "say hi", "--output-format", "json",
        ]  # fmt: skip
        done = subprocess.run(command, env=env, cwd=world, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["result"] == "Hello!" and answer["is_error"] is False
    calls = [head for m, p, head, _ in api.received if m == "POST" and p.startswith("/v1/messages")]
    assert calls and all(REAL_KEY.encode() in head for head in calls)  # swapped in on the way out

    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT kind, host, url, agent, model, tokens_in, tokens_out, cost_usd, error FROM events"
                )
            ).all()
    finally:
        ledger.close()
    (call,) = [r for r in rows if r.kind == "http.response" and "/v1/messages" in r.url]
    assert (call.agent, call.host, call.tokens_in, call.tokens_out) == ("claude-code", address, 9, 4)
    assert call.model
    reported = answer["total_cost_usd"]
    print(f"\nClaude Code sealed: model {call.model}, cost it reports {reported}, recorded {call.cost_usd}")
    assert call.cost_usd == pytest.approx(reported)
    refusals = [r for r in rows if r.kind == "policy.refused"]
    assert refusals, rows
    assert {(r.host, r.agent) for r in refusals} == {("api.anthropic.com", "claude-code")}
    assert all(r.error.startswith("no-public-api: deny hosts=api.anthropic.com") for r in refusals)
    swapped = [r for r in rows if r.kind == "credential.swapped"]
    assert swapped and {(r.host, r.agent) for r in swapped} == {(address, "claude-code")}
    assert all(REAL_KEY not in repr(r) for r in rows)
