"""The Ledger's read routes: the bearer token, exact blob bytes, rows, actions, counts, query and ask."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from readback.ledger_routes import api_token, handle, ledger_handler
from storage.ledger import Ledger
from tests.browse.sample import BINARY, CHAT_SSE, sample_ledger, sqlite_sample

__all__ = ["sample_ledger", "sqlite_sample"]
TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def call(
    ledger: Ledger,
    path: str,
    query: dict[str, str] | None = None,
    *,
    method: str = "GET",
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    return handle(
        method, path, query or {}, AUTH if headers is None else headers, body, ledger=ledger, token=TOKEN
    )


def as_json(response: tuple[int, dict[str, str], bytes]) -> Any:
    _status, headers, body = response
    assert headers["content-type"] == "application/json"
    return json.loads(body)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"authorization": f"Basic {TOKEN}"}],
)
@pytest.mark.parametrize(
    "path", ["/api/ledger/row/a1-request", "/api/ledger/blob/" + "0" * 64, "/api/ledger/nope"]
)
def test_401_without_the_token(sqlite_sample: Ledger, headers: dict[str, str], path: str) -> None:
    """Every route, known or not, answers 401 unless the bearer token is exactly right."""
    status, out, body = call(sqlite_sample, path, headers=headers)
    assert status == 401
    assert out["www-authenticate"].startswith("Bearer")
    assert b"a1-request" not in body


def test_the_token_header_is_case_insensitive(sqlite_sample: Ledger) -> None:
    """Header names are case-insensitive, as HTTP says."""
    assert (
        call(sqlite_sample, "/api/ledger/row/a1-request", headers={"authorization": f"bearer {TOKEN}"})[0]
        == 200
    )


def test_blob_bytes_are_exact(sample_ledger: Ledger) -> None:
    """/blob/SHA answers the payload's raw bytes exactly as kept, binary and SSE alike."""
    for event_id, expected in (("a5-request", BINARY), ("a1-response", CHAT_SSE)):
        sha = sample_ledger.event(event_id).payload_sha256  # type: ignore[union-attr]
        status, headers, body = call(sample_ledger, f"/api/ledger/blob/{sha}")
        assert status == 200
        assert body == expected
        assert headers["content-type"] == "application/octet-stream"
        assert headers["x-content-sha256"] == sha


def test_blob_errors(sqlite_sample: Ledger) -> None:
    """A bad address is 400, an unknown one 404; neither returns bytes."""
    assert call(sqlite_sample, "/api/ledger/blob/xyz")[0] == 400
    assert call(sqlite_sample, "/api/ledger/blob/" + "ab" * 32)[0] == 404


def test_row_and_action(sqlite_sample: Ledger) -> None:
    """/row/ID is one event whole (head kept byte for byte); /action/ID every event of a request."""
    row = as_json(call(sqlite_sample, "/api/ledger/row/a1-request"))
    assert row["event_id"] == "a1-request"
    assert row["redacted"] == ["OPENAI_API_KEY"]
    assert base64.b64decode(row["head_base64"]) == sqlite_sample.event("a1-request").head  # type: ignore[union-attr]
    action = as_json(call(sqlite_sample, "/api/ledger/action/a1"))
    assert [e["event_id"] for e in action["events"]] == ["a1-request", "a1-response"]
    assert call(sqlite_sample, "/api/ledger/row/nope")[0] == 404
    assert call(sqlite_sample, "/api/ledger/action/nope")[0] == 404
    assert call(sqlite_sample, "/api/ledger/row/")[0] == 404


def test_counts_and_group(sample_ledger: Ledger) -> None:
    """/counts sums a filter; with ?by= (or /group) it counts per key."""
    summary = as_json(call(sample_ledger, "/api/ledger/counts", {"agent": "alpha"}))
    assert (summary["events"], summary["tokens_in"], summary["distinct_sessions"]) == (4, 100, 1)
    grouped = as_json(call(sample_ledger, "/api/ledger/group", {"by": "agent", "status": "errors"}))
    assert grouped["groups"] == [
        {"key": "alpha", "events": 1, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "unpriced": 0},
        {"key": "beta", "events": 1, "tokens_in": 0, "tokens_out": 0, "cost_usd": 0.0, "unpriced": 0},
    ]
    assert call(sample_ledger, "/api/ledger/group")[0] == 400
    status, _, body = call(sample_ledger, "/api/ledger/counts", {"by": "colour"})
    assert status == 400 and b"cannot count by" in body
    assert call(sample_ledger, "/api/ledger/counts", {"colour": "red"})[0] == 400


