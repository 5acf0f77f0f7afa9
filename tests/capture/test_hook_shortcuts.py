"""The event loop's shortcuts give what mitmproxy's own calls give.

`skip_idle_addons` runs a real mitmproxy `AddonManager` (in `taddons.context`'s real master) with and
without the shortcut over the same addons; `header_values` and `for_us` are compared with
mitmproxy's `Headers.get` and `Request.pretty_host` on real `tflow` requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging

import pytest
from mitmproxy import addonmanager, exceptions, hooks, version
from mitmproxy.http import Headers
from mitmproxy.proxy.server_hooks import ClientConnectedHook
from mitmproxy.test import taddons, tflow

from addons.hook_dispatch import CHECKED_AGAINST, skip_idle_addons
from addons.local_routes import for_us
from addons.wire.heads import header_values
from door.routes import HOST


class Calls:
    """An addon that notes each hook it gets (and optionally halts the chain or fails)."""

    def __init__(self, name: str, seen: list[str], *, halt: bool = False, fail: bool = False) -> None:
        self.name, self.seen, self.halt, self.fail = name, seen, halt, fail

    def requestheaders(self, flow: object) -> None:
        self.seen.append(f"{self.name}.requestheaders")
        if self.fail:
            raise ValueError(f"{self.name} failed")
        if self.halt:
            raise exceptions.AddonHalt()

    async def response(self, flow: object) -> None:
        await asyncio.sleep(0)
        self.seen.append(f"{self.name}.response")


class Idle:
    """An addon with no per-flow hook."""

    def running(self) -> None:
        pass


class Parent:
    """An addon whose child has the hook (as mitmproxy's script loader holds scripts)."""

    def __init__(self, child: object) -> None:
        self.addons = [child]


async def _run(skip: bool, caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str]]:
    from mitmproxy.proxy.layers.http import HttpRequestHeadersHook, HttpResponseHook

    seen: list[str] = []
    with taddons.context() as tctx:
        manager = tctx.master.addons
        manager.add(Calls("a", seen), Idle(), Parent(Calls("child", seen)), Calls("bad", seen, fail=True))
        manager.add(Calls("halt", seen, halt=True), Calls("after", seen))
        if skip:
            skip_idle_addons(manager)
        flow = tflow.tflow(resp=True)
        caplog.clear()
        with caplog.at_level(logging.ERROR):
            await manager.handle_lifecycle(hooks.UpdateHook([flow]))
            await manager.handle_lifecycle(ClientConnectedHook(flow.client_conn))
            await manager.handle_lifecycle(HttpRequestHeadersHook(flow))
            await manager.handle_lifecycle(HttpResponseHook(flow))
            await asyncio.sleep(0.01)  # mitmproxy's log handler hands records on through the loop
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    return seen, errors


async def _both(caplog: pytest.LogCaptureFixture) -> tuple[tuple[list[str], list[str]], ...]:
    return await _run(False, caplog), await _run(True, caplog)


def test_skipping_idle_addons_calls_the_same_hooks_in_the_same_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With the shortcut, every hook mitmproxy would call is called in chain order (children of a
    parent addon too, async hooks awaited), AddonHalt still stops the chain, and a failing hook is
    logged as mitmproxy's "Addon error" while the next addons still run."""
    plain, fast = asyncio.run(_both(caplog))
    assert fast == plain
    seen, errors = fast
    assert seen[:5] == [
        "a.requestheaders",
        "child.requestheaders",
        "bad.requestheaders",
        "halt.requestheaders",
        "a.response",
    ]
    assert "after.requestheaders" not in seen and "after.response" in seen
    assert errors == ["Addon error: bad failed"]


FIELDS = [
    [],
    [(b"Content-Type", b"text/plain"), (b"content-length", b"12")],
    [(b"CONTENT-TYPE", b"a"), (b"X", b"y"), (b"content-type", b"b")],
    [(b"Content-Encoding", b"gzip"), (b"Content-Encoding", b""), (b"Trailer", b"x-checksum")],
    [(b"Accept", b"text/event-stream\xff\xfe"), (b"Content-Length", b"")],
]


@pytest.mark.parametrize("fields", FIELDS)
def test_header_values_equal_mitmproxy_lookups(fields: list[tuple[bytes, bytes]]) -> None:
    """One pass gives, per name, what `headers.get(name)` gives: folded duplicates, any case, bytes
    decoded as mitmproxy decodes them, None where absent."""
    headers = Headers(fields)
    names = (b"content-type", b"content-length", b"content-encoding", b"trailer", b"accept")
    assert header_values(headers.fields, names) == [headers.get(n.decode()) for n in names]


HOSTS = [
    ("example.com", [(b"Host", b"example.com")]),
    ("example.com", [(b"Host", HOST.encode())]),
    ("example.com", [(b"Host", HOST.encode() + b":8080")]),
    ("example.com", [(b"Host", b"[" + HOST.encode() + b"]:1")]),
    ("example.com", [(b"Host", b"x." + HOST.encode())]),
    ("example.com", [(b"Host", HOST.upper().encode())]),
    ("example.com", [(b"X-Note", HOST.encode()), (b"Host", b"example.com")]),
    ("example.com", [(b"Host", b"a"), (b"Host", HOST.encode())]),
    ("example.com", [(b"Host", HOST.encode() + b":notaport")]),
    (HOST, []),
]


@pytest.mark.parametrize(("host", "fields"), HOSTS)
def test_for_us_is_mitmproxys_own_host_check(host: str, fields: list[tuple[bytes, bytes]]) -> None:
    """`for_us` says flightlog.local exactly when `pretty_host` or `host` is it, for HTTP/1 Host
    headers (any port, brackets, duplicates, the name inside other headers) and an HTTP/2 authority."""
    for http2 in (False, True):
        flow = tflow.tflow()
        request = flow.request
        request.host = host
        request.headers = Headers(fields)
        if http2:
            request.http_version = "HTTP/2.0"
            request.authority = next((v.decode() for k, v in fields if k == b"Host"), "")
        assert for_us(request) == (request.pretty_host == HOST or request.data.host == HOST)


def test_the_replaced_dispatch_is_checked_against_this_mitmproxy() -> None:
    """`skip_idle_addons` replaces one manager's `trigger_event` (mitmproxy builds its manager itself,
    so no subclass can be put in place): it is only right while mitmproxy's `trigger_event` and
    `_iter_hooks` read as they did when it was written. An installed mitmproxy not in
    `CHECKED_AGAINST`, or whose two methods changed, fails here until they are read again."""
    assert version.VERSION in CHECKED_AGAINST, f"mitmproxy {version.VERSION}: read trigger_event again"
    digests = {
        name: hashlib.sha256(
            inspect.getsource(getattr(addonmanager.AddonManager, name)).encode()
        ).hexdigest()[:16]
        for name in ("trigger_event", "_iter_hooks")
    }
    assert digests == CHECKED_AGAINST[version.VERSION]
