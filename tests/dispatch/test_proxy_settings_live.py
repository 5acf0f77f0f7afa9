"""One settings value for the proxy: `mitmdump -s addons/mitmdump_entry.py` and `flightlog proxy`
given the same options serve and dispatch from the same Directory.

The defect this pins: with `--set flightlog_directory=DIR`, `/api/directory/search` found DIR's rows
while `/api/dispatch` answered "no tool named ... in the Directory", because the door read only the
environment. Both routes are now built from the settings `LocalRoutes.configure()` resolved.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from authority import tokens
from door.proxy_settings import resolve
from tests.dispatch.conftest import HOSTS_LINE, weather
from tests.support.proxy import live_proxy

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("FLIGHTLOG_")}
    return {**env, "FLIGHTLOG_HOME": str(home)}


@contextmanager
def mitmdump(home: Path, options: list[str]) -> Iterator[str]:
    """Plain `mitmdump -s addons/mitmdump_entry.py` with `options`; yields its proxy URL."""
    port = free_port()
    exe = Path(sys.executable).with_name("mitmdump")
    args = [str(exe), "-q", "-s", str(ROOT / "addons" / "mitmdump_entry.py"), "--listen-host", "127.0.0.1"]
    args += ["--listen-port", str(port), "--set", f"confdir={home / 'mitmproxy'}", *options]
    log = (home / "mitmdump.log").open("wb")
    proc = subprocess.Popen(args, env=clean_env(home), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert proc.poll() is None, (home / "mitmdump.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError("mitmdump did not listen within 30 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def search_and_dispatch(proxy: str, token: str) -> tuple[int, str, int, dict[str, object]]:
    """Search DIR's row, then dry-run a call to it, through the proxy."""
    with httpx.Client(proxy=proxy, trust_env=False, timeout=30) as client:
        found = client.get("http://flightlog.local/api/directory/search", params={"q": "weather"})
        dry = client.post(
            "http://flightlog.local/api/dispatch?dry_run=1",
            json={"tool": "weather", "args": {"city": "Bern"}},
            headers={"authorization": f"Bearer {token}"},
        )
    return found.status_code, found.text, dry.status_code, dry.json()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "dir"
    (d / "tool").mkdir(parents=True)
    (d / "tool" / "weather.md").write_text(weather("http://127.0.0.1:9").to_document())
    return d


def test_mitmdump_and_flightlog_proxy_dispatch_from_the_directory_option(
    tmp_path: Path, folder: Path
) -> None:
    """Under both launchers, `--set flightlog_directory=DIR` (no FLIGHTLOG_DIRECTORY) makes search
    find DIR's row and the door dispatch it (a dry run answers ok, not "no tool named")."""
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    blobs = (tmp_path / "blobs").as_uri()
    options = ["--set", f"flightlog_directory={folder}", "--set", f"flightlog_ledger={url}"]
    options += ["--set", f"flightlog_blobs={blobs}"]
    results = []
    home = tmp_path / "home-mitmdump"
    home.mkdir()
    (home / "secrets.env").write_text("WEATHER_KEY=k-123456\n" + HOSTS_LINE)
    token = tokens.mint(tokens.root_key(home), ["tools = weather"]).encode()
    with mitmdump(home, options) as proxy:
        results.append(search_and_dispatch(proxy, token))
    home = tmp_path / "home-flightlog"
    home.mkdir()
    (home / "secrets.env").write_text("WEATHER_KEY=k-123456\n" + HOSTS_LINE)
    token = tokens.mint(tokens.root_key(home), ["tools = weather"]).encode()
    env = {"FLIGHTLOG_DIRECTORY": ""}
    with live_proxy(home, url, env=env, args=options) as running:
        results.append(search_and_dispatch(running.url, token))
    for status, text, dry_status, reply in results:
        assert status == 200 and "weather" in text
        assert dry_status == 200 and reply["ok"] is True, reply


def test_options_win_over_the_environment_and_defaults_fill_the_rest(tmp_path: Path) -> None:
    """`resolve` takes an option over its environment variable, the environment over FLIGHTLOG_HOME's
    defaults, and FLIGHTLOG_HOME/secrets.env when no secrets file is named."""
    home = tmp_path / "h"
    home.mkdir()
    (home / "secrets.env").write_text("K=abcdef\n")
    env = {
        "FLIGHTLOG_HOME": str(home),
        "FLIGHTLOG_DIRECTORY": "/from/env",
        "FLIGHTLOG_LEDGER": "sqlite:///e.db",
    }
    opts = SimpleNamespace(flightlog_directory="/from/option", flightlog_ledger="", flightlog_open=False)
    got = resolve(opts, env)
    assert got.directory == Path("/from/option") and got.ledger_url == "sqlite:///e.db"
    assert got.secrets_file == home / "secrets.env" and got.open_mode is False
    assert resolve(SimpleNamespace(), {"FLIGHTLOG_HOME": str(home)}).blobs_url == (home / "blobs").as_uri()


def test_proxy_and_call_read_the_same_secrets_by_default(tmp_path: Path, folder: Path) -> None:
    """With no --secrets anywhere, FLIGHTLOG_HOME/secrets.env is what the proxy redacts from what it
    records and what both the proxy's door and `flightlog call` bind into calls."""
    from tests.dispatch.conftest import flightlog
    from tests.dispatch.upstreams import raw_upstream

    secret = "sk-default-secrets-9d8c7b"
    home = tmp_path / "home"
    home.mkdir()
    (home / "secrets.env").write_text(f"WEATHER_KEY={secret}\n" + HOSTS_LINE)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    env = {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": url, "FLIGHTLOG_BLOBS": (tmp_path / "b").as_uri()}
    with raw_upstream() as (base, received):
        (folder / "tool" / "weather.md").write_text(weather(base).to_document())
        env["FLIGHTLOG_DIRECTORY"] = str(folder)
        token = tokens.mint(tokens.root_key(home), ["tools = weather"]).encode()
        with (
            live_proxy(home, url, env=env) as running,
            httpx.Client(proxy=running.url, trust_env=False, timeout=30) as client,
        ):
            plain = client.get(f"{base}/echo", headers={"x-key": secret})
            door = client.post(
                "http://flightlog.local/api/dispatch",
                json={"tool": "weather", "args": {"city": "Bern"}},
                headers={"authorization": f"Bearer {token}"},
            )
        assert plain.status_code == 200 and door.status_code == 200 and door.json()["ok"], door.text
        called = flightlog(env, "call", "weather", "--args", '{"city": "Bern"}')
        assert called.returncode == 0, called.stdout + called.stderr
        assert all(secret.encode() in head for head, _ in received.requests[-2:])
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("ledger.db*"))
    assert stored and secret.encode() not in stored and b"[WEATHER_KEY]" in stored
