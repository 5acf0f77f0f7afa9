"""`flightlog run [proxy options] -- COMMAND`: the proxy `run` starts takes the options `proxy` takes
(--secrets, --set, --upstream-ca, ...); a proxy already running keeps its own, and saying otherwise is
one clear line, not a silently ignored option."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.capture.ledger_view import ledger_of, wait_for
from tests.capture.test_cli_capture import flightlog
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

SECRET = "run-canary-31f7c9a2e0"


def test_run_passes_secrets_to_the_proxy_it_starts(
    home: Path, tmp_path: Path, http_upstream: Upstream
) -> None:
    """`run --secrets F -- CMD`: the child's request carries the secret, the Ledger holds [NAME]."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"RUN_KEY={SECRET}\n")
    script = (
        "import urllib.request; "
        f"r = urllib.request.Request('{http_upstream.base}/echo', data=b'k={SECRET}'); "
        "urllib.request.urlopen(r).read()"
    )
    result = flightlog(
        "run", "--session", "s-sec", "--secrets", str(secrets), "--", sys.executable, "-c", script
    )
    assert result.returncode == 0, result.stderr
    ledger = ledger_of(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    request = wait_for(ledger, "session = 's-sec' AND kind = 'http.request'", {}, 1)[0]
    assert ledger.payload(request.payload_sha256 or "") == b"k=[RUN_KEY]"
    assert "RUN_KEY" in request.redacted
    ledger.close()


def test_run_upstream_ca_trusts_a_private_upstream(
    home: Path, https_upstream: Upstream, tmp_path: Path
) -> None:
    """A private HTTPS upstream: 502 through the proxy by default, 200 with `--upstream-ca CERT`."""
    cert = tmp_path / "upstream-cert.pem"  # written by the https_upstream fixture
    script = (
        "import os, ssl, sys, urllib.request, urllib.error\n"
        "ctx = ssl.create_default_context(cafile=os.environ['SSL_CERT_FILE'])\n"
        "try:\n"
        f"    code = urllib.request.urlopen('{https_upstream.base}/fixed', context=ctx).status\n"
        "except urllib.error.HTTPError as e:\n"
        "    code = e.code\n"
        "sys.exit(0 if code == 200 else 10 + code % 100)\n"
    )
    refused = flightlog("run", "--", sys.executable, "-c", script)
    assert refused.returncode == 12, refused.stderr  # 502: the proxy does not trust the upstream
    trusted = flightlog("run", "--upstream-ca", str(cert), "--", sys.executable, "-c", script)
    assert trusted.returncode == 0, trusted.stderr


def test_proxy_options_with_a_running_proxy_are_refused(home: Path, tmp_path: Path) -> None:
    """A proxy already running for FLIGHTLOG_HOME has its options: `run --set ...` says so and exits 1."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}"):
        result = flightlog("run", "--set", "stream_large_bodies=1m", "--", "true")
    assert result.returncode == 1
    assert "a proxy is already running" in result.stderr
    assert "run without --set" in result.stderr


def test_a_missing_secrets_file_is_refused_before_any_proxy_starts(home: Path, tmp_path: Path) -> None:
    """`run --secrets NOPE`: one line naming the file, exit 1, no proxy left behind."""
    result = flightlog("run", "--secrets", str(tmp_path / "nope.env"), "--", "true")
    assert result.returncode == 1
    assert "--secrets" in result.stderr and "no such file" in result.stderr
    assert not (home / "proxy.json").exists()


def test_run_options_come_before_the_command(home: Path, tmp_path: Path) -> None:
    """Words after the command's name are the command's: `run echo hi --session zz` passes
    `--session zz` to echo, while `run --session s echo x` is run's own option."""
    with live_proxy(home, f"sqlite:///{tmp_path / 'ledger.db'}"):
        passed = flightlog("run", "echo", "hi", "--session", "zz")
        own = flightlog("run", "--session", "s-own", "echo", "x", "--help")
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout == "hi --session zz\n"
    assert own.returncode == 0 and own.stdout == "x --help\n", own.stderr


def test_the_machines_trust_store_is_trusted_for_upstreams(
    home: Path, https_upstream: Upstream, tmp_path: Path
) -> None:
    """A private HTTPS upstream whose CA is only in the machine's trust store (a test 'system'
    store named by SSL_CERT_FILE, as OpenSSL and the user's other tools read it): 200 through
    the proxy, with no --upstream-ca; the bundled list is still trusted beside it (in the bundle
    the proxy writes); without the CA in the store: 502."""
    import ssl

    import certifi
    import httpx

    cert = tmp_path / "upstream-cert.pem"  # written by the https_upstream fixture
    store = tmp_path / "system-store.pem"
    store.write_bytes(cert.read_bytes())
    url = f"{https_upstream.base}/fixed"
    for trusted, status in ((store, 200), (Path(certifi.where()), 502)):
        with live_proxy(
            home, f"sqlite:///{tmp_path / 'ledger.db'}", env={"SSL_CERT_FILE": str(trusted)}
        ) as p:
            verify = ssl.create_default_context(cafile=str(p.ca))
            got = httpx.get(url, proxy=p.url, verify=verify, trust_env=False, timeout=30).status_code
        assert got == status, trusted
    written = [f.read_text() for f in (home / "mitmproxy").glob("upstream-trust-*.pem")]
    ours = [text for text in written if cert.read_text().strip() in text]
    assert ours and ours[0].count("BEGIN CERTIFICATE") >= 100, (
        "the bundled list stays trusted beside the store"
    )
