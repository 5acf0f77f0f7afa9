"""Credentials the agent never holds: `flightlog run` lends placeholders, the proxy swaps them at the
boundary for their hosts only (`egress.credential_swap`), with real clients against hosts that check
the real key.

One run (its own proxy, started by `flightlog run`) carries every client and every attempt; its
command reports what it saw and got, the tests read that, the test hosts' logs and the Ledger:

- the openai and anthropic SDKs (model API listeners, `OPENAI_BASE_URL` style), curl with a bearer
  and requests with a netrc (forward proxy, HTTPS), `git clone` over HTTPS with basic auth from a
  credential helper: each succeeds against a host that accepts only the real key;
- the command's environment, `/proc/self/environ` and its lent files hold placeholders, no real value;
- exfiltration attempts (the placeholder to another host, in a URL, a body, a header of another name,
  split across two requests, base64-encoded, in a body to its own host) are refused with the rule
  `credential` and recorded by the secret's name; the real values reach no host but their own.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of
from tests.egress.lending_hosts import KeyHost, bare_repo, key_host
from tests.support.upstream import self_signed

REAL = {
    "OPENAI_API_KEY": "sk-proj-REALopenaiKEYvalue0123456789abcdefghijklmnop",
    "ANTHROPIC_API_KEY": "sk-ant-api03-REALanthropicKEYvalue0123456789abcdefgh",
    "GITHUB_TOKEN": "ghp_REALgithubTOKENvalue0123456789abcdefgh",
}
ATTEMPTS = ("other host", "in a URL", "in a body", "another header", "split 1", "split 2", "base64 body",
            "its host named, another reached", "body to its own host")  # fmt: skip

CHILD = Path(__file__).with_name("lending_child.py")


@dataclass
class Lent:
    run: dict[str, Any]
    code: str
    hosts: dict[str, KeyHost]
    ledger: Ledger
    home: Path
    ledger_url: str
    blobs_url: str


@pytest.fixture(scope="module")
def lent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lent]:
    root = tmp_path_factory.mktemp("lending")
    tls = self_signed(root)
    repo = bare_repo(root / "git")
    with (
        key_host("openai", REAL["OPENAI_API_KEY"]) as oa,
        key_host("anthropic", REAL["ANTHROPIC_API_KEY"]) as an,
        key_host("code", REAL["GITHUB_TOKEN"], repo=repo, tls=tls) as code,
        key_host("sink", "") as sink,
    ):
        secrets = root / "secrets.env"
        secrets.write_text(
            "".join(f"{n}={v}\n" for n, v in REAL.items())
            + f"OPENAI_API_KEY.hosts=127.0.0.1:{oa.port}\nANTHROPIC_API_KEY.hosts=127.0.0.1:{an.port}\n"
            + f"GITHUB_TOKEN.hosts=127.0.0.1:{code.port}\n"
        )
        home, ledger_url = root / "home", f"sqlite:///{root / 'ledger.db'}"
        blobs = (root / "blobs").as_uri()
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env = {k: v for k, v in env.items() if not k.startswith("FLIGHTLOG_")}
        env |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "FLIGHTLOG_BLOBS": blobs}
        env["OPENAI_API_KEY"] = REAL["OPENAI_API_KEY"]  # the operator's shell exported the real key
        script = CHILD
        base = f"https://127.0.0.1:{code.port}"
        done = subprocess.run(
            [sys.executable, "-m", "flightlog", "run", "--secrets", str(secrets),
             "--ai-upstream", f"openai=http://127.0.0.1:{oa.port}",
             "--ai-upstream", f"anthropic=http://127.0.0.1:{an.port}",
             "--upstream-ca", str(tls[0]), "--agent", "lender",
             "--", sys.executable, str(script), base, f"http://127.0.0.1:{sink.port}",
             f"http://127.0.0.1:{oa.port}"],
            capture_output=True, text=True, timeout=180, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + repr(an.log)
        run = json.loads(done.stdout.strip().splitlines()[-1])
        ledger = ledger_of(ledger_url, blobs)
        try:
            hosts = {"openai": oa, "anthropic": an, "code": code, "sink": sink}
            yield Lent(run, base, hosts, ledger, home, ledger_url, blobs)
        finally:
            ledger.engine.dispose()


@pytest.mark.parametrize("client", ["openai", "anthropic"])
def test_sdks_succeed_with_placeholders(lent: Lent, client: str) -> None:
    """The SDK's call reaches its host through the model API listener with the real key swapped in:
    the host, which refuses any other key, answered."""
    assert lent.run[client] == f"hello from {client}"


def test_curl_requests_and_git_succeed_with_placeholders(lent: Lent) -> None:
    """curl with a bearer, requests with the lent netrc, git clone with the lent credential helper:
    each authenticated at the code host with the real token it never held."""
    assert lent.run["curl"].endswith(" 200") and "octo" in lent.run["curl"], lent.run["curl"]
    assert lent.run["requests_netrc"] == 200
    code, stderr, readme = lent.run["git"]
    assert code == 0 and readme == "lent, not given\n", stderr


def test_the_command_holds_no_real_value(lent: Lent) -> None:
    """Its environment (also what the operator's shell exported), /proc/self/environ and its lent
    files hold placeholders shaped like the keys, never a real value."""
    env, proc, files = lent.run["env"], lent.run["proc_environ"], lent.run["files"]
    for value in REAL.values():
        assert value not in json.dumps(env) and value not in proc and value not in json.dumps(files)
    assert env["OPENAI_API_KEY"].startswith("sk-proj-") and len(env["OPENAI_API_KEY"]) == len(
        REAL["OPENAI_API_KEY"]
    )
    assert env["ANTHROPIC_API_KEY"].startswith("sk-ant-api03-")
    assert env["GH_TOKEN"] == env["GITHUB_TOKEN"] and env["GH_TOKEN"].startswith("ghp_")
    assert env["GH_TOKEN"] in files["NETRC"] and env["GH_TOKEN"] in files["git-credentials"]


@pytest.mark.parametrize("attempt", ATTEMPTS)
def test_exfiltration_is_refused(lent: Lent, attempt: str) -> None:
    """Each attempt to carry the placeholder where it may not go is answered 403 under `credential`."""
    assert lent.run["attempts"][attempt] == [403, "credential"]


def test_refusals_and_swaps_are_recorded_by_name(lent: Lent) -> None:
    """Every refusal is a `policy.refused` event naming the secret, and each exchange that was
    swapped a `credential.swapped` event naming its secret; no event holds a real value."""
    refused = events_where(lent.ledger, "kind = 'policy.refused'", {})
    assert len(refused) == len(ATTEMPTS)
    assert all(
        e.error and e.error.startswith("credential: the placeholder lent for OPENAI_API_KEY") for e in refused
    )
    swapped = events_where(lent.ledger, "kind = 'credential.swapped'", {})
    names = sorted(n for e in swapped for n in e.redacted)
    assert names.count("OPENAI_API_KEY") >= 1 and names.count("ANTHROPIC_API_KEY") >= 1
    assert names.count("GITHUB_TOKEN") >= 3  # curl, requests, git (each request that carried it)
    everything = events_where(lent.ledger, "1 = 1", {})
    for event in everything:
        body = lent.ledger.payload(event.payload_sha256) if event.payload_sha256 else b""
        text = repr(event) + body.decode("latin-1")
        for value in REAL.values():
            assert value not in text, event.kind


def test_real_values_reach_only_their_own_host(lent: Lent) -> None:
    """The hosts' logs: each real value was received by its own host, and by no other; the sink got
    nothing at all (every attempt was refused before it left)."""
    for name, host in (
        ("OPENAI_API_KEY", "openai"),
        ("ANTHROPIC_API_KEY", "anthropic"),
        ("GITHUB_TOKEN", "code"),
    ):
        assert lent.hosts[host].saw(REAL[name]) or lent.hosts[host].saw(_basic_of(REAL[name]))
        for other, keeper in lent.hosts.items():
            if other != host:
                assert not keeper.saw(REAL[name]), (name, other)
    assert lent.hosts["sink"].log == []


def _basic_of(value: str) -> str:
    import base64

    return base64.b64encode(f"x-access-token:{value}".encode()).decode()


@pytest.mark.parametrize("form", ["har", "jsonl", "mitmproxy"])
def test_exports_hold_no_real_value(lent: Lent, form: str, tmp_path: Path) -> None:
    """Every export of the run (HAR, JSON lines, a mitmproxy flow file) holds none of the real values;
    the placeholders the attempts carried stay visible there (worthless, and what was tried)."""
    out = tmp_path / f"export.{form}"
    env = {**os.environ, "FLIGHTLOG_HOME": str(lent.home)}
    env |= {"FLIGHTLOG_LEDGER": lent.ledger_url, "FLIGHTLOG_BLOBS": lent.blobs_url}
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "export", "--format", form, "-o", str(out)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert b"credential" in data or form == "mitmproxy"
    for value in REAL.values():
        assert value.encode() not in data and base64.b64encode(value.encode()) not in data
    assert lent.run["env"]["OPENAI_API_KEY"].encode() in data
