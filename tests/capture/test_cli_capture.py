"""`flightlog run`, `flightlog env` and `flightlog proxy`'s failures, as a user runs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.ports import free_block
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream


def flightlog(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ,
    )


def test_run_starts_a_proxy_sets_variables_and_returns_the_commands_exit_code(
    home: Path, http_upstream: Upstream
) -> None:
    """No proxy running: `run` starts one, the child goes through it with its identity, exit code kept."""
    script = (
        "import os, sys, urllib.request; "
        f"urllib.request.urlopen('{http_upstream.base}/echo').read(); "
        "names = ['HTTP_PROXY','https_proxy','SSL_CERT_FILE','REQUESTS_CA_BUNDLE','CURL_CA_BUNDLE',"
        "'NODE_EXTRA_CA_CERTS','OPENAI_BASE_URL','ANTHROPIC_BASE_URL']; "
        "missing = [n for n in names if not os.environ.get(n)]; "
        "sys.exit(7 if not missing else 3)"
    )
    result = flightlog(
        "run", "--agent", "cli-agent", "--session", "s-run", "--", sys.executable, "-c", script
    )
    assert result.returncode == 7, result.stderr
    assert not (home / "proxy.json").exists(), "the proxy run started is stopped afterwards"
    ledger = ledger_of(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    events = wait_for(ledger, "session = 's-run'", {}, 2)
    assert [e.agent for e in events] == ["cli-agent", "cli-agent"]
    ledger.close()


def test_run_uses_the_running_proxy_and_env_prints_exports(
    home: Path, tmp_path: Path, http_upstream: Upstream
) -> None:
    """With a proxy running for FLIGHTLOG_HOME, `run` and `env` point at it."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}") as proxy:
        exports = flightlog("env", "--agent", "a1")
        assert exports.returncode == 0
        assert f"export HTTPS_PROXY=http://agent=a1:flightlog@127.0.0.1:{proxy.port}" in exports.stdout
        assert f"export SSL_CERT_FILE={proxy.ca}" in exports.stdout
        assert "export FLIGHTLOG_TOKEN=flt_" in exports.stdout
        result = flightlog(
            "run", "--task", "t-1", "--", "curl", "-s", "-o", "/dev/null", f"{http_upstream.base}/fixed"
        )
        assert result.returncode == 0, result.stderr
        ledger = ledger_of(proxy.ledger_url, proxy.blobs_url)
        assert len(wait_for(ledger, "task = 't-1'", {}, 2)) == 2
        ledger.close()


def test_bad_input_is_one_line_and_nonzero(home: Path, tmp_path: Path) -> None:
    """A bad --listen, a missing secrets file, or `run` without a command: one clear line, exit 1."""
    for args in (
        ["proxy", "--listen", "nonsense"],
        ["proxy", "--listen", "127.0.0.1:0", "--secrets", str(tmp_path / "missing.env")],
        ["run"],
    ):
        result = flightlog(*args)
        assert result.returncode != 0, args
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("flightlog") and "Traceback" not in result.stderr, result.stderr


def test_a_port_in_use_is_one_line(home: Path) -> None:
    """A taken forward port is one `flightlog:` line naming who holds it (this test's process), and exit 1."""
    import socket

    with socket.socket() as taken:
        port = free_block()  # its neighbours free: the refusal is the forward port's, not P+1's
        taken.bind(("127.0.0.1", port))
        taken.listen()
        result = flightlog("proxy", "--listen", f"127.0.0.1:{port}", timeout=60)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"flightlog: port {port} (--listen) is taken by pid {os.getpid()} "), lines[0]


def test_addons_load_in_plain_mitmdump(home: Path, tmp_path: Path, http_upstream: Upstream) -> None:
    """`mitmdump -s addons/mitmdump_entry.py` records with the same addons, options set with --set."""
    import shutil
    import signal
    import socket
    import time

    import httpx

    import addons.mitmdump_entry as entry

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "ledger.db"
    mitmdump = shutil.which("mitmdump", path=str(Path(sys.executable).parent))
    assert mitmdump is not None
    proc = subprocess.Popen(
        [mitmdump, "-q", "-s", entry.__file__, "--listen-port", str(port),
         "--set", f"confdir={home / 'mitm'}", "--set", f"flightlog_ledger=sqlite:///{db}"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                r = httpx.get(f"{http_upstream.base}/fixed", proxy=f"http://127.0.0.1:{port}", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, (
                    proc.stdout.read() if proc.stdout else ""
                )
                time.sleep(0.1)
        assert r.status_code == 200
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    ledger = ledger_of(f"sqlite:///{db}", (tmp_path / "blobs").as_uri())
    assert [e.kind for e in wait_for(ledger, "1 = 1", {}, 2)] == ["http.request", "http.response"]
    ledger.close()
