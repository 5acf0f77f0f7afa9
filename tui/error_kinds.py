"""What kind of failure an error text tells of, in a word or two for a list's status column.

An exchange that failed before any status came has only its error to show in the status column, and
an error is a sentence (mitmproxy's, the capture's, the door's). A word cut from it read as nonsense
(`Server conne`, `end`); the kind is named from what the sentence says happened, first match wins, and
the whole sentence is shown in the exchange's detail.
"""

from __future__ import annotations

import re
from typing import Final

KINDS: Final = (
    ("client left", re.compile(r"client (left|disconnected)", re.I)),
    ("stopped", re.compile(r"the proxy (was stopping|stopped)", re.I)),
    ("trailers", re.compile(r"trailers", re.I)),
    ("timeout", re.compile(r"timed? ?out|timeout", re.I)),
    ("dns", re.compile(r"name or service|getaddrinfo|resolv|no address associated|nodename", re.I)),
    ("tls", re.compile(r"\btls\b|\bssl\b|certificate|handshake", re.I)),
    ("refused", re.compile(r"refused|cannot connect|error connecting|failed to connect", re.I)),
    ("reset", re.compile(r"\breset\b", re.I)),
    ("cut short", re.compile(r"cut short|incomplete|peer closed|closed connection|ended before", re.I)),
    ("killed", re.compile(r"\bkilled\b", re.I)),
    ("protocol", re.compile(r"protocol error|invalid http|malformed|bad request line", re.I)),
)
"""(kind, what its error says), tried in order: the more specific story first (a client that left
while the proxy stopped is the client's leaving; a name that did not resolve is not a refusal, though
mitmproxy says "Error connecting" of both)."""
OTHER: Final = "error"
CODE: Final = re.compile(r"^\s*(-?\d{1,6}|[A-Za-z][\w.-]{0,31}):\s")
"""An error that opens with its own code or name: an MCP error's JSON-RPC code (`-32602: missing
argument b`), the rule of a policy refusal (`no-gone-host: host gone.example is retired`) or a limit of
the door's (`uses: spent`). A sentence never opens with one word and a colon."""


def error_kind(error: str) -> str:
    """The code an error opens with, else the kind of failure it tells of (`refused`, `timeout`,
    `client left`), else `error`."""
    if code := CODE.match(error):
        return code.group(1)
    return next((kind for kind, said in KINDS if said.search(error)), OTHER)
