"""Every area's routes answered by a real proxy for flightlog.local, as an agent's client sees them.

Each area tests its handler directly; this checks the wiring through mitmproxy's route registry
(query strings as parsed there, headers, bodies) and that none of it is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from authority import tokens
from storage.ledger import open_ledger
from tests.storage.factory import batch, event
from tests.support.proxy import LiveProxy, live_proxy


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveProxy, str]]:
    home = tmp_path_factory.mktemp("home")
    url = f"sqlite:///{home / 'ledger.db'}"
    seeded = open_ledger(url, (home / "blobs").as_uri())
    seeded.append(batch([event(0, payload=b'{"q": 1}'), event(1, status=500, payload=b"boom")]))
    seeded.close()
    with live_proxy(home, url) as running:
        token = (home / "api-token").read_text().strip() if (home / "api-token").exists() else ""
        yield running, token


def get(proxy: LiveProxy, path: str, **kwargs: object) -> httpx.Response:
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=20) as client:
        return client.get(f"http://flightlog.local{path}", **kwargs)  # type: ignore[arg-type]


def token_of(proxy: LiveProxy) -> str:
    anonymous = get(proxy, "/api/ledger/counts?by=kind")
    assert anonymous.status_code == 401, "the Ledger's routes need the bearer token"
    return (proxy.home / "api-token").read_text().strip()


def test_ledger_routes_take_query_strings_through_the_proxy(proxy: tuple[LiveProxy, str]) -> None:
    """counts?by=kind and ask?q=... work through the registry (one value per field)."""
    running, _ = proxy
    auth = {"Authorization": f"Bearer {token_of(running)}"}
    counts = get(running, "/api/ledger/counts?by=kind", headers=auth)
    assert counts.status_code == 200, counts.text
    keys = {g["key"] for g in counts.json()["groups"]}
    assert {"http.request", "http.response"} <= keys
    asked = get(running, "/api/ledger/ask?q=errors", headers=auth)
    assert asked.status_code == 200, asked.text
    found = asked.json()["events"]
    assert [e["event_id"] for e in found if e["kind"] != "dispatch.refused"] == ["ev-000001"]
    # the anonymous attempt above (token_of) is itself an event naming its limit
    assert any(e["kind"] == "dispatch.refused" and e["error"].startswith("token: ") for e in found)


def test_blob_route_gives_the_exact_bytes(proxy: tuple[LiveProxy, str]) -> None:
    """The raw payload through the proxy, byte for byte."""
    running, _ = proxy
    auth = {"Authorization": f"Bearer {token_of(running)}"}
    row = get(running, "/api/ledger/row/ev-000001", headers=auth).json()
    blob = get(running, f"/api/ledger/blob/{row['payload_sha256']}", headers=auth)
    assert blob.content == b"boom"


def ledger_tool_token(proxy: LiveProxy) -> dict[str, str]:
    """A scoped token for the starter row ledger_row: a Ledger tool needs the right to read the Ledger."""
    made = tokens.mint(tokens.root_key(proxy.home), ["grants = call,ledger", "tools = ledger_row"])
    return {"Authorization": f"Bearer {made.encode()}"}


def test_directory_and_dispatch_routes_answer(proxy: tuple[LiveProxy, str]) -> None:
    """The Directory's search and the door's dry run are served for flightlog.local."""
    running, _ = proxy
    found = get(running, "/api/directory/search?q=ledger+row")
    assert found.status_code == 200 and "ledger_row" in found.text.lower()
    with httpx.Client(proxy=running.url, trust_env=False, timeout=20) as client:
        dry = client.post(
            "http://flightlog.local/api/dispatch?dry_run=1",
            json={"tool": "ledger_row", "args": {"event_id": "ev-000001"}},
            headers=ledger_tool_token(running),
        )
    assert dry.status_code == 200, dry.text
    assert json.loads(dry.text)["ok"] is True


def test_a_starter_tool_can_be_called_out_of_the_box(proxy: tuple[LiveProxy, str]) -> None:
    """The door calls flightlog's own routes in-process, binding its own Ledger token itself (for a
    caller whose token grants reading the Ledger)."""
    running, _ = proxy
    with httpx.Client(proxy=running.url, trust_env=False, timeout=20) as client:
        answer = client.post(
            "http://flightlog.local/api/dispatch",
            json={"tool": "ledger_row", "args": {"event_id": "ev-000001"}},
            headers=ledger_tool_token(running),
        )
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["ok"] is True, reply
    assert "ev-000001" in json.dumps(reply["result"])
    token = (running.home / "api-token").read_text().strip()
    assert token not in answer.text, "the reply never carries the token the door filled in"


def test_own_routes_are_never_recorded(proxy: tuple[LiveProxy, str], tmp_path: Path) -> None:
    """After all of the above, generic capture recorded nothing but the two seeded events."""
    running, _ = proxy
    running.stop()
    ledger = open_ledger(running.ledger_url, running.blobs_url)
    with ledger.engine.connect() as conn:
        kinds = [r[0] for r in conn.exec_driver_sql("SELECT kind FROM events WHERE kind LIKE 'http.%'")]
    assert sorted(kinds) == ["http.request", "http.response"]


def test_ledger_routes_read_the_ledger_the_proxy_records_to(tmp_path: Path) -> None:
    """`flightlog proxy --ledger URL` serves /api/ledger/ from that Ledger, not FLIGHTLOG_HOME's default."""
    home = tmp_path / "home"
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    blobs = (tmp_path / "elsewhere-blobs").as_uri()
    seeded = open_ledger(url, blobs)
    seeded.append(batch([event(0, payload=b"here")]))
    seeded.close()
    env = {"FLIGHTLOG_LEDGER": "", "FLIGHTLOG_BLOBS": ""}
    with live_proxy(home, url, env=env, args=["--ledger", url, "--blobs", blobs]) as running:
        auth = {"Authorization": f"Bearer {token_of(running)}"}
        row = get(running, "/api/ledger/row/ev-000000", headers=auth)
    assert row.status_code == 200, row.text
    assert row.json()["event_id"] == "ev-000000"
