"""Every port a proxy listens on, made concrete before mitmproxy starts, and held until it listens.

The model APIs' reverse listeners sit next to the forward port: `--listen 127.0.0.1:8080` gives
8081 (OpenAI) and 8082 (Anthropic), so a base URL written into a config file stays true across
restarts, and `flightlog env` without a running proxy can print what the default one uses. A port
that is taken is one clear error naming the listener, never a silent move elsewhere: a client still
pointed at the old port would send its API key to whatever holds it now. `--listen HOST:0` picks
free ports for all of them here, in the CLI, so several processes (`--workers`) can share the same
concrete ports and `proxy.json` names them before the proxy runs. Every planned port stays bound by
this process until a listener takes it (`addons.listening`): a port checked free and let go would be
anyone's in the seconds mitmproxy takes to start. Picked ones come from below the kernel's ephemeral
range, where outgoing connections never land.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from addons.listening import HeldPorts, bind_all
from flightlog.errors import CommandError
from flightlog.port_owner import taken_line


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel hands out for `bind(0)` and outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(host: str, count: int, held: HeldPorts) -> list[int]:
    """`count` distinct ports free on `host`, each bound exclusively into `held`.

    Picked at random below the kernel's ephemeral range (no outgoing connection takes one); bound
    without SO_REUSEADDR, so no other process can bind one until `held` lets it go, not another
    flightlog picking at the same moment, not a server asking for address reuse.
    """
    low, _ = ephemeral_range()
    first = 10000 if low > 10000 + 64 * count else 1024
    picked: list[int] = []
    for _ in range(200 * count):
        if len(picked) == count:
            break
        port = random.randrange(first, low)
        if port in picked:
            continue
        try:
            held.add(host, port, bind_all(host, port, exclusive=True))
        except OSError:
            continue
        picked.append(port)
    while len(picked) < count:  # a crowded range: let the kernel choose
        sockets = bind_all(host, 0, exclusive=True)
        picked.append(int(sockets[0].getsockname()[1]))
        held.add(host, picked[-1], sockets)
    return picked


def is_free(host: str, port: int) -> bool:
    """Nobody holds `port` on `host` now (checked as mitmproxy binds: with SO_REUSEADDR)."""
    try:
        sockets = bind_all(host, port, exclusive=False)
    except OSError:
        return False
    for sock in sockets:
        sock.close()
    return True


def _hold_named(host: str, port: int, held: HeldPorts) -> bool:
    """Bind `port` into `held`, exclusively if it can be, else as mitmproxy would (SO_REUSEADDR: the
    last run's TIME_WAIT connections on it refuse an exclusive bind); False if someone holds it."""
    for exclusive in (True, False):
        try:
            held.add(host, port, bind_all(host, port, exclusive=exclusive))
        except OSError:
            continue
        return True
    return False


@dataclass
class PortPlan:
    """The forward port, one port per named listener, the free ones for `...@0` modes, and every
    one of them held (`held`: the proxy listens on these sockets; close it if the proxy never runs)."""

    forward: int
    named: list[int]
    extra: list[int]
    held: HeldPorts


def plan_ports(host: str, port: int, names: Sequence[str], free: int = 0) -> PortPlan:
    """The forward port, one port per named listener (port + 1, + 2, ..., each checked free; all
    free ones when `port` is 0), and `free` more free ones (for `--mode ...@0`), all distinct and
    all held; a taken one is one clear error and nothing stays held."""
    held = HeldPorts()
    try:
        if port == 0:
            forward, *rest = free_ports(host, 1 + len(names) + free, held)
            return PortPlan(forward, rest[: len(names)], rest[len(names) :], held)
        if not _hold_named(host, port, held):
            raise CommandError(
                taken_line(
                    port,
                    "(--listen)",
                    f"--listen {host or '0.0.0.0'}:PORT with another port (port 0: free ones)",
                )
            )
        ports = next_to(port, len(names))
        for name, taken in zip(names, ports, strict=True):
            if not _hold_named(host, taken, held):
                raise CommandError(
                    taken_line(
                        taken,
                        f"for the {name} listener (--listen port + {taken - port})",
                        "free it, --listen on another port, or --no-ai-listeners",
                    )
                )
        return PortPlan(port, ports, free_ports(host, free, held), held)
    except BaseException:
        held.close()
        raise


def next_to(port: int, count: int) -> list[int]:
    """The ports after the forward one: port + 1, port + 2, ... (one clear error past 65535)."""
    ports = [port + i for i in range(1, count + 1)]
    if ports and ports[-1] > 65535:
        raise CommandError(f"--listen port {port}: the model API listeners need {count} ports above it")
    return ports


def concrete_modes(modes: Sequence[str], ports: Sequence[int]) -> tuple[str, ...]:
    """Each `...@0` mode with the next of `ports` instead of 0 (the others as given)."""
    left = iter(ports)
    return tuple(f"{m[:-2]}@{next(left)}" if m.endswith("@0") else m for m in modes)
