"""What a browser page from elsewhere cannot forge: Host, Origin, Sec-Fetch-Site and a JSON body.
Each is refused by `browser_refusal` whatever token the request carries; what a program sends passes."""

from __future__ import annotations

import pytest

from addons.door.authority import browser_refusal, rights_for, route_right

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("headers", "body", "limit"),
    [
        ({"host": "evil.example"}, b"", "host"),
        ({"host": "flightlog.local.evil.example:8080"}, b"", "host"),
        ({"origin": "http://evil.example"}, b"", "origin"),
        ({"origin": "null"}, b"", "origin"),
        ({"origin": "http://flightlog.local.evil.example"}, b"", "origin"),
        ({"sec-fetch-site": "cross-site"}, b"", "origin"),
        ({"sec-fetch-site": "same-site"}, b"", "origin"),
        ({"content-type": "text/plain"}, b"{}", "content_type"),
        ({"content-type": "application/x-www-form-urlencoded"}, b"a=1", "content_type"),
        ({"content-type": "multipart/form-data; boundary=x"}, b"--x", "content_type"),
        ({}, b"{}", "content_type"),
    ],
)
def test_browser_shaped_requests_are_refused(headers: dict[str, str], body: bytes, limit: str) -> None:
    """Every shape a cross-origin page (or a rebound name) can produce names the limit it broke."""
    refusal = browser_refusal("POST", headers, body)
    assert refusal is not None and refusal[0] == limit


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "flightlog.local", **JSON},
        {"Host": "FLIGHTLOG.LOCAL:443", "Content-Type": "application/json; charset=utf-8"},
        {"origin": "https://flightlog.local", "sec-fetch-site": "same-origin", **JSON},
        JSON,
    ],
)
def test_what_programs_send_passes(headers: dict[str, str]) -> None:
    """A program's request (or flightlog.local's own page) is not refused for its shape."""
    assert browser_refusal("POST", headers, b"{}") is None


def test_the_rights_routes_and_contracts_need() -> None:
    """Reading the Ledger (also through the join routes) needs `ledger`, changing the Directory
    `write`; a contract that calls those routes or spends flightlog's own token needs the same."""
    assert route_right("GET", "/api/ledger/counts") == "ledger"
    assert route_right("GET", "/api/dispatch/trace/x") == "ledger"
    assert route_right("GET", "/api/join/task/T") == "ledger"
    assert route_right("POST", "/api/directory/write") == "write"
    assert route_right("GET", "/api/directory/search") is None
    assert route_right("POST", "/api/dispatch") is None  # the door checks, and records, itself
    ledger_row = {"method": "GET", "url": "http://FLIGHTLOG.local/api/ledger/row/x"}
    assert rights_for(ledger_row) == {"ledger"}
    exfiltrate = {
        "method": "GET",
        "url": "https://evil.example/",
        "headers": {"x": "[FLIGHTLOG_LEDGER_TOKEN]"},
    }
    assert rights_for([exfiltrate]) == {"ledger"}
    assert rights_for({"method": "POST", "url": "http://flightlog.local/api/directory/write"}) == {"write"}
    assert rights_for({"method": "GET", "url": "https://api.example/"}) == frozenset()
