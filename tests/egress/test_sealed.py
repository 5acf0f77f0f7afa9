"""`flightlog run --sealed`: real programs that ignore the proxy variables, inside the namespace.

Node 20's `fetch` (TLS) and `node:http`, `curl --noproxy '*'`, a raw socket speaking HTTP by hand:
each is caught by the TUN and recorded under the run's identity. curl through the proxy variables
is recorded once. A raw socket speaking anything else, and UDP other than DNS, are refused
(closed, nothing forwarded) and recorded as refusals. DNS answers inside as outside, but a name the
policy refuses outright is refused (REFUSED) and recorded. FLIGHTLOG_HOME is absent inside.
Where this process cannot seal (not root), the command must not run at all: one line says why.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from flightlog.sealed import why_not
from storage.ledger import Ledger, open_ledger
from tests.egress import sealed_probe
from tests.egress.netns_hosts import network_host
from tests.egress.sealed_support import python_reads
from tests.support.upstream import Upstream, upstream

PROBE = Path(sealed_probe.__file__)
POLICY = """
[[rule]]
name = "no-blocked-path"
action = "deny"
paths = ["/blocked*"]

[[rule]]
name = "no-denied-host"
action = "deny"
hosts = ["denied.example"]
"""


def sealed(
    home: Path, ledger_url: str, *args: str, launcher: list[str] | None = None, path: str | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    base |= {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, **({"PATH": path} if path else {})}
    # this Python, where root's sandbox user (nobody) cannot walk: named, so it is bound in
    reach = python_reads() if launcher is None else []
    command = [*(launcher or []), sys.executable, "-m", "flightlog", "run", "--sealed", *reach, *args]
    return subprocess.run(command, env=base, capture_output=True, text=True, timeout=240)


@pytest.fixture
def upstreams(tmp_path: Path) -> Iterator[tuple[str, Upstream, Upstream]]:
    """A plain and a TLS upstream on a test host (a network namespace of its own)."""
    with network_host() as host, ExitStack() as stack:
        with host.inside():
            plain = stack.enter_context(upstream(host=host.address))
            tls = stack.enter_context(upstream(tmp_path, host=host.address))
        yield host.address, plain, tls


DROPPED = [shutil.which("setpriv") or "setpriv", "--bounding-set", "-net_admin,-sys_admin", "--"]
"""Root without the capabilities a TUN device needs: sealing as a user who is not root would."""


def test_where_it_cannot_seal_nothing_runs(tmp_path: Path) -> None:
    """Neither root nor user namespaces (here: the capabilities dropped and no `unshare` to make a
    user namespace with): one line says why and the command never runs. A command that does not
    exist is refused before anything starts."""
    marker = tmp_path / "ran"
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ip").symlink_to(shutil.which("ip") or "/usr/sbin/ip")
    done = sealed(tmp_path / "home", f"sqlite:///{tmp_path / 'l.db'}", "--", "/usr/bin/touch", str(marker),
                  launcher=DROPPED, path=str(tools))  # fmt: skip
    assert done.returncode == 1 and not marker.exists(), done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("flightlog: run --sealed: cannot seal here: it needs root (CAP_NET_ADMIN")
    assert "or, without root, user namespaces" in line
    done = sealed(tmp_path / "home", f"sqlite:///{tmp_path / 'l.db'}", "--", "no-such-command-here")
    assert done.returncode == 127  # as a shell says of a command it cannot find, sealed or not
    assert done.stderr.strip().splitlines()[-1] == "flightlog: command not found: no-such-command-here"


@pytest.mark.skipif(why_not() is not None, reason="sealing with a TUN device needs root")
def test_a_program_out_of_the_seals_sight_is_one_line_saying_what_to_name(tmp_path: Path) -> None:
    """A program in a folder the sandbox hides (here the private /tmp; the rules are enumerated in
    test_sealed_policy) is refused before anything starts, in one line naming the file, what hides
    it and the --read that shows it, not bwrap's `execvp: No such file or directory`; so is a script
    whose interpreter is hidden. Named with --read, it runs sealed."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "hello"
    tool.write_text("#!/bin/sh\necho sealed-hello\n")
    tool.chmod(0o755)
    ledger = f"sqlite:///{tmp_path / 'l.db'}"
    done = sealed(tmp_path / "home", ledger, "--", str(tool))
    assert done.returncode == 1 and "sealed-hello" not in done.stdout
    assert done.stderr.strip().splitlines() == [
        f"flightlog: run --sealed: {tool} needs {tool}, which the sealed command cannot see "
        f"(/tmp is private to the sealed command (empty)): name its folder with --read {tools}"
    ]
    script = tmp_path / "script"
    script.write_text(f"#!{tool}\n")
    script.chmod(0o755)
    done = sealed(tmp_path / "home", ledger, "--read", str(script), "--", str(script))
    assert done.returncode == 1 and f"needs {tool}, which the sealed command cannot see" in done.stderr
    done = sealed(tmp_path / "home", ledger, "--read", str(tools), "--", str(tool))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "sealed-hello"


