"""MCP tool rules cannot be stepped around: one `tools/call` reader for HTTP bodies, WebSocket
messages, stdio lines and the door, which reads what servers read and says what it cannot read for
certain; such a call is refused with its reason when a rule looks at tools.

The shapes below are the ways a call can be made that a lenient reader would judge as something
else: a key given twice (which one a server takes is its own choice; in any letter case, since
Go's encoding/json ignores case), a key in another case, JSON that does not parse, a body too large
to read, a call without a tool name; and the spellings that must still be read as the call they
are (escapes, no `jsonrpc` field, UTF-16, a byte-order mark, any content type)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from door.declarations import UNREADABLE_CALL, mcp_message
from egress.mcp_calls import calls_in_message, unread_body
from egress.policy_file import parse_policy
from egress.rules import Call
from formats.jsonrpc import READ_MAX, tool_calls
from tests.mcp.support import SDK_SERVER, TAP, recorded
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import Upstream, upstream

CALL = (
    '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"secret!"}}}'
)
PAD = " " * (READ_MAX + 1)

# (shape, body, what the reader says: ("calls", [tool names]) | ("unreadable", reason part) | ("none",))
SHAPES: list[tuple[str, bytes, tuple[Any, ...]]] = [
    ("one call", CALL.encode(), ("calls", ["echo"])),
    ("a batch of two", f"[{CALL},{CALL.replace('echo', 'add')}]".encode(), ("calls", ["echo", "add"])),
    ("escaped slash in the method", CALL.replace("tools/call", "tools\\/call").encode(), ("calls", ["echo"])),
    ("unicode escape in the name", CALL.replace('"echo"', '"\\u0065cho"').encode(), ("calls", ["echo"])),
    ("no jsonrpc field", CALL.replace('"jsonrpc":"2.0",', "").encode(), ("calls", ["echo"])),
    ("jsonrpc 1.0", CALL.replace('"2.0"', '"1.0"').encode(), ("calls", ["echo"])),
    ("UTF-16", CALL.encode("utf-16"), ("calls", ["echo"])),
    ("byte-order mark", b"\xef\xbb\xbf" + CALL.encode(), ("calls", ["echo"])),
    ("whitespace around", b"\r\n\t " + CALL.encode() + b"\n ", ("calls", ["echo"])),
    (
        "two names",
        CALL.replace('"name":"echo"', '"name":"add","name":"echo"').encode(),
        ("unreadable", "twice"),
    ),
    (
        "names in two cases",
        CALL.replace('"name":"echo"', '"name":"add","NAME":"echo"').encode(),
        ("unreadable", "twice"),
    ),
    ("two methods", CALL.replace('"method"', '"method":"ping","method"').encode(), ("unreadable", "twice")),
    (
        "two arguments",
        CALL.replace('"arguments"', '"arguments":{},"arguments"').encode(),
        ("unreadable", "twice"),
    ),
    ("an argument twice", CALL.replace('"text"', '"text":"ok","text"').encode(), ("unreadable", "twice")),
    ("Method in capitals", CALL.replace('"method"', '"Method"').encode(), ("unreadable", "letter case")),
    ("Name in capitals", CALL.replace('"name"', '"Name"').encode(), ("unreadable", "letter case")),
    ("no params", b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}', ("unreadable", "without params")),
    ("a name that is no string", CALL.replace('"echo"', "5").encode(), ("unreadable", "without a tool name")),
    ("broken JSON", CALL[:-3].encode(), ("unreadable", "not")),
    ("trailing bytes after the call", (CALL + "{}").encode(), ("unreadable", "not")),
    ("a number too long to read", CALL.replace("7", "7" * 5000, 1).encode(), ("unreadable", "not")),
    ("over 8 MiB", (CALL[:-1] + ',"pad":"' + PAD + '"}').encode(), ("unreadable", "over the")),
    ("over 8 MiB, leading spaces", (PAD + CALL).encode(), ("unreadable", "over the")),
    ("over 8 MiB of bytes that are no JSON", b"\x89PNG" + PAD.encode(), ("none",)),
    ("form data", b"a=1&method=tools/call", ("none",)),
    ("JSON that is no JSON-RPC", b'{"model":"m","messages":[],"model":"n"}', ("none",)),
    ("a JSON-RPC answer", b'{"jsonrpc":"2.0","id":1,"result":{}}', ("none",)),
    ("another method", b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', ("calls", [])),
]
IDS = [s[0] for s in SHAPES]


@pytest.mark.parametrize(("shape", "body", "expected"), SHAPES, ids=IDS)
def test_the_one_reader_reads_each_shape_or_says_it_cannot(
    shape: str, body: bytes, expected: tuple[Any, ...]
) -> None:
    """`formats.jsonrpc.tool_calls` reads each shape a server would read as a call as that call,
    says why for each it cannot read for certain, and leaves what is no JSON-RPC alone."""
    found = tool_calls(body)
    if expected[0] == "calls":
        assert found.unreadable is None and [c.name for c in found.calls] == expected[1]
    elif expected[0] == "unreadable":
        assert found.unreadable is not None and expected[1] in found.unreadable
    else:
        assert found.unreadable is None and not found.calls


TOOL_RULE = {"name": "no-secret-echo", "action": "deny", "tools": "echo", "args": {"text": "secret*"}}
HOST_RULE = {"name": "no-blocked", "action": "deny", "hosts": "blocked.example"}
BASE = Call("http", "mcp.example", 443, "POST", "/mcp")


@pytest.mark.parametrize(("shape", "body", "expected"), SHAPES, ids=IDS)
def test_the_policy_refuses_what_it_cannot_read_when_a_rule_looks_at_tools(
    shape: str, body: bytes, expected: tuple[Any, ...]
) -> None:
    """With a tool rule: a readable `echo` of a secret is refused by that rule, an unreadable body
    by rule `unreadable` with its reason, the rest allowed. Without one (host rules only), an
    unreadable body is judged as the request it is: nothing looks at tools, nothing is guessed."""
    with_tools = parse_policy({"rule": [TOOL_RULE]}, "t")
    hosts_only = parse_policy({"rule": [HOST_RULE]}, "t")
    asked = calls_in_message(body, BASE)
    decisions = [with_tools.judge(c) for c in asked.calls]
    if expected[0] == "unreadable":
        (decision,) = decisions
        assert decision.rule == "unreadable" and expected[1] in decision.limit
        assert [hosts_only.judge(c).action for c in asked.calls] == ["allow"]
    elif expected[0] == "calls" and "echo" in expected[1]:
        assert decisions[expected[1].index("echo")].rule == "no-secret-echo"
    else:
        assert {d.action for d in decisions} == {"allow"}


def test_a_websocket_message_is_judged_like_an_http_body() -> None:
    """`calls_in_message` is what the WebSocket hook hands the judge for each message: a text or
    binary message carrying a `tools/call` is judged by the tool rules, one with a duplicate key is
    refused as unreadable (answered by the id its first bytes name), a message that is no JSON-RPC
    is judged as the connection it travels on."""
    policy = parse_policy({"rule": [TOOL_RULE]}, "t")
    ws = Call("http", "mcp.example", 443, "GET", "/ws")
    for message in (CALL.encode(), CALL.encode("utf-16")):
        asked = calls_in_message(message, ws)
        assert asked.tool_calls and asked.ids == [7]
        assert policy.judge(asked.calls[0]).rule == "no-secret-echo"
    twice = calls_in_message(SHAPES[IDS.index("two names")][1], ws)
    assert policy.judge(twice.calls[0]).rule == "unreadable" and twice.ids == [7]
    assert calls_in_message(b"hello", ws).calls == (ws,)


def test_a_body_streamed_unread_is_unreadable_when_it_may_be_json() -> None:
    """A body the proxy streams through without reading (over 8 MiB) may hold a call when its
    content type is one a JSON-RPC server reads, or none: then it is unreadable; an image is not."""
    for ctype in ("application/json", "application/json-rpc; charset=utf-8", "text/plain", ""):
        assert unread_body(BASE, 9 << 20, ctype).unreadable
    assert not unread_body(BASE, 9 << 20, "image/png").unreadable


def test_the_door_reads_its_mcp_calls_with_the_same_reader() -> None:
    """The door's `/api/mcp` declarations read calls with the one reader: a duplicate name is
    unreadable (declared as a change of nothing a token names), never one name or the other."""
    assert mcp_message(CALL.encode()) == ("echo", {"text": "secret!"})
    tool, reason = mcp_message(SHAPES[IDS.index("two names")][1])
    assert tool == UNREADABLE_CALL and "twice" in reason
    assert mcp_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}') == (None, None)


# -- through a real proxy --------------------------------------------------------------------------

POLICY = """
[[rule]]
name = "no-secret-echo"
action = "deny"
tools = ["echo"]
args = { text = "secret*" }
"""
WIRE = {
    "two names": (SHAPES[IDS.index("two names")][1], "application/json", "unreadable"),
    "Method in capitals": (SHAPES[IDS.index("Method in capitals")][1], "application/json", "unreadable"),
    "broken JSON": (SHAPES[IDS.index("broken JSON")][1], "application/json", "unreadable"),
    "a call sent as text/plain": (CALL.encode(), "text/plain", "no-secret-echo"),
    "a call with no content type": (CALL.encode(), "", "no-secret-echo"),
    "an escaped method": (
        SHAPES[IDS.index("escaped slash in the method")][1],
        "application/json",
        "no-secret-echo",
    ),
}


@dataclass
class World:
    proxy: LiveProxy
    plain: Upstream


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("mcp-unreadable")
    (root / "egress.toml").write_text(POLICY)
    with upstream() as plain:
        args = ["--policy", str(root / "egress.toml"), "--mode", f"reverse:http://127.0.0.1:{plain.port}@0"]
        proxy = start_proxy(root / "home", f"sqlite:///{root / 'l.db'}", args=args)
        try:
            yield World(proxy, plain)
        finally:
            proxy.stop()


@pytest.mark.parametrize("case", list(WIRE))
def test_through_a_real_proxy_an_unreadable_or_disguised_call_never_reaches_the_server(
    case: str, world: World
) -> None:
    """Posted by a real client to a reverse listener: each is answered by the proxy naming the rule
    (`unreadable`, or the tool rule for a call in a content type a lenient server reads), and the
    upstream never sees the request."""
    body, ctype, rule = WIRE[case]
    path = f"/mcp/{case.replace(' ', '-')}"
    headers = {"content-type": ctype} if ctype else {}
    port = world.proxy.reverse_port(str(world.plain.port))
    answer = httpx.post(f"http://127.0.0.1:{port}{path}", content=body, headers=headers, timeout=30)
    assert answer.headers.get("x-flightlog-refused") == rule, answer.text
    assert not [r for r in world.plain.received if r[1] == path]


def test_through_a_real_proxy_a_call_over_8_mib_is_refused(world: World) -> None:
    """A JSON body over 8 MiB is streamed by the proxy, never read: with a tool rule it is refused
    (the connection closed, since a streamed request cannot be answered) and no byte of it reaches
    the upstream; an image of the same size passes."""
    port = world.proxy.reverse_port(str(world.plain.port))
    body = SHAPES[IDS.index("over 8 MiB")][1]
    with pytest.raises(httpx.HTTPError):
        answer = httpx.post(
            f"http://127.0.0.1:{port}/mcp/large",
            content=body,
            headers={"content-type": "application/json"},
            timeout=60,
        )
        assert answer.status_code >= 400 and answer.headers.get("x-flightlog-refused") == "unreadable"
        raise httpx.HTTPError("refused with an answer")
    assert not [r for r in world.plain.received if r[1] == "/mcp/large"]
    image = httpx.post(
        f"http://127.0.0.1:{port}/fixed",
        content=b"\x89PNG" + PAD.encode(),
        headers={"content-type": "image/png"},
        timeout=60,
    )
    assert image.status_code != 403


def test_over_stdio_a_line_with_two_names_is_refused_with_its_id(tmp_path: Path) -> None:
    """`flightlog mcp-record` with a tool rule: a client's `tools/call` line with two `"name"` keys
    is answered by flightlog with a JSON-RPC error for its id naming rule `unreadable`; the server's
    input holds every other line and not that one."""
    policy = tmp_path / "egress.toml"
    policy.write_text(POLICY)
    ledger_url, blobs_url = f"sqlite:///{tmp_path / 'ledger.db'}", (tmp_path / "blobs").as_uri()
    server = [*TAP, str(tmp_path / "server"), *SDK_SERVER]
    command = recorded(server, "--ledger", ledger_url, "--blobs", blobs_url, "--policy", str(policy))
    client = {"name": "t", "version": "1"}
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    twice = (
        b'{"jsonrpc":"2.0","id":5,"method":"tools/call",'
        b'"params":{"name":"add","name":"echo","arguments":{"text":"x"}}}'
    )
    ping = {"jsonrpc": "2.0", "id": 6, "method": "ping"}
    lines = [
        json.dumps(init).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
        twice,
        json.dumps(ping).encode(),
    ]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"\n".join(lines[:3]) + b"\n")
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(2)]  # initialize's, then the refusal
        proc.stdin.write(lines[3] + b"\n")
        proc.stdin.close()
        answers.append(json.loads(proc.stdout.readline()))
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    refusal = next(a for a in answers if a.get("id") == 5)
    assert refusal["error"]["code"] == -32001 and refusal["error"]["data"]["rule"] == "unreadable"
    assert any(a.get("id") == 6 and "result" in a for a in answers)
    server_in = (tmp_path / "server.in").read_bytes()
    assert twice not in server_in and b'"ping"' in server_in