def test_query_pages_with_next(sample_ledger: Ledger) -> None:
    """POST /query takes a filter as JSON; `next` continues where the page ended."""
    body = json.dumps({"filter": {"host": "api.openai.com"}, "limit": 3}).encode()
    first = as_json(call(sample_ledger, "/api/ledger/query", method="POST", body=body))
    assert [e["event_id"] for e in first["events"]] == ["a4-response", "a4-request", "a1-response"]
    body = json.dumps({"filter": {"host": "api.openai.com"}, "limit": 3, "before": first["next"]}).encode()
    second = as_json(call(sample_ledger, "/api/ledger/query", method="POST", body=body))
    assert [e["event_id"] for e in second["events"]] == ["a1-request"]
    assert second["next"] is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"filter": {"colour": 1}}', "unknown filter field"),
        (b'{"filter": {}, "limit": 0}', "limit"),
        (b'{"sql": "select 1"}', "unknown field 'sql'"),
    ],
)
def test_query_refuses_bad_bodies(sqlite_sample: Ledger, body: bytes, message: str) -> None:
    """A malformed query is a 400 that says what is wrong."""
    status, _, out = call(sqlite_sample, "/api/ledger/query", method="POST", body=body)
    assert status == 400
    assert message in json.loads(out)["error"]


def test_wrong_method_is_405(sqlite_sample: Ledger) -> None:
    """GET /query and POST /row are 405 with an Allow header."""
    status, headers, _ = call(sqlite_sample, "/api/ledger/query")
    assert (status, headers["allow"]) == (405, "POST")
    assert call(sqlite_sample, "/api/ledger/row/a1-request", method="POST")[0] == 405


def test_ask_answers_in_events_or_groups(sample_ledger: Ledger) -> None:
    """/ask reads plain words into the same filter; a word not understood is a 400 naming it (never
    the answer to the question without it); refusals are 400."""
    status, _, body = call(sample_ledger, "/api/ledger/ask", {"q": "errors from agent alpha zorp"})
    assert status == 400 and json.loads(body)["error"].startswith("did not understand 'zorp': ")
    answer = as_json(call(sample_ledger, "/api/ledger/ask", {"q": "errors from agent alpha"}))
    assert answer["filter"] == {"agent": "alpha", "status": "errors"}
    assert [e["event_id"] for e in answer["events"]] == ["a2-response"]
    grouped = as_json(call(sample_ledger, "/api/ledger/ask", {"q": "cost by model"}))
    assert [g["key"] for g in grouped["groups"]][:2] == ["claude-sonnet", "gpt-4o"]  # ranked by cost
    assert grouped["rank"] == "cost" and grouped["total"]["exchanges"] == 5
    status, _, body = call(sample_ledger, "/api/ledger/ask", {"q": "select * from events"})
    assert status == 400 and b"never SQL" in body


def test_api_token_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    """The token is made on first use, kept private, and the same on every later read."""
    home = tmp_path / "home"
    token = api_token(home)
    assert len(token) >= 40
    assert stat.S_IMODE(os.stat(home / "api-token").st_mode) == 0o600
    assert api_token(home) == token


def test_ledger_handler_binds_the_ledger_and_the_kept_token(sqlite_sample: Ledger, tmp_path: Path) -> None:
    """What local_routes registers: the five-argument handler, checking the token from FLIGHTLOG_HOME."""
    home = tmp_path / "home"
    route = ledger_handler(sqlite_sample, home)
    path = "/api/ledger/row/a1-request"
    assert route("GET", path, {}, {}, b"")[0] == 401
    assert route("GET", path, {}, {"Authorization": f"Bearer {api_token(home)}"}, b"")[0] == 200
