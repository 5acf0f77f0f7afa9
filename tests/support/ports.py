"""Ports for tests that start a proxy on a port of their own choosing.

`flightlog proxy --listen P` also takes P+1 and P+2 (the model API listeners). A test picks P here and
lets it go; the proxy it starts binds P a second or so later. In between, nothing may take those ports
by chance: not an outgoing connection (the block lies below the kernel's ephemeral range) and not a
proxy started by another test with `--listen 127.0.0.1:0` (the blocks lie below the range such proxies
pick from, `flightlog.ports.free_ports`: 10000 up to the ephemeral range).
"""

from __future__ import annotations

import random

from flightlog import ports

LOW, HIGH = 2000, 10000
"""Where test blocks lie: above the well-known ports, below the proxies' own picks."""


def free_block(size: int = 3) -> int:
    """A port P with P .. P+size-1 all free now."""
    for _ in range(500):
        start = random.randrange(LOW, HIGH - size)
        if all(ports.is_free("127.0.0.1", start + i) for i in range(size)):
            return start
    raise AssertionError(f"no block of {size} free ports in {LOW}-{HIGH}")
