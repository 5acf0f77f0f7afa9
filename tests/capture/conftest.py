"""Fixtures for the capture tests: local upstreams, a clean client environment, a Ledger reader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.upstream import Upstream, upstream

PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")


@pytest.fixture(autouse=True)
def clean_client_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA variables leak in from the machine running the tests."""
    for name in (*PROXY_VARS, "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def http_upstream() -> Iterator[Upstream]:
    with upstream() as up:
        yield up


@pytest.fixture
def https_upstream(tmp_path: Path) -> Iterator[Upstream]:
    with upstream(tmp_path) as up:
        yield up
