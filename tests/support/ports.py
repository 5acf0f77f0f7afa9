"""Ports for tests that start a proxy on a port of their own choosing.

`flightlog proxy --listen P` also takes P+1 and P+2 (the model API listeners), so a test that picks P
with `bind(0)` gets an ephemeral port whose neighbours any outgoing connection on the machine may hold
a moment later (a busy machine did: "port P+1 for the openai listener is in use"). A block picked here
lies below the kernel's ephemeral range, where nothing takes a port unless it asks for that very port.
"""

from __future__ import annotations

from addons.held_ports import HeldPorts
from flightlog import ports


def free_block(size: int = 3) -> int:
    """A port P with P .. P+size-1 all free now, below the ephemeral range."""
    for _ in range(50):
        held = HeldPorts()
        try:
            (start,) = ports.free_ports("127.0.0.1", 1, held)
        finally:
            held.close()
        if start + size <= 65535 and all(ports.is_free("127.0.0.1", start + i) for i in range(size)):
            return start
    raise AssertionError("no block of free ports")
