"""The benches' local upstream: nginx serving N-byte files, or a small asyncio server when nginx is missing.

On this 2-core machine the upstream's CPU per request is spent on the same cores as the proxies
under test: a Python upstream costs several times what nginx does, and that cost caps what a second
proxy worker can add (`bench.workers`). nginx (apt `nginx-light`, installed when running as root) is
the upstream the issue's own figures were taken with; without it the asyncio server answers the same
bytes and the bench says so in one line. `--upstream asyncio|nginx` on a bench picks one.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from argparse import ArgumentParser
from collections.abc import Iterable
from pathlib import Path

from bench._needs import Skip, need
from bench._proc import process_cpu

KINDS = ("auto", "nginx", "asyncio")
ROUNDS = 3
"""Interleaved rounds a load benchmark runs by default: issue 14 takes its ratios from at least three."""


def add_load_options(parser: ArgumentParser, seconds: float, what: str = "measured") -> None:
    """`--seconds`, `--rounds` and `--upstream`, as every load benchmark behind wrk takes them."""
    parser.add_argument("--seconds", type=float, default=seconds, help=f"{what} seconds per run")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="interleaved rounds")
    parser.add_argument("--upstream", choices=KINDS, default="auto", help="nginx if it can be had (auto)")


NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    default_type application/octet-stream;
    client_body_temp_path {root}/tmp-body;
    proxy_temp_path {root}/tmp-proxy;
    fastcgi_temp_path {root}/tmp-fastcgi;
    uwsgi_temp_path {root}/tmp-uwsgi;
    scgi_temp_path {root}/tmp-scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root}/www;
        location / {{ }}
    }}
}}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def body(size: int) -> bytes:
    """The answer of `/SIZE`: text lines, so a proxy's text handling sees what an API would send."""
    return (b"x" * 63 + b"\n") * (size // 64) + b"y" * (size % 64)


class Upstream:
    """A running upstream: its port, its kind, its process, its scratch folder."""

    def __init__(self, kind: str, port: int, proc: subprocess.Popen[bytes], root: Path | None) -> None:
        self.kind, self.port, self.proc, self.root = kind, port, proc, root

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) the upstream process has used so far."""
        return process_cpu(self.proc.pid) or 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def scratch_folder(work: Path) -> Path:
    """`work` when it is a bench run's own scratch folder (`tempfile.mkdtemp(prefix="flightlog-...")`
    in the system's temporary folder), the only kind `stop_upstream` may delete; ValueError else."""
    resolved = work.resolve()
    if resolved.parent != Path(tempfile.gettempdir()).resolve() or not resolved.name.startswith("flightlog-"):
        raise ValueError(f"not a bench scratch folder (flightlog-* in {tempfile.gettempdir()}): {work}")
    return resolved


def stop_upstream(upstream: Upstream, work: Path) -> None:
    """End a bench run: the upstream stopped, the run's scratch folder gone (only such a folder:
    a path given by mistake, such as the checkout, is refused before anything is stopped)."""
    folder = scratch_folder(work)
    upstream.stop()
    shutil.rmtree(folder, ignore_errors=True)


def start_upstream(sizes: Iterable[int], kind: str = "auto") -> Upstream:
    """An upstream answering `GET /SIZE` for each of `sizes` with `body(SIZE)`, keep-alive, on a free
    port. `auto`: nginx when it is here or can be installed, else the asyncio server (one line says so)."""
    if kind in ("auto", "nginx"):
        try:
            return _nginx(need("nginx", "nginx-light"), list(sizes))
        except Skip as e:
            if kind == "nginx":
                raise
            print(f"bench: upstream is the asyncio server ({e})", flush=True)
    port = free_port()
    code = f"from bench._upstream import serve_upstream; serve_upstream({port})"
    upstream = Upstream("asyncio", port, subprocess.Popen([sys.executable, "-c", code]), None)
    wait_listening(port, upstream.proc, "upstream", 15)
    return upstream


def _nginx(binary: str, sizes: list[int]) -> Upstream:
    root = Path(tempfile.mkdtemp(prefix="flightlog-bench-nginx-"))
    (root / "www").mkdir()
    for size in sizes:
        (root / "www" / str(size)).write_bytes(body(size))
    port = free_port()
    (root / "nginx.conf").write_text(NGINX_CONF.format(root=root, port=port))
    proc = subprocess.Popen(
        [binary, "-p", str(root), "-c", str(root / "nginx.conf"), "-e", str(root / "error.log")]
    )
    upstream = Upstream("nginx", port, proc, root)
    wait_listening(port, proc, "upstream", 15)
    return upstream


def wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30) -> None:
    """Return once `port` takes a connection; `what` exiting first or never listening is an error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the {what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the {what} is not listening on {port}")


# -- the asyncio server -----------------------------------------------------------------------------


class _Answer(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, _, self.buf = self.buf.partition(b"\r\n\r\n")
            size = int(head.split(b" ", 2)[1].rsplit(b"/", 1)[-1] or b"0")
            answer = BODIES.get(size) or BODIES.setdefault(size, body(size))
            self.transport.write(  # type: ignore[attr-defined]
                b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s"
                % (len(answer), answer)
            )


BODIES: dict[int, bytes] = {}


def serve_upstream(port: int) -> None:
    """Entry of the asyncio upstream's process."""

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Answer, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())
