"""Where the browser's data comes from: the Ledger's reads, the Directory join and a replay hook.

Screens talk to a `Source`, never to SQL or to other packages, so a test can hand the app a fixed
source and the command line can inject what the browser must not import itself: the Directory
lookup (the join from an event's tool to its row and contracts), replay and export (which live in
`addons`, out of the browser's reach; `flightlog browse` passes functions that run them in process).
Every method may block: screens call them from worker threads only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from storage.event_reads import counts, select_events
from storage.events import StoredEvent
from storage.exchanges import Exchange, select_exchanges
from storage.filters import Cursor, Filter, Group
from storage.mcp_lookups import call_events
from storage.questions.known import Known
from storage.questions.known_values import LedgerValues
from storage.timeline import Timeline, timeline
from tui.errors import TuiError


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A tool's Directory row and its contracts (form name -> runnable JSON), for the join."""

    name: str
    row: dict[str, Any] = field(default_factory=dict)
    contracts: dict[str, Any] = field(default_factory=dict)


DirectoryLookup = Callable[[str], ToolInfo | None]
"""Tool name -> its row, or None when the Directory has no such tool."""
Replayer = Callable[[str], str]
"""Action id -> what replaying it printed (status, header and body diff)."""
Exporter = Callable[[str, list[str]], str]
"""(format: har, mitmproxy or jsonl; action ids) -> one line saying what was written where."""
McpReader = Callable[[StoredEvent], bytes | None]
"""An MCP message event -> its bytes (an exchange's message is a pointer into the exchange's payload,
followed in `readback`, out of the browser's reach)."""


class Source(Protocol):
    """The reads the browser needs; each may block and is called from a worker thread."""

    def page(self, flt: Filter, *, limit: int, before: Cursor | None = None) -> list[StoredEvent]: ...

    def newer(self, flt: Filter, *, after: Cursor, limit: int) -> list[StoredEvent]: ...

    def exchanges(
        self, flt: Filter, *, limit: int, before: Cursor | None = None, after: Cursor | None = None
    ) -> list[Exchange]: ...

    def counts(self, flt: Filter, by: str) -> list[Group]: ...

    def timeline(self, flt: Filter, by: str) -> Timeline: ...

    def action(self, action_id: str) -> list[StoredEvent]: ...

    def payload(self, sha256: str) -> bytes: ...

    def call_events(self, key: str) -> list[StoredEvent]:
        """The message events of one MCP call through the proxy, wherever they were recorded."""
        ...

    def known(self) -> Known:
        """The Ledger's values a question's words may name ("calls to slack"), looked up as asked."""
        ...

    def mcp_message(self, event: StoredEvent) -> bytes | None:
        """An MCP message's bytes as stored, or None when they were not kept (or cannot be read here)."""
        ...

    def tool(self, name: str) -> ToolInfo | None:
        """The join; raises `TuiError` when no Directory is connected."""
        ...

    def replay(self, action_id: str) -> str:
        """Send the action again; raises `TuiError` when replay is not available."""
        ...

    def export(self, fmt: str, action_ids: list[str]) -> str:
        """Write the actions in `fmt`; raises `TuiError` when export is not available."""
        ...


class LedgerReads(Protocol):
    """The part of `storage.ledger.Ledger` the browser reads through."""

    @property
    def engine(self) -> Any: ...

    def action(self, action_id: str) -> list[StoredEvent]: ...

    def payload(self, sha256: str) -> bytes: ...


class LedgerSource:
    """A `Source` over an open Ledger, with the join and replay injected by whoever starts the app."""

    def __init__(
        self,
        ledger: LedgerReads,
        *,
        directory: DirectoryLookup | None = None,
        replayer: Replayer | None = None,
        exporter: Exporter | None = None,
        mcp_reader: McpReader | None = None,
    ) -> None:
        self.ledger = ledger
        self.directory = directory
        self.replayer = replayer
        self.exporter = exporter
        self.mcp_reader = mcp_reader

    def page(self, flt: Filter, *, limit: int, before: Cursor | None = None) -> list[StoredEvent]:
        """A page newest first; a filter in another order ("slowest") is one top N, with no next page."""
        if before is not None and not _newest_first(flt):
            return []
        return select_events(self.ledger.engine, flt, limit=limit, before=before)

    def newer(self, flt: Filter, *, after: Cursor, limit: int) -> list[StoredEvent]:
        """What arrived since `after`; a top N in another order is not followed."""
        if not _newest_first(flt):
            return []
        return select_events(self.ledger.engine, flt, limit=limit, after=after)

    def exchanges(
        self, flt: Filter, *, limit: int, before: Cursor | None = None, after: Cursor | None = None
    ) -> list[Exchange]:
        return select_exchanges(self.ledger.engine, flt, limit=limit, before=before, after=after)

    def counts(self, flt: Filter, by: str) -> list[Group]:
        return counts(self.ledger.engine, flt, by)

    def timeline(self, flt: Filter, by: str) -> Timeline:
        return timeline(self.ledger.engine, flt, by)

    def action(self, action_id: str) -> list[StoredEvent]:
        return self.ledger.action(action_id)

    def payload(self, sha256: str) -> bytes:
        return self.ledger.payload(sha256)

    def call_events(self, key: str) -> list[StoredEvent]:
        return call_events(self.ledger.engine, key)

    def mcp_message(self, event: StoredEvent) -> bytes | None:
        if event.payload_sha256:
            return self.ledger.payload(event.payload_sha256)
        return self.mcp_reader(event) if self.mcp_reader is not None else None

    def known(self) -> Known:
        return LedgerValues(self.ledger.engine)

    def tool(self, name: str) -> ToolInfo | None:
        if self.directory is None:
            raise TuiError("no Directory is connected (set FLIGHTLOG_DIRECTORY or pass --directory)")
        return self.directory(name)

    def replay(self, action_id: str) -> str:
        if self.replayer is None:
            raise TuiError("replay is not available here")
        return self.replayer(action_id)

    def export(self, fmt: str, action_ids: list[str]) -> str:
        if self.exporter is None:
            raise TuiError("export is not available here")
        return self.exporter(fmt, action_ids)


def _newest_first(flt: Filter) -> bool:
    return (flt.sort or "newest") == "newest"
