"""What the client got, in the words of its answer's `error`: pure functions of what the hooks know.

An answer event's status, head and payload are the upstream's answer (as far as it came); its
`client_bytes` and `client_left_ms` say what reached the client. The error says the rest in one
line: a client that left before the end (and how much it had), a failure that reached the client as
the proxy's own error answer, an exchange the stopping proxy refused or cut.
"""

from __future__ import annotations

from addons.wire.departures import ClientConnection
from addons.wire.flow_records import Delivery

CLIENT_DISCONNECTED = "Client disconnected."
"""mitmproxy's error when a client's connection ended before its answer did."""
PROXY_ANSWERED = "; the client was sent the proxy's error answer instead"
"""Said of a failure that reached the client as mitmproxy's own error answer (its 502), not as the
upstream's answer (whose status, if a head came, is the event's)."""
STOPPING = "The proxy was stopping: the request was refused before it went upstream"
CUT = "The proxy stopped before the answer was complete"


def left_early(delivery: Delivery | None, client: ClientConnection | None) -> str | None:
    """For an answer read to its end: the client's leaving, if it left before getting all of it."""
    if client is None or client.left_at is None:
        return None
    if delivery is None:
        return "The client left before the answer was sent; the whole answer was read for the Ledger"
    if delivery.sent >= delivery.total:
        return None  # it had every byte (an SDK closing at `[DONE]`, before the stream's end)
    return (
        f"The client left after {delivery.sent} of the answer's {delivery.total} bytes; "
        "the whole answer was read for the Ledger"
    )


def failed(
    message: str,
    delivery: Delivery | None,
    client: ClientConnection | None,
    *,
    answered: bool,
    cut: bool,
    killed: bool,
) -> str:
    """For an answer that did not end: mitmproxy's `message`, said with what the client got.
    `answered`: a head came from the upstream; `cut`: the stopping proxy ended it; `killed`: the
    capture ended it itself (its message says what the client got)."""
    sent = delivery.sent if delivery is not None else 0
    if cut:
        return f"{CUT} ({sent} bytes of it had gone to the client)" if answered else CUT
    if client is not None and client.gone:
        if not answered:
            return message
        if client.expired:
            return (
                f"The client left after {sent} bytes of the answer; it was still arriving "
                f"{client.grace:g} s later and was read no further"
            )
        if message.startswith(CLIENT_DISCONNECTED):
            return f"The client left after {sent} bytes of the answer; the proxy stopped before its end"
        return f"{message} (the client had left after {sent} bytes)"
    if delivery is None and not killed:
        return message + PROXY_ANSWERED  # no byte of the answer had gone out: mitmproxy answered instead
    return message
