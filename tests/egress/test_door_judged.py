"""The door's own upstream calls go before the proxy's egress judge: a row whose upstream the policy
refuses is refused at `/api/dispatch`, and nothing reaches that upstream.

A live `flightlog proxy` with a Directory of one tool row (its upstream a local server) and a policy
refusing the row's path on that host: the dispatch answers 403 naming limit `egress` and the rule,
the server's own log holds nothing, the Ledger holds the door's refusal. The same row, called on a
path the policy allows, reaches the server (the check refuses only what the policy refuses).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from authority import tokens
from storage.ledger import open_ledger
from tests.dispatch.conftest import HOSTS_LINE, weather
from tests.support.proxy import live_proxy
from tests.support.upstream import upstream

POLICY = """
[[rule]]
name = "no-weather"
action = "deny"
hosts = ["127.0.0.1"]
paths = ["/v1/weather*"]
"""


def test_the_door_refuses_an_upstream_the_policy_refuses(tmp_path: Path) -> None:
    (tmp_path / "egress.toml").write_text(POLICY)
    home = tmp_path / "home"
    home.mkdir()
    (home / "secrets.env").write_text("WEATHER_KEY=k-123456\n" + HOSTS_LINE)
    token = tokens.mint(tokens.root_key(home), ["tools = weather,forecast"]).encode()
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with upstream() as server:
        folder = tmp_path / "dir"
        (folder / "tool").mkdir(parents=True)
        (folder / "tool" / "weather.md").write_text(weather(f"http://127.0.0.1:{server.port}").to_document())
        allowed = (
            weather(f"http://127.0.0.1:{server.port}/ok").to_document().replace("weather", "forecast", 1)
        )
        (folder / "tool" / "forecast.md").write_text(allowed)
        args = ["--policy", str(tmp_path / "egress.toml"), "--set", f"flightlog_directory={folder}"]
        with live_proxy(home, ledger_url, args=args) as proxy, httpx.Client(proxy=proxy.url, timeout=30) as c:
            auth = {"authorization": f"Bearer {token}"}
            refused = c.post(
                "http://flightlog.local/api/dispatch",
                json={"tool": "weather", "args": {"city": "Bern"}},
                headers=auth,
            )
            passed = c.post(
                "http://flightlog.local/api/dispatch",
                json={"tool": "forecast", "args": {"city": "Bern"}},
                headers=auth,
            )
            ledger = open_ledger(ledger_url, proxy.blobs_url)
        assert refused.status_code == 403, refused.text
        reply = refused.json()["refused"]
        assert reply["limit"] == "egress" and reply["rule"] == "no-weather", reply
        assert "POST 127.0.0.1/v1/weather" in reply["target"]
        assert passed.status_code == 200, passed.text
        assert [p.split("?")[0] for _, p, _, _ in server.received] == ["/ok/v1/weather"]
    try:
        with ledger.engine.connect() as conn:
            from sqlalchemy import text

            errors = [r.error for r in conn.execute(text("SELECT error FROM events WHERE error IS NOT NULL"))]
    finally:
        ledger.close()
    assert any(
        e.startswith("egress: refused by flightlog's egress policy rule no-weather") for e in errors
    ), errors
