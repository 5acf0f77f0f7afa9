"""`LocalRoutes.configure()` resolves one settings value from mitmproxy's options (in-process, with
mitmproxy's own test helpers), and the authority checks answer before any handler runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mitmproxy.test import taddons

from addons.local_routes import LocalRoutes


def test_configure_resolves_the_options_into_one_settings_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An option wins over FLIGHTLOG_DIRECTORY; `flightlog_open` and `flightlog_local_commands` reach
    the settings the door is built from; the routes are rebuilt when an option changes."""
    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FLIGHTLOG_DIRECTORY", "/from/env")
    routes = LocalRoutes()
    with taddons.context(routes) as tctx:
        tctx.options.update(flightlog_directory=str(tmp_path / "dir"))
        assert routes.settings is not None and routes.settings.directory == tmp_path / "dir"
        assert routes.settings.open_mode is False and routes.settings.local_commands is False
        first = routes.routes
        tctx.options.update(flightlog_open=True, flightlog_local_commands=True)
        assert routes.settings.open_mode and routes.settings.local_commands
        assert routes.routes is not first


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "limit"),
    [
        ("GET", "/api/ledger/counts", {}, b"", "token"),
        ("GET", "/api/dispatch/uses/x", {"authorization": "Bearer hello"}, b"", "token"),
        ("POST", "/api/directory/write", {"content-type": "application/json"}, b"{}", "token"),
        ("GET", "/api/directory/search?q=x", {"origin": "http://evil.example"}, b"", "origin"),
        ("GET", "/api/directory/manifest", {"host": "evil.example"}, b"", "host"),
        ("POST", "/api/directory/write", {"content-type": "text/plain"}, b"{}", "content_type"),
    ],
)
def test_refused_before_any_handler_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
    limit: str,
) -> None:
    """Each refusal names its limit; the browser-shaped ones need no database at all."""
    monkeypatch.setenv("FLIGHTLOG_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FLIGHTLOG_LEDGER", f"sqlite:///{tmp_path / 'l.db'}")
    routes = LocalRoutes()
    with taddons.context(routes) as tctx:
        tctx.configure(routes)
        status, _, answer = routes.answer(method, path.partition("?")[0], {}, headers, body)
    assert status in (401, 403) and json.loads(answer)["refused"]["limit"] == limit
