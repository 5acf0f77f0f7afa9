"""`--sync-path GLOB`: for matching inbound requests the request event is committed before forwarding.

The write is synchronous exactly where the sender can retry: if the Ledger cannot take the event,
the sender gets `503` with `Retry-After` and the upstream is never called.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from addons.capture import Capture
from addons.flow_notes import COMMITTED, EXCHANGE
from addons.wire.heads import request_head
from recording.records import Exchange, RequestRecord

if TYPE_CHECKING:
    from mitmproxy import http
    from mitmproxy.addonmanager import Loader

log = logging.getLogger("flightlog.capture")
RETRY_AFTER = "5"


def matches(path: str, globs: Sequence[str]) -> bool:
    """Whether a request path (query string ignored) matches one of the globs."""
    bare = path.partition("?")[0]
    return any(fnmatch.fnmatchcase(bare, g) for g in globs)


class SyncPaths:
    """Commits matching inbound request events before the request goes upstream."""

    def __init__(self, capture: Capture) -> None:
        self.capture = capture
        self.globs: tuple[str, ...] = ()

    def load(self, loader: Loader) -> None:
        from collections.abc import Sequence as Seq

        loader.add_option(
            "flightlog_sync_path",
            Seq[str],
            [],
            "Path glob of inbound requests whose event is committed before forwarding (503 if it cannot be).",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        if "flightlog_sync_path" in updated:
            globs = tuple(ctx.options.flightlog_sync_path)
            if any(not g.startswith(("/", "*")) for g in globs):
                raise exceptions.OptionsError("flightlog_sync_path globs match paths: start them with / or *")
            self.globs = globs

    def request(self, flow: http.HTTPFlow) -> Coroutine[Any, Any, None] | None:
        """Plain for most flows; a coroutine (awaited by mitmproxy) only for a matching inbound one."""
        if not self.globs or flow.response is not None:
            return None
        exchange: Exchange | None = EXCHANGE.get(flow)
        if exchange is None or exchange.direction != "in" or not matches(flow.request.path, self.globs):
            return None
        return self._commit(flow, exchange)

    async def _commit(self, flow: http.HTTPFlow, exchange: Exchange) -> None:
        writer = self.capture.writer
        record = RequestRecord(
            exchange=exchange,
            at=flow.request.timestamp_start,
            head=request_head(flow.request),
            body=flow.request.raw_content,
            content_encoding=flow.request.headers.get("content-encoding", ""),
        )
        try:
            if writer is None:
                raise RuntimeError("the writer is not running")
            await asyncio.to_thread(writer.commit_now, record)
        except Exception as e:
            from mitmproxy import http

            log.warning("flightlog: sync path %s not committed (%s); answered 503", flow.request.path, e)
            flow.response = http.Response.make(
                503,
                b"The Ledger could not record this request; retry later.\n",
                {"Retry-After": RETRY_AFTER, "Content-Type": "text/plain"},
            )
            return
        COMMITTED.put(flow, True)
