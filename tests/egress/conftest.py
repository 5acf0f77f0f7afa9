"""Fixtures for the egress tests: no proxy or CA variables leak in from the machine."""

from __future__ import annotations

import pytest

from tests.capture.conftest import PROXY_VARS


@pytest.fixture(autouse=True)
def clean_client_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*PROXY_VARS, "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "NODE_USE_ENV_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