def test_without_root_only_the_proxys_ports_lead_out(
    tmp_path: Path, upstreams: tuple[str, Upstream, Upstream]
) -> None:
    """Not root (capabilities dropped), user namespaces allowed: the command runs in a user and
    network namespace whose only way out is the proxy's ports, said in one line first. A client
    using the proxy variables is recorded; one that ignores them cannot connect at all (nothing
    reaches the upstream); FLIGHTLOG_HOME is hidden as with a TUN device."""
    address, plain, _ = upstreams
    probe = (
        f"curl -s -o /dev/null -w '%{{http_code}}' http://{address}:{plain.port}/fixed?c=proxied; echo;"
        f"curl -s -m 5 --noproxy '*' http://{address}:{plain.port}/fixed?c=direct; echo direct=$?;"
        'ls -A "$FLIGHTLOG_HOME" 2>/dev/null; echo home=$?'
    )
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    done = sealed(
        tmp_path / "home", ledger_url, "--agent", "nonroot", "--", "sh", "-c", probe, launcher=DROPPED
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "direct=7", "home=2"]
    assert "not root, so no TUN device: the command's only way out is the proxy's ports" in done.stderr
    assert [p for _, p, _, _ in plain.received] == ["/fixed?c=proxied"]
    ledger = open_ledger(ledger_url, (tmp_path / "home" / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            from sqlalchemy import text

            rows = c.execute(text("SELECT kind, url, agent FROM events WHERE kind = 'http.request'")).all()
    finally:
        ledger.close()
    assert [(r.url.rsplit("?", 1)[1], r.agent) for r in rows] == [("c=proxied", "nonroot")]


@pytest.mark.skipif(why_not() is not None, reason="sealing needs root here; the refusal is tested above")
def test_every_way_out_is_recorded_or_refused_and_recorded(
    tmp_path: Path, upstreams: tuple[str, Upstream, Upstream]
) -> None:
    """Run the probe sealed and compare what each client got with what the Ledger holds."""
    address, plain, tls = upstreams
    policy = tmp_path / "egress.toml"
    policy.write_text(POLICY)
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    home = tmp_path / "home"
    names = ["pypi.org", "denied.example"]
    done = sealed(
        home, ledger_url, "--agent", "sealy", "--session", "s-sealed", "--policy", str(policy),
        "--upstream-ca", str(tmp_path / "upstream-cert.pem"),
        "--", sys.executable, str(PROBE), address, str(plain.port), str(tls.port), *names,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        item = json.loads(line)
        found.setdefault(item.pop("probe"), []).append(item)
    assert found["home"] == [{"refused": "No such file or directory"}]  # absent: /tmp is private
    for probe in ("node-fetch", "node-http", "curl-noproxy", "curl-proxy"):
        (result,) = found[probe]
        assert (result["code"], result["out"]) == (0, "200"), (probe, result)
    (denied,) = found["curl-denied"]
    assert json.loads(denied["out"])["error"]["rule"] == "no-blocked-path"
    assert found["raw-http"] == [{"status": "200"}]
    assert found["raw-other"] == [{"got": ""}]  # closed: nothing came back, nothing went out
    assert found["udp"] == [{"got": None}]
    dns = {d["name"]: d for d in found["dns"]}
    assert dns["denied.example"]["rcode"] == 5  # REFUSED
    outside = sealed_probe.dns("pypi.org")
    assert (dns["pypi.org"]["rcode"], dns["pypi.org"]["addresses"]) == outside  # as outside, even a failure

    seen = [p for _, p, _, _ in [*plain.received, *tls.received]]
    assert sorted(p.split("c=")[1] for p in seen if "c=" in p) == sorted(
        ["node-fetch", "node-http", "curl-noproxy", "curl-proxy", "raw-http"]
    )
    assert not [p for p in seen if p.startswith("/blocked")]
    assert not [h for _, _, h, b in plain.received if b"SSH-2.0" in h + b]

    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        _check_ledger(ledger)
    finally:
        ledger.close()


def _check_ledger(ledger: Ledger) -> None:
    with ledger.engine.connect() as c:
        from sqlalchemy import text

        rows = c.execute(
            text("SELECT kind, method, url, agent, session, error FROM events ORDER BY seq")
        ).all()
    requests = [r for r in rows if r.kind == "http.request"]
    for client in ("node-fetch", "node-http", "curl-noproxy", "curl-proxy", "raw-http", "curl-denied"):
        (mine,) = [r for r in requests if r.url.endswith(f"c={client}")]
        assert (mine.agent, mine.session) == ("sealy", "s-sealed"), mine
    rules = sorted(r.error.split(":")[0] for r in rows if r.kind == "policy.refused")
    assert rules == ["no-blocked-path", "no-denied-host", "protocol", "protocol"]
    protocols = sorted(
        r.method for r in rows if r.kind == "policy.refused" and r.error.startswith("protocol:")
    )
    assert protocols == ["TCP", "UDP"]
    assert all(r.agent == "sealy" for r in rows if r.kind in ("policy.refused", "connection.attempt"))
    attempts = sorted(r.method for r in rows if r.kind == "connection.attempt")
    assert attempts == ["DNS", "TCP", "UDP"]


CLAIM_POLICY = """
default = "deny"

[[rule]]
name = "fixed-only"
action = "allow"
paths = ["/fixed*"]
"""


@pytest.mark.skipif(why_not() is not None, reason="sealing needs root here; the refusal is tested above")
def test_a_request_claiming_flightlogs_own_host_is_judged_where_it_goes(
    tmp_path: Path, upstreams: tuple[str, Upstream, Upstream]
) -> None:
    """`curl --noproxy '*' -H 'Host: flightlog.local' http://TARGET/...` from the seal, under
    `default = "deny"`: flightlog's own routes answer only its forward listener, so on the TUN the
    request is judged like any other, by where it goes: refused (403), nothing reaches TARGET, and
    the Ledger holds the request and its refusal under TARGET's address (the claim in the head).
    The same curl to an allowed path passes and is recorded the same way."""
    address, plain, _ = upstreams
    policy = tmp_path / "egress.toml"
    policy.write_text(CLAIM_POLICY)
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    base = f"http://{address}:{plain.port}"
    curl = "curl --noproxy '*' -s -o /dev/null -w '%{http_code}\\n' -H 'Host: flightlog.local'"
    probe = f"{curl} '{base}/leak?c=claim'; {curl} '{base}/fixed?c=allowed'"
    done = sealed(tmp_path / "home", ledger_url, "--agent", "claimer", "--policy", str(policy), "--",
                  "sh", "-c", probe)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["403", "200"]
    assert [p for _, p, _, _ in plain.received] == ["/fixed?c=allowed"]
    ledger = open_ledger(ledger_url, (tmp_path / "home" / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            from sqlalchemy import text

            rows = c.execute(text("SELECT kind, url, host, head, error FROM events ORDER BY seq")).all()
    finally:
        ledger.close()
    refused = [r for r in rows if r.kind == "policy.refused"]
    assert [(r.url, r.host) for r in refused] == [(f"{base}/leak?c=claim", address)]
    assert refused[0].error.startswith("default: ")
    requests = [r for r in rows if r.kind == "http.request"]
    assert sorted(r.url for r in requests) == [f"{base}/fixed?c=allowed", f"{base}/leak?c=claim"]
    assert all(r.host == address and b"Host: flightlog.local" in r.head for r in requests)


ASK_DNS = """
import socket, struct, sys
labels = b"".join(bytes([len(p)]) + p.encode() for p in "localhost".split("."))
query = struct.pack(">HHHHHH", 9, 0x0100, 1, 0, 0, 0) + labels + b"\\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(query, (sys.argv[1], 53))
data = s.recvfrom(4096)[0]
print(data[2:4].hex(), socket.inet_ntoa(data[-4:]) if struct.unpack(">H", data[6:8])[0] else "-")
"""


@pytest.mark.skipif(why_not() is not None, reason="sealing needs root here; the refusal is tested above")
def test_a_sealed_dns_question_is_answered_by_flightlog_whatever_server_it_names(tmp_path: Path) -> None:
    """A question sent to a name server of the command's choosing (a test host answering every
    question with 192.0.2.99) is answered by flightlog instead: the chosen server's own log holds
    nothing, and the answer is not the one it would have given."""
    seen: list[bytes] = []

    class Fake(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data, sock = self.request
            seen.append(data)
            answer = data[:2] + b"\x81\x80" + data[4:6] + b"\x00\x01\x00\x00\x00\x00" + data[12:]
            answer += b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x3c\x00\x04" + socket.inet_aton("192.0.2.99")
            sock.sendto(answer, self.client_address)

    with network_host() as host:
        with host.inside():
            server = socketserver.ThreadingUDPServer((host.address, 53), Fake)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            done = sealed(tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}", "--",
                          sys.executable, "-c", ASK_DNS, host.address)  # fmt: skip
        finally:
            server.shutdown()
            server.server_close()
    assert done.returncode == 0, done.stderr[-2000:]
    flags, address = done.stdout.split()
    assert address != "192.0.2.99" and seen == [], (flags, address)
