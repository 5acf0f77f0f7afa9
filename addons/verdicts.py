"""The judge's verdicts, as the choke point reads them: what was judged, and where it may go.

The egress judge (`addons.egress_policy`, `addons.egress_connections`) leaves a `Verdict` on
everything it judged before mitmproxy may forward it; the choke point (`addons.choke_point`), the
last addon of the chain, lets nothing through that does not carry one. So a path the judge was
not asked about is refused, not passed: the judge decides, the choke point only checks that it did.

Where a verdict is kept, by what mitmproxy hands over:

- an HTTP request (every listener, inside a tunnel too), a TCP or UDP relay's flow, a DNS
  question: in the flow's metadata (`flow_notes.VERDICT`), naming the destination judged (the address
  mitmproxy will connect to, not the Host header), so a destination changed after the judgement
  is not the one judged;
- a WebSocket message from the client: the message itself, marked in the flow (`flow_notes.VERDICT_MESSAGE`);
- an upstream connection about to open (`server_connect`): in the `Verdicts` book, by the server
  connection's id; a request or tunnel allowed to a destination leaves a permit for its client
  connection and that destination, which the connection's own judgement reads first.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from addons.flow_notes import VERDICT

if TYPE_CHECKING:
    from mitmproxy import connection
    from mitmproxy import connection as mconnection

"""The last WebSocket message (from the client) the judge looked at."""
NOT_JUDGED: Final = "not judged"
"""The rule a refusal by the choke point names: the judge left no verdict."""
NO_POLICY: Final = "no policy"
OWN: Final = "flightlog-own"
"""The rule of a verdict on flightlog's own traffic: its routes' WebSocket end, a hop to one of
its own listeners (which judges what reaches it)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The judge's word on one flow, message or connection: `allow` or `deny`, by which rule, for
    which destination (host as mitmproxy will connect to it, and port)."""

    action: Literal["allow", "deny"]
    rule: str
    host: str = ""
    port: int | None = None

    @property
    def allowed(self) -> bool:
        return self.action == "allow"

    def covers(self, host: str, port: int | None) -> bool:
        """Whether this verdict allows going to `host:port` (the destination it was given for)."""
        return self.allowed and self.host == host and self.port == port


def of_flow(flow: Any) -> Verdict | None:
    """The verdict a flow carries, if any (anything else under the key is no verdict)."""
    found = VERDICT.get(flow)
    return found if isinstance(found, Verdict) else None


class Verdicts:
    """Connection verdicts, shared by the judge and the choke point of one proxy.

    `permit` notes that a request or tunnel from `client` was allowed to `host:port`; `connection`
    files the judge's verdict on one server connection about to open, which the choke point takes
    (`take`) in the same `server_connect` round, so nothing is kept past it."""

    def __init__(self) -> None:
        self._permits: weakref.WeakKeyDictionary[connection.Client, set[tuple[str, int]]] = (
            weakref.WeakKeyDictionary()
        )
        self._connections: dict[str, Verdict] = {}

    def permit(self, client: connection.Client, host: str, port: int) -> None:
        self._permits.setdefault(client, set()).add((host, port))

    def permitted(self, client: connection.Client, host: str, port: int) -> bool:
        found = self._permits.get(client) if self._permits else None
        return found is not None and (host, port) in found

    def connection(self, server: mconnection.Server, verdict: Verdict) -> None:
        self._connections[server.id] = verdict

    def take(self, server: mconnection.Server) -> Verdict | None:
        return self._connections.pop(server.id, None)
