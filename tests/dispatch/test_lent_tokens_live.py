"""Closed, yet usable: the paths a user takes get a scoped token by themselves, never more than the
operator's policy grants; and the operator's explicit switches say so.

- `flightlog run` lends its child FLIGHTLOG_TOKEN from the policy: the child's curl calls a Directory
  read row through the door, but not a Ledger row (no `ledger` right) nor a row that runs a command;
- `flightlog proxy --allow-local-commands` runs a command row only for a token naming it;
- `flightlog proxy --open` says so on its start line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from authority import tokens
from tests.dispatch.conftest import flightlog
from tests.dispatch.test_attacks_live import shell_row
from tests.support.proxy import live_proxy

DOOR = "http://flightlog.local/api/dispatch"
CHILD = """
import json, os, httpx
token = os.environ["FLIGHTLOG_TOKEN"]
out = {}
for tool in ("DIRECTORY_SNAPSHOT", "LEDGER_COUNTS"):
    r = httpx.post(%r, json={"tool": tool, "args": {}}, headers={"authorization": "Bearer " + token})
    out[tool] = [r.status_code, r.json().get("refused", {}).get("limit")]
print(json.dumps({"token": token, "answers": out}))
"""


def test_run_lends_its_child_a_policy_token(tmp_path: Path) -> None:
    """The child of `flightlog run` holds a token granting `call` over the rows that run nothing here
    (each contract bound, filed under the run's task): a Directory read row runs, a Ledger row is
    refused by `grants`."""
    home = tmp_path / "home"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    env = {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": url, "FLIGHTLOG_BLOBS": (tmp_path / "b").as_uri()}
    with live_proxy(home, url):
        done = flightlog(env, "run", "--task", "T7", "--", sys.executable, "-c", CHILD % DOOR)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["answers"] == {"DIRECTORY_SNAPSHOT": [200, None], "LEDGER_COUNTS": [403, "grants"]}
    limits = tokens.decode(seen["token"]).limits()
    assert limits.grants == frozenset({"call"}) and limits.task == frozenset({"T7"})
    assert limits.tools is not None and "DIRECTORY_SNAPSHOT" in limits.tools and limits.contracts
    assert limits.expires is not None


def test_local_commands_run_only_when_enabled_and_named(tmp_path: Path) -> None:
    """With --allow-local-commands a token naming the command row runs it (the marker appears);
    a token for every tool that does not name it is refused with `local_command`, and the start
    line says local commands are on."""
    home, folder, marker = tmp_path / "home", tmp_path / "dir", tmp_path / "ran.txt"
    (folder / "tool").mkdir(parents=True)
    (folder / "tool" / "local_touch.md").write_text(shell_row("local_touch", marker))
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    args = ["--allow-local-commands", "--set", f"flightlog_directory={folder}"]
    with live_proxy(home, url, args=args) as proxy:
        root = tokens.root_key(home)
        broad = tokens.mint(root, ["grants = call"]).encode()
        call = {"tool": "local_touch", "args": {}}
        with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as client:
            refused = client.post(DOOR, json=call, headers={"authorization": f"Bearer {broad}"})
            assert refused.status_code == 403 and refused.json()["refused"]["limit"] == "local_command"
            assert not marker.exists()
            named = tokens.mint(root, ["tools = local_touch"]).encode()
            ran = client.post(DOOR, json=call, headers={"authorization": f"Bearer {named}"})
        assert ran.status_code == 200 and ran.json()["ok"], ran.text
        assert marker.exists()
        log = proxy.log()
    assert "local commands enabled" in log


def test_open_mode_says_so_and_still_guards_the_ledger(tmp_path: Path) -> None:
    """`--open` lets a call through without a token and says OPEN MODE on the start line; the
    Ledger's routes still need their token."""
    home = tmp_path / "home"
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with live_proxy(home, url, args=["--open"]) as proxy:
        with httpx.Client(proxy=proxy.url, trust_env=False, timeout=30) as client:
            snap = client.post(DOOR, json={"tool": "DIRECTORY_SNAPSHOT", "args": {}})
            ledger = client.get("http://flightlog.local/api/ledger/counts")
        log = proxy.log()
    assert snap.status_code == 200 and snap.json()["ok"], snap.text
    assert ledger.status_code == 401
    assert "OPEN MODE" in log
