"""The one judge, cell by cell: listener x layer x target spelling x rule, generated from enumerations.

A test host in a network namespace (198.51.100.0/26, `netns_hosts`) runs an HTTP server, a TCP echo,
a UDP echo and a DNS server, each keeping its own log of what reached it. One proxy per rule set
(module-scoped, shared by every cell of that rule) has a forward listener, and per target spelling a
reverse listener of each layer (`reverse:http`, `reverse:tcp`, `reverse:udp`, `reverse:dns`) and
the model API listeners (one per provider: two spellings). The proxy resolves the test host's names
from a hosts file of its own (a private mount namespace), never the machine's resolver.

Each cell sends one message tagged with its own id and asserts both halves of "judged":
- what the target saw: its own log holds the tag exactly when the rule lets it through (nothing
  reaches a target the rule refuses);
- what flightlog recorded: a refusal is a `policy.refused` event (its count grows), an HTTP request
  that passed is recorded with the URL of where it went.

Rules (each over the test host by address network, `target.test` and `.target.test`, `bücher.test`):
allow (default deny), deny (default allow), ask (nobody answers: refused after the ask timeout),
budget (0 tokens for model calls: the model call is refused, what is not a model call passes).
"""

from __future__ import annotations

import ipaddress
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest

from storage.ledger import Ledger
from tests.capture.ledger_view import events_where, ledger_of
from tests.egress.netns_hosts import Host, network_host
from tests.support.proxy import LiveProxy, start_proxy

NAME: Final = "target.test"
IDN: Final = "bücher.test"
IDN_WIRE: Final = "xn--bcher-kva.test"
WHO: Final = "agent=alpha;session=m1;task=t1"

RULES: Final = ("allow", "deny", "ask", "budget")
LISTENERS: Final = ("forward", "reverse", "model")
LAYERS: Final = ("http1", "connect-http1", "connect-tcp", "tcp", "udp", "dns", "host-claim")
SPELLINGS: Final = ("name", "ipv4", "decimal", "octal", "hex", "mapped-ipv6", "idn")

VALID: Final = {
    "forward": ("http1", "connect-http1", "connect-tcp"),
    "reverse": ("http1", "host-claim", "tcp", "udp", "dns"),
    "model": ("http1", "host-claim"),
}
"""Which layers a listener carries (a forward listener tunnels raw TCP with CONNECT; a reverse
listener is one layer per listener; the model listeners speak HTTP)."""
MODEL_SPELLINGS: Final = {"ipv4": "openai", "name": "anthropic"}
"""One model listener per provider: two providers, two spellings."""


def spelled(spelling: str, address: str) -> str:
    """The test host's address (or name) as a client may write it."""
    packed = int(ipaddress.IPv4Address(address))
    octets = address.split(".")
    return {
        "name": NAME,
        "ipv4": address,
        "decimal": str(packed),
        "octal": ".".join(f"0{int(o):o}" for o in octets),
        "hex": f"0x{packed:08x}",
        "mapped-ipv6": f"[::ffff:{address}]",
        "idn": IDN_WIRE,
    }[spelling]


def policy(rule: str, host: Host) -> str:
    hosts = f'hosts = ["{host.address}/32", "{NAME}", ".{NAME}", "{IDN}"]'
    return {
        "allow": f'default = "deny"\n[[rule]]\nname = "m-allow"\naction = "allow"\n{hosts}\n',
        "deny": f'default = "allow"\n[[rule]]\nname = "m-deny"\naction = "deny"\n{hosts}\n',
        "ask": 'default = "allow"\nask_timeout = "300ms"\n[[rule]]\nname = "m-ask"\naction = "ask"\n'
        + hosts
        + "\n",
        "budget": f'default = "allow"\n[[budget]]\nname = "m-budget"\ntokens = 0\n{hosts}\n',
    }[rule]


# -- the test host's servers, each with its own log -------------------------------------------------


@dataclass
class Target:
    host: Host
    ports: dict[str, int] = field(default_factory=dict)
    seen: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, tag: bytes) -> bool:
        with self.lock:
            return any(tag in item for item in self.seen)

    def keep(self, data: bytes) -> None:
        with self.lock:
            self.seen.append(data)


