"""Action ids are mitmproxy's flow ids laid out as UUIDv7s of the flow's creation time
(recording.action_ids): stable for one flow, in creation order across flows, and keeping the
flow id's random bits, so the Ledger's id indexes take new events at their end."""

from __future__ import annotations

import random
import uuid

from recording.action_ids import action_id, new_action_id

T0 = 1_796_000_000.0  # 2026-11-30


def test_a_flow_id_becomes_the_uuid7_of_its_creation_time_keeping_its_random_bits() -> None:
    """The first 48 bits are the creation time in milliseconds, the version is 7 and the variant
    RFC 9562's; the flow id's characters after its version digit are kept as they were."""
    flow = str(uuid.UUID(int=random.Random(1).getrandbits(128), version=4))
    made = action_id(flow, T0 + 0.123456)
    parsed = uuid.UUID(made)
    assert str(parsed) == made
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122
    assert parsed.int >> 80 == int(T0 * 1000) + 123
    assert made[15:] == flow[15:]


def test_one_flow_always_gets_the_same_id() -> None:
    """Derived from the flow alone: a retried write of the same exchange is the same write."""
    flow = str(uuid.uuid4())
    assert action_id(flow, T0) == action_id(flow, T0)
    assert action_id(flow, T0) != action_id(str(uuid.uuid4()), T0)


def test_ids_sort_in_creation_order_whatever_the_flow_ids() -> None:
    """2,000 random UUID4 flows, one every 0.7 ms: their action ids sort as the flows were created
    (those in the same millisecond in any order), where the flow ids themselves sort at random."""
    rng = random.Random(7)
    flows = [(T0 + i * 0.0007, str(uuid.UUID(int=rng.getrandbits(128), version=4))) for i in range(2000)]
    ids = [action_id(flow, created) for created, flow in flows]
    by_id = sorted(range(len(ids)), key=ids.__getitem__)
    assert [int(flows[i][0] * 1000) for i in by_id] == sorted(int(c * 1000) for c, _ in flows)
    assert len(set(ids)) == len(ids)
    assert sorted(flow for _, flow in flows) != [flow for _, flow in flows]


def test_a_flow_id_that_is_not_a_uuid4_is_kept() -> None:
    """Only mitmproxy's own UUID4s are laid out again; anything else is its own id already."""
    for flow in ("bench-flow-000000001", str(uuid.uuid1()), str(uuid.uuid4()).replace("-", "_"), ""):
        assert action_id(flow, T0) == flow


def test_an_action_flightlog_starts_itself_gets_a_fresh_time_ordered_id() -> None:
    """Dispatches and replays have no flow: their ids are a prefix and 32 hex digits of a fresh
    UUIDv7 of the moment, so they sort in the order they were made and never repeat."""
    made = [new_action_id("d", T0 + i * 0.001) for i in range(500)]
    assert all(m.startswith("d") and len(m) == 33 for m in made)
    parsed = uuid.UUID(hex=made[0][1:])
    assert parsed.version == 7 and parsed.int >> 80 == int(T0 * 1000)
    assert sorted(made) == made and len(set(made)) == len(made)
    assert uuid.UUID(hex=new_action_id()).version == 7


def test_a_dispatch_takes_its_id_from_the_clock() -> None:
    """The door's new actions are time-ordered ids of now, not random UUID4s (a replay's: the
    browser replay test in tests/browse/test_replay.py)."""
    import time

    from door import dispatch_record

    before = int(time.time() * 1000)
    dispatched = dispatch_record.new_action_id()
    assert dispatched.startswith("d") and uuid.UUID(hex=dispatched[1:]).version == 7
    assert before <= uuid.UUID(hex=dispatched[1:]).int >> 80 <= int(time.time() * 1000)
