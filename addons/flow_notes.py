"""What flightlog's addons note on a mitmproxy flow, declared in one place, each note typed.

The addons speak about one flow through mitmproxy's per-flow dict, `flow.metadata`: capture notes
the Exchange it made, the egress policy that it judged the request, the stopping proxy that it cut
the flow, and so on. Each note is a `Note` here, with its key, the type of its value and who writes
and reads it; no addon spells a key of its own, so a key is renamed, or its reader found, in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, overload

if TYPE_CHECKING:
    from mitmproxy.flow import Flow

    from addons.wire.departures import ClientConnection
    from recording.records import Exchange


class Note[T]:
    """One note on a flow: its key in `flow.metadata` and the type of its value."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    @overload
    def get(self, flow: Flow) -> T | None: ...
    @overload
    def get(self, flow: Flow, default: T) -> T: ...
    def get(self, flow: Flow, default: T | None = None) -> T | None:
        """The note's value, or `default` when the flow has none."""
        return flow.metadata.get(self.key, default)

    def need(self, flow: Flow) -> T:
        """The note's value, which the caller knows is there (a KeyError if it is not)."""
        return flow.metadata[self.key]

    def put(self, flow: Flow, value: T) -> T:
        """Note `value` on the flow; it is returned, for `x = NOTE.put(flow, make())`."""
        flow.metadata[self.key] = value
        return value

    def on(self, flow: Flow) -> bool:
        """Whether the flow carries the note (whatever its value)."""
        return self.key in flow.metadata

    def pop(self, flow: Flow) -> T | None:
        """The note's value, taken off the flow (None when it had none)."""
        return flow.metadata.pop(self.key, None)


EXCHANGE: Final[Note[Exchange]] = Note("flightlog.exchange")
"""Capture's record of the flow's exchange: present exactly when capture records the flow (read by
the egress policy, WebSockets and sync paths, which leave a flow without it alone)."""
RECORDED: Final[Note[bool]] = Note("flightlog.recorded")
"""Capture read the request whole and queued its record."""
SKIP: Final[Note[bool]] = Note("flightlog.skip")
"""Capture leaves the flow unrecorded (the proxy's own routes set it too)."""
LOCAL: Final[Note[bool]] = Note("flightlog.local")
"""The flow is for flightlog's own routes (`flightlog.local`), answered by the proxy itself."""
COMMITTED: Final[Note[bool]] = Note("flightlog.committed")
"""Sync paths committed the request before it was forwarded (capture does not queue it again)."""
CLIENT: Final[Note[ClientConnection]] = Note("flightlog.client")
"""The client connection the flow came on, as capture's departures track it."""
DELIVERY: Final[Note[Any]] = Note("flightlog.delivery")
"""What was passed on to the client of a streamed answer (capture): an `addons.wire.flow_records.Delivery`,
not named as a type here since flow_records reads its own note (AS_LISTENER) from this module."""
TRAILERS: Final[Note[Any]] = Note("flightlog.trailers")
"""The trailers of an answer that ended its stream with an error (capture)."""
REFUSED: Final[Note[bool]] = Note("flightlog.refused")
"""Capture refused the answer mid-stream (the client's stream was killed)."""
CUT: Final[Note[bool]] = Note("flightlog.cut")
"""The stopping proxy cut the flow (its client's connection closed)."""
CLAIM: Final[Note[str]] = Note("flightlog.claim")
"""A flow's identity claim that the seal set aside (its userinfo text), for the recorded head."""
AS_LISTENER: Final[Note[Any]] = Note("flightlog.as_listener")
"""The reverse listener a forward request is served as (`addons.listener_hops`)."""
WS_INDEX: Final[Note[int]] = Note("flightlog.ws_index")
"""How many WebSocket messages of the flow were recorded so far."""
JUDGED: Final[Note[bool]] = Note("flightlog.egress.judged")
"""The egress policy judged the request already (it is not judged twice)."""
MODEL: Final[Note[str]] = Note("flightlog.egress.model")
"""The flow id of a model call whose budget the egress policy counts when its answer ends."""
PLAYBACK: Final[Note[str]] = Note("flightlog_playback")
"""The replay token a served playback answered with (`addons.serve_replay`)."""
VERDICT: Final[Note[Any]] = Note("flightlog.verdict")
"""The egress judge's verdict on the flow (an `addons.verdicts.Verdict`, read with `of_flow`, which
checks its type): the choke point forwards nothing without one."""
VERDICT_MESSAGE: Final[Note[Any]] = Note("flightlog.verdict.message")
"""The last client WebSocket message the egress judge saw (the choke point refuses one it did not)."""
CHOKE_REFUSED: Final[Note[bool]] = Note("flightlog.choke.refused")
"""The choke point refused the flow already (its refusal is filed once)."""
