"""Lending under `run --sealed`: the sealed command holds a placeholder, its secrets file is out of its
world, and the openai SDK inside still authenticates at a host (on a test network namespace) that
accepts only the real key, which the proxy outside put in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from flightlog.sealed import why_not
from tests.egress.lending_hosts import key_host
from tests.egress.netns_hosts import network_host
from tests.egress.sealed_support import nobody_folder, python_reads

REAL = "sk-proj-SEALEDrealKEY0123456789abcdefghijklmnopqrstuvwxyz"
CHILD = """
import json, os, pathlib
proc = pathlib.Path("/proc/self/environ").read_bytes().decode(errors="replace")
out = {"env": dict(os.environ), "proc": proc}
try:
    out["secrets"] = pathlib.Path("secrets.env").read_text()
except OSError as e:
    out["secrets"] = "unreadable: " + type(e).__name__
out["netrc"] = pathlib.Path(os.environ["NETRC"]).read_text()
import openai
ask = [{"role": "user", "content": "hi"}]
chat = openai.OpenAI().chat.completions.create(model="gpt-4o-mini", messages=ask)
out["answer"] = chat.choices[0].message.content
print(json.dumps(out))
"""


@pytest.mark.skipif(why_not() is not None, reason="sealing needs root here (test_sealed tests the refusal)")
def test_a_sealed_command_holds_a_placeholder_and_its_call_authenticates(tmp_path: Path) -> None:
    """Sealed (as nobody): OPENAI_API_KEY and the lent netrc hold a placeholder shaped like the key,
    no real value is in its environment or /proc/self/environ, the secrets file beside it (readable by
    anyone outside) cannot be read inside, and the SDK's call is answered by a host that refuses any
    key but the real one."""
    with network_host() as host, ExitStack() as stack, nobody_folder("h54-lend-") as world:
        with host.inside():
            api = stack.enter_context(key_host("openai", REAL, address=host.address))
        secrets = world / "secrets.env"
        secrets.write_text(f"OPENAI_API_KEY={REAL}\nOPENAI_API_KEY.hosts={host.address}:{api.port}\n")
        secrets.chmod(0o644)
        (world / "child.py").write_text(CHILD)
        home, ledger_url = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        bin_dir = str(Path(sys.executable).parent)
        env |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "HOME": str(world),
                "PATH": f"{bin_dir}:{env['PATH']}", "OPENAI_API_KEY": REAL}  # fmt: skip
        command = [
            sys.executable, "-m", "flightlog", "run", "--sealed", *python_reads(),
            "--secrets", str(secrets), "--ai-upstream", f"openai=http://{host.address}:{api.port}",
            "--", "python", "child.py",
        ]  # fmt: skip
        done = subprocess.run(command, env=env, cwd=world, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert api.saw(REAL)
    assert seen["answer"] == "hello from openai"
    assert seen["secrets"].startswith("unreadable: ")
    placeholder = seen["env"]["OPENAI_API_KEY"]
    assert (
        placeholder.startswith("sk-proj-") and len(placeholder) == len(REAL) and placeholder in seen["netrc"]
    )
    assert REAL not in json.dumps(seen)