def _servers(target: Target, stack: ExitStack) -> None:
    class Http(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                chunk = self.rfile.readline()
                if not chunk:
                    return
                head += chunk
            length = next(
                (
                    int(x.split(b":")[1])
                    for x in head.split(b"\r\n")
                    if x.lower().startswith(b"content-length")
                ),
                0,
            )
            body = self.rfile.read(length) if length else b""
            target.keep(head + body)
            answer = b'{"usage": {"prompt_tokens": 1, "completion_tokens": 1}, "model": "m"}'
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + b"Content-Length: %d\r\n\r\n" % len(answer)
                + answer
            )

    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = self.request.recv(4096)
            if data:
                target.keep(data)
                self.request.sendall(b"echo:" + data)

    class UdpEcho(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data, sock = self.request
            target.keep(data)
            sock.sendto(b"echo:" + data, self.client_address)

    class Dns(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            from mitmproxy import dns
            from mitmproxy.net.dns import types

            data, sock = self.request
            query = dns.DNSMessage.unpack(data)
            target.keep(b"dns:" + query.questions[0].name.encode())
            answer = dns.ResourceRecord(
                query.questions[0].name, types.A, 1, 60, ipaddress.IPv4Address(target.host.address).packed
            )
            sock.sendto(query.succeed([answer]).packed, self.client_address)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    made: dict[str, socketserver.BaseServer] = {}
    with target.host.inside():
        made["http"] = socketserver.ThreadingTCPServer((target.host.address, 0), Http)
        made["tcp"] = socketserver.ThreadingTCPServer((target.host.address, 0), Echo)
        made["udp"] = socketserver.ThreadingUDPServer((target.host.address, 0), UdpEcho)
        made["dns"] = socketserver.ThreadingUDPServer((target.host.address, 0), Dns)
    for name, server in made.items():
        server.daemon_threads = True
        target.ports[name] = server.server_address[1]  # type: ignore[index]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        stack.callback(server.server_close)
        stack.callback(server.shutdown)


@dataclass
class World:
    target: Target
    root: Path
    stack: ExitStack
    proxies: dict[str, tuple[LiveProxy, Ledger]] = field(default_factory=dict)

    def proxy(self, rule: str) -> tuple[LiveProxy, Ledger]:
        """The proxy of one rule set, started on first use and kept for the module."""
        if rule not in self.proxies:
            self.proxies[rule] = self._start(rule)
        return self.proxies[rule]

    def _start(self, rule: str) -> tuple[LiveProxy, Ledger]:
        home = self.root / rule
        home.mkdir()
        (home / "egress.toml").write_text(policy(rule, self.target.host))
        hosts = home / "hosts"
        address = self.target.host.address
        hosts.write_text(Path("/etc/hosts").read_text() + f"\n{address} {NAME}\n{address} {IDN_WIRE}\n")
        args = ["--policy", str(home / "egress.toml"), "--set", "keep_host_header=true"]
        ports = self.target.ports
        for spelling in SPELLINGS:
            where = spelled(spelling, address)
            for layer, scheme in (("http", "http"), ("tcp", "tcp"), ("udp", "udp"), ("dns", "dns")):
                args += ["--mode", f"reverse:{scheme}://{where}:{ports[layer]}@0"]
        for spelling, api in MODEL_SPELLINGS.items():
            args += ["--ai-upstream", f"{api}=http://{spelled(spelling, address)}:{ports['http']}"]
        launcher = ["unshare", "-m", "--propagation", "private", "sh", "-c"]
        launcher += ['mount --bind "$0" /etc/hosts && exec "$@"', str(hosts)]
        ledger_url = f"sqlite:///{home / 'ledger.db'}"
        proxy = start_proxy(home / "home", ledger_url, args=args, launcher=launcher, timeout=90)
        self.stack.callback(proxy.stop)
        ledger = ledger_of(ledger_url, proxy.blobs_url)
        self.stack.callback(ledger.close)
        return proxy, ledger


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with ExitStack() as stack:
        host = stack.enter_context(network_host())
        target = Target(host)
        _servers(target, stack)
        yield World(target, tmp_path_factory.mktemp("judge-matrix"), stack)


# -- the clients -----------------------------------------------------------------------------------


def _listener(proxy: LiveProxy, mode: str) -> int:
    return next(x.port for x in proxy.listeners if x.mode.startswith(mode))


def _exchange(port: int, data: bytes, then: bytes = b"") -> bytes:
    """Send `data` to a listener (after `then`'s answer, for a CONNECT) and read what comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        if then:
            sock.sendall(then)
            first = sock.recv(4096)
            if not first.startswith(b"HTTP/1.1 200"):
                return first
        sock.sendall(data)
        got = b""
        try:
            while chunk := sock.recv(65536):
                got += chunk
                if not then and b"\r\n\r\n" not in got:
                    continue
                if then and data[:4] != b"GET " and data[:5] != b"POST ":
                    break
        except (TimeoutError, ConnectionResetError):
            pass
        return got


def _http_request(target: str, path: str, host_header: str, model: bool, absolute: bool) -> bytes:
    body = b'{"model": "m", "messages": []}' if model else b""
    method = "POST" if model else "GET"
    line = f"http://{target}{path}" if absolute else path
    auth = AUTH if absolute else ""
    head = f"{method} {line} HTTP/1.1\r\nHost: {host_header}\r\n{auth}Content-Length: {len(body)}\r\n"
    return head.encode() + b"Connection: close\r\n\r\n" + body


def _udp(port: int, data: bytes) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        sock.sendto(data, ("127.0.0.1", port))
        try:
            return sock.recvfrom(4096)[0]
        except TimeoutError:
            return None


def _dns(port: int, name: str) -> int | None:
    """The answer's rcode, or None when none came."""
    from mitmproxy import dns
    from mitmproxy.net.dns import classes, types

    query = dns.DNSMessage(
        id=7, query=True, op_code=0, authoritative_answer=False, truncation=False,
        recursion_desired=True, recursion_available=False, reserved=0, response_code=0,
        questions=[dns.Question(name, types.A, classes.IN)], answers=[], authorities=[], additionals=[],
    )  # fmt: skip
    got = _udp(port, query.packed)
    return None if got is None else dns.DNSMessage.unpack(got).response_code


def cells() -> Iterator[tuple[str, str, str, str]]:
    for rule in RULES:
        for listener in LISTENERS:
            for layer in LAYERS:
                for spelling in SPELLINGS:
                    if layer not in VALID[listener]:
                        continue
                    if listener == "model" and spelling not in MODEL_SPELLINGS:
                        continue
                    yield rule, listener, layer, spelling


CELLS: Final = list(cells())


def passes(rule: str, layer: str) -> bool:
    """What the rule says of the cell: allow lets all through, deny and ask none (an ask nobody
    answers is refused; a raw stream or a DNS question cannot wait), a 0-token budget only what is
    not a model call (the HTTP cells here post to the model API's path)."""
    if rule == "allow":
        return True
    if rule == "budget":
        return layer in ("connect-tcp", "tcp", "udp", "dns")
    return False


HTTP_LAYERS: Final = ("http1", "connect-http1", "host-claim")
AUTH: Final = "Proxy-Authorization: Basic YWdlbnQ9YWxwaGE7c2Vzc2lvbj1tMTt0YXNrPXQxOng=\r\n"
"""agent=alpha;session=m1;task=t1 as proxy credentials (a forward listener's caller)."""


def _connect(where: str, port: int) -> bytes:
    return f"CONNECT {where}:{port} HTTP/1.1\r\nHost: {where}:{port}\r\n{AUTH}\r\n".encode()


def send_http(world: World, proxy: LiveProxy, listener: str, layer: str, spelling: str, tag: str) -> bool:
    """A model call (POST to the chat completions path) over `listener`: whether it got a 200."""
    where, port = spelled(spelling, world.target.host.address), world.target.ports["http"]
    path = f"/v1/chat/completions?t={tag}"
    if listener == "forward" and layer == "http1":
        answer = _exchange(proxy.port, _http_request(f"{where}:{port}", path, f"{where}:{port}", True, True))
    elif listener == "forward":  # inside a CONNECT tunnel
        answer = _exchange(
            proxy.port, _http_request("", path, f"{where}:{port}", True, False), _connect(where, port)
        )
    else:  # a reverse or model listener: the caller in the path prefix; maybe claiming flightlog.local
        claim = "flightlog.local" if layer == "host-claim" else f"{where}:{port}"
        mode = f"reverse:http://{where}:{port}" if listener == "reverse" else ""
        at = _listener(proxy, mode) if mode else proxy.ai_port(MODEL_SPELLINGS[spelling])
        answer = _exchange(at, _http_request("", f"/_flightlog/{WHO}{path}", claim, True, False))
    # refused: answered 403 (the request), 502 (its tunnel), or closed (its connection)
    assert answer[:12] in (b"HTTP/1.1 200", b"HTTP/1.1 403", b"HTTP/1.1 502", b""), answer[:300]
    return answer.startswith(b"HTTP/1.1 200")


def send_raw(world: World, proxy: LiveProxy, listener: str, layer: str, spelling: str, tag: str) -> bool:
    """A non-HTTP stream (an SSH banner) through a CONNECT tunnel or a reverse:tcp listener, a DNS
    question through a reverse:dns listener: whether the echo (or a NOERROR answer) came back."""
    target = world.target
    where = spelled(spelling, target.host.address)
    banner = f"SSH-2.0-{tag}\r\n".encode()
    if layer == "connect-tcp":
        return b"echo:" in _exchange(proxy.port, banner, _connect(where, target.ports["tcp"]))
    if layer == "dns":
        return _dns(_listener(proxy, f"reverse:dns://{where}:{target.ports['dns']}"), f"{tag}.{NAME}") == 0
    at = _listener(proxy, f"reverse:tcp://{where}:{target.ports['tcp']}")
    with socket.create_connection(("127.0.0.1", at), timeout=5) as sock:
        sock.sendall(banner)
        try:
            return sock.recv(4096).startswith(b"echo:")
        except (TimeoutError, ConnectionResetError):
            return False


@pytest.mark.parametrize(("rule", "listener", "layer", "spelling"), CELLS)
def test_cell(world: World, rule: str, listener: str, layer: str, spelling: str) -> None:
    """One cell: the client's outcome, the target's log and the Ledger agree with the rule."""
    proxy, ledger = world.proxy(rule)
    address = world.target.host.address
    tag = f"cell{CELLS.index((rule, listener, layer, spelling))}x{time.monotonic_ns() % 10**6}"
    refusals = len(events_where(ledger, "kind = 'policy.refused'", {}))
    expected = passes(rule, layer)
    send = send_http if layer in HTTP_LAYERS else send_raw
    assert send(world, proxy, listener, layer, spelling, tag) == expected
    saw = world.target.saw(tag.encode())
    assert saw == expected, f"the target {'did not see' if expected else 'saw'} {tag}"
    if expected:
        if layer in HTTP_LAYERS:
            recorded = _wait(
                lambda: events_where(ledger, "kind = 'http.request' AND url LIKE :u", {"u": f"%{tag}%"})
            )
            assert recorded, "the request is recorded"
            went = {"name": NAME, "idn": IDN_WIRE}.get(spelling, address)
            assert recorded[0].host == went, (
                "recorded with where it went",
                recorded[0].host,
                recorded[0].url,
            )
        return
    found = _wait(lambda: events_where(ledger, "kind = 'policy.refused'", {})[refusals:])
    assert found, f"a refusal is filed: {proxy.log()[-2500:]}"
    if layer in HTTP_LAYERS:  # the request refused, or its connection (the host alone decides)
        assert any(tag in (e.url or "") or e.method == "CONNECT" for e in found), [e.url for e in found]


def _wait(ask: Callable[[], list[object]], seconds: float = 15.0) -> list:  # type: ignore[type-arg]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = ask()
        if found:
            return found
        time.sleep(0.05)
    return []
