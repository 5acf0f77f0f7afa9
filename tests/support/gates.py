"""Causal gates between a test's client and its in-process upstream: "not held back" without a clock.

A gated answer (`gate=KEY` in the request's query) sends its first chunk, then waits until the client
opens KEY before it sends the rest. A client opens the gate once it holds that first chunk (or once it
has left), so when the gate was opened, the proxy in between passed chunk 1 on before the upstream had
sent chunk 2: the stream was not held back, whatever the machine's load. A proxy that buffers never lets
the client open it; the upstream then gives up after `WAIT` seconds, sends the rest, and notes that the
gate timed out (`opened_in_time(KEY)` is False), which the test asserts on.
"""

from __future__ import annotations

import threading
import uuid
from urllib.parse import parse_qs

WAIT = 20.0
"""Seconds an upstream waits for its client before sending the rest anyway (a test's failure, not a hang)."""

_lock = threading.Lock()
_gates: dict[str, threading.Event] = {}
_in_time: dict[str, bool] = {}
_noted = threading.Condition()


def new_key() -> str:
    """A fresh gate name, for one request."""
    return f"g{uuid.uuid4().hex[:12]}"


def _event(key: str) -> threading.Event:
    with _lock:
        return _gates.setdefault(key, threading.Event())


def key_of(target: str | bytes) -> str | None:
    """The gate named in a request target's query (`...?gate=KEY`), or None."""
    text = target.decode("latin-1") if isinstance(target, bytes) else target
    found = parse_qs(text.partition("?")[2]).get("gate")
    return found[0] if found else None


def open_gate(key: str) -> None:
    """The client's signal: it holds the first chunk (or has left); the upstream may send the rest."""
    _event(key).set()


def hold(key: str) -> None:
    """The upstream's side: wait for the client's signal (at most `WAIT` seconds) and note whether it came."""
    came = _event(key).wait(WAIT)
    with _noted:
        _in_time[key] = came
        _noted.notify_all()


def opened_in_time(key: str) -> bool | None:
    """Whether the upstream's wait on KEY ended by the client's signal (once the upstream has noted it:
    its thread may still be on its way); None when it never waited."""
    with _noted:
        _noted.wait_for(lambda: key in _in_time, WAIT + 10)
        return _in_time.get(key)
