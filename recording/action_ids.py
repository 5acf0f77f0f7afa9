"""An exchange's action id: mitmproxy's flow id laid out as a UUIDv7 of the flow's creation time.

The Ledger looks events up by `event_id` and `action_id` through B-tree indexes on both engines.
mitmproxy's flow ids are UUID4s, random: each new event landed on a random leaf page of both
indexes, and a commit wrote every page it touched to the WAL again (SQLite: ~1.6 pages, ~6.6 KiB,
an event, in a 400,000-event Ledger; PostgreSQL writes a full image of each page first touched
after a checkpoint), more of them the more the indexes outgrow the cache. Laid out as a UUIDv7
(RFC 9562: 48 bits of Unix milliseconds first), the ids of events recorded together sort together,
and a commit adds them at the indexes' right edge, however large the Ledger grows.

The id is still derived from the flow alone (its id and its creation time, both fixed when mitmproxy
creates it), so a retried write of an exchange is the same write; it keeps 74 of the flow id's random
bits, so two flows created in the same millisecond differ as two UUID4s would in practice. A flow id
that is not a UUID4 (a flow made some other way) is kept as it is.
"""

from __future__ import annotations

import time
import uuid
from typing import Final

_MS_MASK: Final = (1 << 48) - 1


def action_id(flow_id: str, created: float) -> str:
    """`flow_id` (a UUID4 string) as the UUIDv7 of `created` (seconds since the epoch) that keeps
    its random bits: string slicing only, as it runs on the proxy's event loop for every request."""
    if len(flow_id) != 36 or flow_id[14] != "4" or flow_id[19] not in "89ab" or flow_id[23] != "-":
        return flow_id
    ms = f"{int(created * 1000) & _MS_MASK:012x}"
    return f"{ms[:8]}-{ms[8:]}-7{flow_id[15:]}"


def new_action_id(prefix: str = "", now: float | None = None) -> str:
    """A fresh action id for an action flightlog starts itself (a dispatch, a replay), not a flow:
    `prefix` and 32 hex digits, a random UUID4 laid out as the UUIDv7 of `now` (default: the clock),
    so these too sort in the order they were made and land at the id indexes' right edge."""
    made = action_id(str(uuid.uuid4()), time.time() if now is None else now)
    return prefix + made.replace("-", "")
