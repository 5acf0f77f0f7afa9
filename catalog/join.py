"""The join between the Directory and the Ledger: events read by key (`storage.lookups`), joined to rows.

- `tool_uses(engine, tool)`: from a tool row to every event that used it.
- `trace(ledger, find_tool, event_id, secret_names)`: from an event to its action, its tool row and
  its contract, with a check that each recorded upstream request is what the contract produces for
  the recorded arguments. A mismatch is flagged: something other than the runner made that request.
- `task_events(engine, task)`: from a task to everything done under it.
- `token_uses(engine, identifier)`: how many uses a token (and everything attenuated from it) spent.

The dispatch door's event kinds are `storage.kinds` (shared with the door that writes them); its token
locator is described in `door.dispatch_record`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from catalog.contracts import bind_secrets
from catalog.errors import CatalogError, UnboundSecret
from catalog.tool import Tool
from catalog.wire import expected
from storage.kinds import DISPATCH_CALL, DISPATCH_UPSTREAM_REQUEST
from storage.lookups import action_rows, event_row, rows_of_task, rows_of_tool
from storage.token_uses import TokenUses


class JoinError(CatalogError):
    """A join that cannot be made (an unknown event, an action without a call)."""


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if out.get("at") is not None and not isinstance(out["at"], str):
        out["at"] = out["at"].isoformat()
    return out


def token_uses(engine: Engine, identifier: str) -> int:
    """The uses spent of a token (and everything attenuated from it): rows of `token_uses`."""
    return TokenUses(engine).used(identifier)


def tool_uses(engine: Engine, tool: str, limit: int = 1000) -> list[dict[str, Any]]:
    """Every event with this tool, oldest first (one row per event, metadata only)."""
    return [_plain(r) for r in rows_of_tool(engine, tool, limit)]


def task_events(engine: Engine, task: str, limit: int = 5000) -> list[dict[str, Any]]:
    """Everything done under a task, oldest first."""
    return [_plain(r) for r in rows_of_task(engine, task, limit)]


@dataclass(frozen=True)
class Check:
    """One recorded upstream request against what the contract produces."""

    event_id: str
    matches: bool
    expected_head: str
    recorded_head: str
    differs: str = ""


@dataclass(frozen=True)
class Trace:
    """An event, its action, its tool row (the version the call ran under) and the contract check."""

    event: dict[str, Any]
    action: list[dict[str, Any]]
    tool: str | None
    call: dict[str, Any] | None
    contract: Any = None
    checks: list[Check] = field(default_factory=list)
    note: str = ""
    row_hash: str | None = None
    """The version of the row the contract was taken from (the call's, when it recorded one)."""

    @property
    def mismatch(self) -> bool:
        return any(not c.matches for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "action": self.action,
            "tool": self.tool,
            "call": self.call,
            "contract": self.contract,
            "checks": [c.__dict__ for c in self.checks],
            "mismatch": self.mismatch,
            "note": self.note,
            "row_hash": self.row_hash,
        }


def trace(
    engine: Engine,
    payload: Callable[[str], bytes],
    find_tool: Callable[[str], Tool | None],
    render: Callable[[Tool, Mapping[str, Any]], Any],
    event_id: str,
    version: Callable[[str], Tool | None] | None = None,
) -> Trace:
    """From one event to its contract, checking the recorded upstream requests against it.

    `payload(sha256)` reads a payload from the Ledger; `render(tool, args)` renders the upstream
    contract (secrets as names). The contract is the one the call ran under: the door records the
    version of the row on its call event (`row=HASH` on its url) and `version(hash)` reads that
    version back; a call that recorded none (or a version no longer kept) is compared with today's
    row, and the note says so. Secrets are bound to stand-in values and named again, as the door
    does, so the comparison is byte for byte except `Content-Length` (a real secret's length differs).

    An action filed under a tool with no dispatch call (a request recorded by the proxy, or written
    into the Ledger by anyone, that names the tool) is flagged: no runner made it.
    """
    event = event_row(engine, event_id)
    if event is None:
        raise JoinError(f"no event {event_id!r} in the Ledger")
    action = action_rows(engine, event["action_id"])
    tool_name = event["tool"] or next((r["tool"] for r in action if r["tool"]), None)
    calls = [r for r in action if r["kind"] == DISPATCH_CALL and r["payload_sha256"]]
    listed = [_plain({k: v for k, v in r.items() if k != "head"}) for r in action]
    base = Trace(_plain({k: v for k, v in event.items()}), listed, tool_name, None)
    if tool_name is None:
        return _with(base, note="the event names no tool")
    if not calls:
        return _unmade(base, action, tool_name)
    row_hash = _recorded_version(calls[0])
    ran = version(row_hash) if version is not None and row_hash else None
    tool = ran or find_tool(tool_name)
    if tool is None:
        return _with(base, note=f"the tool {tool_name!r} is not in the Directory")
    if ran is not None:
        base = _with(base, row_hash=row_hash)
    elif row_hash:
        base = _with(base, note=f"the row's version {row_hash} is not kept: compared with today's row")
    call = json.loads(payload(calls[0]["payload_sha256"]))
    args = call.get("args", {}) if isinstance(call, dict) else {}
    recorded = [r for r in action if r["kind"] == DISPATCH_UPSTREAM_REQUEST]
    try:
        named = render(tool, args)
    except CatalogError as e:
        return _with(base, call=call, contract=tool.upstream, note=f"the contract does not render: {e}")
    wanted = _expected(named)
    checks = [
        _compare(
            r["event_id"], bytes(r["head"]), payload(r["payload_sha256"]) if r["payload_sha256"] else b"", w
        )
        for r, w in zip(recorded, wanted, strict=False)
    ]
    for r in recorded[len(wanted) :]:
        checks.append(
            Check(r["event_id"], False, "", bytes(r["head"]).decode("utf-8", "replace"), "not made by it")
        )
    missing = (
        ""
        if len(recorded) >= len(wanted)
        else f"{len(wanted) - len(recorded)} request(s) of the contract missing"
    )
    note = "; ".join(n for n in (base.note, missing) if n)
    return _with(base, call=call, contract=named, checks=checks, note=note)


def _with(base: Trace, **changes: Any) -> Trace:
    return Trace(**{**base.__dict__, **changes})


def _recorded_version(call: Mapping[str, Any]) -> str | None:
    """The row version a call event's url names (`flightlog:dispatch/DOOR/TOOL?...&row=HASH`)."""
    query = str(call.get("url") or "").partition("?")[2]
    return next((v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "row" and v), None)


def _unmade(base: Trace, action: list[dict[str, Any]], tool: str) -> Trace:
    """An action filed under a tool that no dispatch made: each of its events flagged."""
    checks = [
        Check(
            r["event_id"],
            False,
            "",
            bytes(r["head"] or b"").decode("utf-8", "replace"),
            f"filed under the tool {tool!r}, but no dispatch of the door made it",
        )
        for r in action
        if r["tool"] == tool
    ]
    return _with(base, checks=checks, note="the action has no recorded dispatch call: no runner made it")


def _expected(named: Any) -> list[tuple[bytes, bytes]]:
    """The (head, body) pairs the contract produces, secrets bound to stand-ins then named again."""
    stand_ins: dict[str, str] = {}
    while True:
        try:
            bound = bind_secrets(named, stand_ins)
            break
        except UnboundSecret as e:
            stand_ins[e.name] = f"flsecret{len(stand_ins)}x{e.name.lower()}"
    out = []
    for part in bound if isinstance(bound, list) else [bound]:
        for head, body in expected(part):
            for name, value in stand_ins.items():
                head = head.replace(value.encode(), f"[{name}]".encode())
                body = body.replace(value.encode(), f"[{name}]".encode())
            out.append((head, body))
    return out


def _comparable(head: bytes) -> list[bytes]:
    """Head lines, without those a real secret or a server session legitimately changes."""
    skip = (b"content-length:", b"mcp-session-id:")
    return [line for line in head.split(b"\r\n") if not line.lower().startswith(skip)]


def _compare(event_id: str, head: bytes, body: bytes, wanted: tuple[bytes, bytes]) -> Check:
    exp_head, exp_body = wanted
    a, b = _comparable(exp_head), _comparable(head)
    differs = ""
    if a != b:
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        want = a[first].decode("utf-8", "replace") if first < len(a) else "(nothing)"
        got = b[first].decode("utf-8", "replace") if first < len(b) else "(nothing)"
        differs = f"head line {first + 1}: expected {want!r}, recorded {got!r}"
    elif exp_body != body:
        differs = "the body differs from what the contract produces"
    return Check(
        event_id,
        not differs,
        exp_head.decode("utf-8", "replace"),
        head.decode("utf-8", "replace"),
        differs,
    )
