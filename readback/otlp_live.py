"""`flightlog proxy --otlp-endpoint URL`: spans streamed to an OTLP receiver as the Ledger commits.

A follower of the Ledger, not a hook in capture: a process of its own beside the proxy reads each
collector's new commits (`storage.commits`) every `POLL` seconds, turns their events into spans
(`span_tree`, the batch export's tree) and POSTs them. Capture never waits for it and never shares
a core's GIL with it; it sees every committed event whichever process wrote it (each proxy worker's
writer, the door, `mcp-record` on the same Ledger), and reads nothing twice. A run's root span is
sent once the run is quiet for `QUIET` seconds, and at the end.

The proxy starts capturing once the follower has read where the Ledger's commits stand (it says
`ready`), so everything the proxy records is streamed, and nothing recorded before.

A receiver that is down or refuses costs one line (and one when it is back): the spans wait, up
to `KEPT`, and go with the next round; past that the oldest are dropped and counted. The follower
stops when its standard input closes (the proxy closes it after its writers drained, or it died):
it reads the last commits, sends what is left with the roots, and exits.

Run as `python -m readback.otlp_live LEDGER BLOBS ENDPOINT [--content]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import httpx

from readback import otlp
from readback.errors import OtlpError
from readback.genai_spans import SpanValue
from readback.span_tree import SpanTree, ledger_bodies
from storage.commits import chain_heads, commits_after
from storage.errors import StorageError
from storage.ledger import Ledger, open_ledger

log = logging.getLogger("flightlog.otlp")

POLL: Final = 0.5
QUIET: Final = 5.0
KEPT: Final = 100_000
"""Spans held while the receiver is down."""
READY: Final = "ready"
READY_WAIT: Final = 60.0
"""How long the proxy waits for the follower to fix its starting point (the Ledger's commits so far)
before it starts capturing: what it records after that is all streamed."""


class Follower:
    """Commits in, spans out: one round at a time (`round`), then `finish`."""

    def __init__(self, ledger: Ledger, endpoint: str, *, content: bool = False, quiet: float = QUIET) -> None:
        self.ledger = ledger
        self.url = otlp.traces_url(endpoint)
        self.quiet = quiet
        self.tree = SpanTree(ledger_bodies(ledger.payload, ledger.events), content=content, hold=True)
        self.after = chain_heads(ledger.engine)
        self.waiting: deque[SpanValue] = deque()
        self.sent = self.dropped = 0
        self.down: str | None = None
        """Why the receiver does not take spans (None: it does); said once per outage."""
        self.unreadable: str | None = None
        """Why the Ledger cannot be read (None: it can); said once per outage."""
        self.client = httpx.Client(timeout=10, trust_env=False)

    def read(self) -> None:
        """Every commit since the last round into the tree, in recorded order across collectors (a
        tool call `mcp-record` committed must meet the model call that asked for it first)."""
        while commits := commits_after(self.ledger.engine, self.after):
            ids = [event_id for commit in commits for event_id in commit.event_ids]
            events = sorted(self.ledger.events(ids), key=lambda e: (e.at, e.seq, e.event_id))
            self._keep(self.tree.add(events))
            for commit in commits:
                self.after[commit.collector] = max(commit.index, self.after.get(commit.collector, 0))

    def round(self) -> None:
        try:
            self.read()
        except StorageError as e:
            if self.unreadable is None:
                log.warning("flightlog: the OTLP stream cannot read the Ledger: %s", e)
            self.unreadable = str(e)
            return
        if self.unreadable is not None:
            log.warning("flightlog: the OTLP stream reads the Ledger again")
            self.unreadable = None
        self._keep(self.tree.roots(self.quiet))
        self.send()

    def finish(self) -> None:
        try:
            self.read()
        except StorageError as e:
            log.warning("flightlog: the OTLP stream cannot read the Ledger: %s", e)
        self._keep(self.tree.finish())
        self.send()
        self.client.close()

    def send(self) -> None:
        while self.waiting:
            batch = [self.waiting[i] for i in range(min(otlp.BATCH, len(self.waiting)))]
            try:
                otlp.post(self.client, self.url, batch)
            except OtlpError as e:
                if self.down is None:
                    log.warning("flightlog: OTLP spans wait: %s", e)
                self.down = str(e)
                return
            for _ in batch:
                self.waiting.popleft()
            self.sent += len(batch)
            if self.down is not None:
                log.warning("flightlog: the OTLP receiver at %s takes spans again", self.url)
                self.down = None

    def _keep(self, spans: list[SpanValue]) -> None:
        self.waiting.extend(spans)
        while len(self.waiting) > KEPT:
            self.waiting.popleft()
            self.dropped += 1


def follow(follower: Follower, stop_fd: int, poll: float = POLL) -> None:
    """Rounds every `poll` seconds until `stop_fd` (standard input) reads end of file."""
    while True:
        ready, _, _ = select.select([stop_fd], [], [], poll)
        if ready and not os.read(stop_fd, 4096):
            break
        follower.round()
    follower.finish()


@contextmanager
def streaming(ledger: str, blobs: str, endpoint: str | None, content: bool = False) -> Iterator[None]:
    """The follower beside the block (nothing without an `endpoint`): started before it, and after it
    (the proxy drained into the Ledger) told to finish by closing its standard input."""
    if endpoint is None:
        yield
        return
    args = [sys.executable, "-m", "readback.otlp_live", ledger, blobs, endpoint]
    proc = subprocess.Popen(
        [*args, *(["--content"] if content else [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_WAIT)
    if ready:  # its starting point is fixed: capture may begin (or it exited, having said why)
        proc.stdout.readline()
    try:
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="flightlog-otlp-live")
    parser.add_argument("ledger")
    parser.add_argument("blobs")
    parser.add_argument("endpoint")
    parser.add_argument("--content", action="store_true")
    parser.add_argument("--quiet", type=float, default=QUIET)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the proxy; it closes our stdin
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    try:
        ledger = open_ledger(args.ledger, args.blobs or None, retry_seconds=5.0)
    except StorageError as e:
        log.warning("flightlog: the OTLP stream cannot open the Ledger: %s", e)
        return 1
    try:
        follower = Follower(ledger, args.endpoint, content=args.content, quiet=args.quiet)
        print(READY, flush=True)
        follow(follower, sys.stdin.fileno())
    except StorageError as e:
        log.warning("flightlog: the OTLP stream stopped: %s", e)
        return 1
    finally:
        ledger.close()
    print(f"flightlog: streamed {follower.sent} otlp spans to {follower.url}", file=sys.stderr)
    if follower.dropped or follower.waiting:
        print(f"flightlog: {follower.dropped + len(follower.waiting)} otlp spans not sent", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
