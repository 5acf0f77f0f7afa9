"""What runs inside `flightlog run --sealed` in the tests: every way out a program may try, each
reported as one JSON line (`{"probe": name, ...}`), so the test can compare with what was recorded.

    python sealed_probe.py HOST HTTP_PORT TLS_PORT
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
from typing import Any


def report(probe: str, **found: Any) -> None:
    print(json.dumps({"probe": probe, **found}), flush=True)


def raw_http(host: str, port: int) -> None:
    """A raw socket speaking HTTP by hand: caught by the TUN, recorded as HTTP."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(
            f"GET /fixed?c=raw-http HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    report("raw-http", status=data.split(b" ", 2)[1].decode() if data else None)


def raw_other(host: str, port: int) -> None:
    """A raw socket speaking no HTTP: refused (closed at once), nothing forwarded."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")
        try:
            data = s.recv(100)
        except OSError as e:
            data = str(e).encode()
    report("raw-other", got=data.decode(errors="replace"))


def udp(host: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(2)
        s.sendto(b"ping", (host, 9999))
        try:
            got = s.recvfrom(100)[0].decode(errors="replace")
        except TimeoutError:
            got = None
    report("udp", got=got)


def dns(name: str) -> tuple[int | None, list[str]]:
    """A DNS question by hand to the resolver this namespace is told to use: (its answer code and
    addresses), or (None, [why]) when no answer came."""
    try:
        return _dns(name)
    except OSError as e:
        return None, [type(e).__name__]


def _dns(name: str) -> tuple[int, list[str]]:
    with open("/etc/resolv.conf") as conf:
        server = next(line.split()[1] for line in conf if line.startswith("nameserver"))
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split("."))
    query = struct.pack(">HHHHHH", 7, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(5)
        s.sendto(query, (server, 53))
        data = s.recvfrom(4096)[0]
    rcode, count = struct.unpack(">H", data[2:4])[0] & 0xF, struct.unpack(">H", data[6:8])[0]
    addresses = []
    at = 12 + len(labels) + 5
    for _ in range(count):
        at += 2 if data[at] & 0xC0 == 0xC0 else len(data[at:].split(b"\0", 1)[0]) + 1
        kind, _, _, size = struct.unpack(">HHIH", data[at : at + 10])
        if kind == 1:
            addresses.append(socket.inet_ntoa(data[at + 10 : at + 14]))
        at += 10 + size
    return rcode, sorted(addresses)


def run(probe: str, command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    report(probe, code=done.returncode, out=done.stdout.strip()[-300:], err=done.stderr.strip()[-300:])


def main() -> None:
    host, port, tls_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    plain, tls = f"http://{host}:{port}", f"https://{host}:{tls_port}"
    try:
        report("home", entries=sorted(os.listdir(os.environ["FLIGHTLOG_HOME"])))
    except OSError as e:
        report("home", refused=e.strerror)
    node_fetch = f"fetch('{tls}/fixed?c=node-fetch').then(r => console.log(r.status))"
    run("node-fetch", ["node", "-e", node_fetch])
    node_http = (
        f"require('http').get('{plain}/fixed?c=node-http', r => {{ console.log(r.statusCode); r.resume() }})"
    )
    run("node-http", ["node", "-e", node_http])
    run(
        "curl-noproxy",
        [
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--noproxy",
            "*",
            f"{plain}/fixed?c=curl-noproxy",
        ],
    )
    run("curl-proxy", ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"{plain}/fixed?c=curl-proxy"])
    run("curl-denied", ["curl", "-s", "--noproxy", "*", f"{plain}/blocked?c=curl-denied"])
    raw_http(host, port)
    raw_other(host, port)
    udp(host)
    for name in sys.argv[4:]:
        rcode, addresses = dns(name)
        report("dns", name=name, rcode=rcode, addresses=addresses)


if __name__ == "__main__":
    main()
