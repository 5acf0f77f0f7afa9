"""Every port a proxy listens on, made concrete before mitmproxy starts.

The model APIs' reverse listeners sit next to the forward port: `--listen 127.0.0.1:8080` gives
8081 (OpenAI) and 8082 (Anthropic), so a base URL written into a config file stays true across
restarts, and `flightlog env` without a running proxy can print what the default one uses. A port
that is taken is one clear error naming the listener, never a silent move elsewhere: a client still
pointed at the old port would send its API key to whatever holds it now. `--listen HOST:0` picks
free ports for all of them here, in the CLI, so several processes (`--workers`) can share the same
concrete ports and `proxy.json` names them before the proxy runs; they are drawn from below the
kernel's ephemeral range, which nothing else on the machine takes by chance in the moment between
the pick here and mitmproxy's bind.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from flightlog.errors import CommandError
from flightlog.port_owner import taken_line


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's listeners do
    try:
        sock.bind((host or "0.0.0.0", port))
    except OSError:
        sock.close()
        raise
    return sock


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out for `bind(0)` and outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(host: str, count: int) -> list[int]:
    """`count` distinct ports free on `host` now, held together while picking.

    Picked at random below the kernel's ephemeral range: a port chosen here is released before
    mitmproxy binds it, and in that window any outgoing connection on the machine could take an
    ephemeral one; nothing takes a port below the range unless it asks for that very port.
    """
    low, _ = ephemeral_range()
    first = 10000 if low > 10000 + 64 * count else 1024
    picked: list[int] = []
    with ExitStack() as stack:
        for _ in range(200 * count):
            if len(picked) == count:
                break
            port = random.randrange(first, low)
            if port in picked:
                continue
            try:
                stack.enter_context(_bind(host, port))
            except OSError:
                continue
            picked.append(port)
        while len(picked) < count:  # a crowded range: let the kernel choose
            picked.append(int(stack.enter_context(_bind(host, 0)).getsockname()[1]))
    return picked


def is_free(host: str, port: int) -> bool:
    try:
        _bind(host, port).close()
    except OSError:
        return False
    return True


def next_to(port: int, count: int) -> list[int]:
    """The ports after the forward one: port + 1, port + 2, ... (one clear error past 65535)."""
    ports = [port + i for i in range(1, count + 1)]
    if ports and ports[-1] > 65535:
        raise CommandError(f"--listen port {port}: the model API listeners need {count} ports above it")
    return ports


def plan_ports(host: str, port: int, names: Sequence[str], free: int = 0) -> tuple[int, list[int], list[int]]:
    """The forward port, one port per named listener (port + 1, + 2, ..., each checked free; all
    free ones when `port` is 0), and `free` more free ones (for `--mode ...@0`), all distinct."""
    if port == 0:
        forward, *rest = free_ports(host, 1 + len(names) + free)
        return forward, rest[: len(names)], rest[len(names) :]
    if not is_free(host, port):
        raise CommandError(
            taken_line(
                port, "(--listen)", f"--listen {host or '0.0.0.0'}:PORT with another port (port 0: free ones)"
            )
        )
    ports = next_to(port, len(names))
    for name, taken in zip(names, ports, strict=True):
        if not is_free(host, taken):
            raise CommandError(
                taken_line(
                    taken,
                    f"for the {name} listener (--listen port + {taken - port})",
                    "free it, --listen on another port, or --no-ai-listeners",
                )
            )
    extra = [p for p in free_ports(host, free + len(ports)) if p not in ports][:free]
    return port, ports, extra


def concrete_modes(modes: Sequence[str], ports: Sequence[int]) -> tuple[str, ...]:
    """Each `...@0` mode with the next of `ports` instead of 0 (the others as given)."""
    left = iter(ports)
    return tuple(f"{m[:-2]}@{next(left)}" if m.endswith("@0") else m for m in modes)
