"""A secret added to the secrets file while the proxy runs is redacted from the next request on; a
secrets file turned malformed keeps the last good secrets (the proxy goes on recording)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.capture.ledger_view import ledger_of, wait_for
from tests.support.proxy import live_proxy
from tests.support.upstream import Upstream

OLD = "old-canary-8d1f20a7c3"
NEW = "new-canary-5b9e61c2d4"


def _send(proxy_url: str, upstream: Upstream, marker: str, secret: str) -> None:
    with httpx.Client(proxy=proxy_url, trust_env=False, timeout=10) as client:
        answer = client.post(f"{upstream.base}/echo?m={marker}", content=f"token={secret}".encode())
    assert answer.status_code == 200


def _wait_for_reload(seconds: float = 1.5) -> None:
    time.sleep(seconds)  # the proxy looks once a second (processing_watch.INTERVAL), and a margin


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_rotated_secret_is_redacted_without_a_restart(
    home: Path, tmp_path: Path, http_upstream: Upstream, workers: str
) -> None:
    """NEW is not a secret at first (recorded as sent); once written into the secrets file it is
    replaced by [NEW_KEY] in the next request's body, and OLD stays redacted throughout. A lone
    proxy looks at the file itself; with 2 workers the supervisor looks and nudges both (each
    request a new connection, which either worker may take)."""
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"OLD_KEY={OLD}\n")
    db = tmp_path / "ledger.db"
    with live_proxy(home, f"sqlite:///{db}", args=["--secrets", str(secrets), "--workers", workers]) as proxy:
        _send(proxy.url, http_upstream, "before", NEW)
        secrets.write_text(f"OLD_KEY={OLD}\nNEW_KEY={NEW}\n")
        _wait_for_reload()
        _send(proxy.url, http_upstream, "after", NEW)
        _send(proxy.url, http_upstream, "old", OLD)
        secrets.write_text("this line is not NAME=value\n")
        _wait_for_reload()
        _send(proxy.url, http_upstream, "broken", NEW)
        ledger = ledger_of(f"sqlite:///{db}", proxy.blobs_url)
        requests = wait_for(ledger, "kind = 'http.request'", {}, 4)
    bodies = {r.url.rsplit("=", 1)[-1]: ledger.payload(r.payload_sha256 or "") for r in requests if r.url}
    assert bodies["before"] == f"token={NEW}".encode()
    assert bodies["after"] == b"token=[NEW_KEY]"
    assert bodies["old"] == b"token=[OLD_KEY]"
    assert bodies["broken"] == b"token=[NEW_KEY]"
    assert "kept the last good secrets" in proxy.log()
    ledger.close()
