"""The recorded exchanges of a replay run, indexed per strategy, each answering the live requests.

`Book.match` tries the run's strategies in order and files one `Outcome` per live request (which
strategy answered, which recorded action, which of several identical ones, the rules that fired) or
a miss with the one line `matching.miss_line` writes. `ReplayReport` is what the run prints at the end,
and what the pytest plugin fails a test on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from readback.matching import Request, Rules, default_rules, fired, key, miss_line
from readback.recorded import Exchange, PayloadReader, body
from storage.heads import Fields


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one live request got: the strategy and recorded action that answered it, or a miss."""

    n: int
    method: str
    url: str
    strategy: str | None
    action_id: str | None = None
    occurrence: int = 1
    rules: tuple[str, ...] = ()
    miss: str | None = None
    live: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "method": self.method,
            "url": self.url,
            "strategy": self.strategy,
            "action_id": self.action_id,
            "occurrence": self.occurrence,
            "rules": list(self.rules),
            "miss": self.miss,
            "went_live": self.live,
        }

    def render(self) -> str:
        if self.strategy is None:
            went = " -> sent live and recorded" if self.live else ""
            return f"  #{self.n} MISS {self.miss}{went}"
        extra = f" rules: {', '.join(self.rules)}" if self.rules else ""
        nth = f" (answer {self.occurrence} of its repeats)" if self.occurrence > 1 else ""
        return f"  #{self.n} {self.strategy}: {self.method} {self.url} <- {self.action_id}{nth}{extra}"


@dataclass(slots=True)
class ReplayReport:
    """Every live request's outcome, the recorded exchanges nobody asked for, blocked connections."""

    strategies: tuple[str, ...] = ()
    outcomes: list[Outcome] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    upstream_blocked: int = 0
    websocket: list[str] = field(default_factory=list)  # client messages unlike the recorded ones

    @property
    def misses(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.strategy is None and not o.live]

    @property
    def live_calls(self) -> int:
        return sum(1 for o in self.outcomes if o.live)

    @property
    def divergences(self) -> int:
        return len(self.misses) + self.upstream_blocked + len(self.websocket)

    def to_json(self) -> dict[str, Any]:
        by: dict[str, int] = {}
        for o in self.outcomes:
            if o.strategy is not None:
                by[o.strategy] = by.get(o.strategy, 0) + 1
        return {
            "strategies": list(self.strategies),
            "answered": sum(by.values()),
            "answered_by": by,
            "misses": [o.miss for o in self.misses],
            "live_calls": self.live_calls,
            "requests": [o.to_json() for o in self.outcomes],
            "not_requested": self.unused,
            "upstream_connections_blocked": self.upstream_blocked,
            "websocket_diverged": self.websocket,
            "divergences": self.divergences,
        }

    def render(self) -> str:
        answered = sum(1 for o in self.outcomes if o.strategy is not None)
        lines = [
            f"replay ({','.join(self.strategies)}): {answered} answered from the recording,"
            f" {len(self.misses)} missed, {self.live_calls} sent live, {len(self.unused)} recorded but"
            f" not requested, {self.upstream_blocked} upstream connections blocked"
        ]
        lines += [o.render() for o in self.outcomes]
        lines += [f"  not requested: {x}" for x in self.unused]
        lines += [f"  websocket: {x}" for x in self.websocket]
        return "\n".join(lines)


def label(exchange: Exchange) -> str:
    return f"{exchange.request.method} {exchange.request.url} (action {exchange.action_id})"


class Book:
    """Recorded exchanges indexed by each strategy's key; with `sequence`, each answers once, in order."""

    def __init__(
        self,
        exchanges: Sequence[Exchange],
        read: PayloadReader,
        strategies: Sequence[str] = ("exact", "normalized", "sequence"),
        rules: Rules | None = None,
    ) -> None:
        self.exchanges = list(exchanges)
        self.rules = rules or default_rules()
        self.sequence = "sequence" in strategies
        self.strategies = tuple(s for s in strategies if s != "sequence")
        self.requests = [
            Request(
                x.request.method or "",
                x.request.url or "",
                x.request_head.fields,
                body(x.request, read) if x.request.payload_state == "complete" else b"",
            )
            for x in self.exchanges
        ]
        self.labels = [label(x) for x in self.exchanges]
        self.used = [False] * len(self.exchanges)
        self.index: dict[str, dict[tuple[str, ...], list[int]]] = {s: {} for s in self.strategies}
        for i, request in enumerate(self.requests):
            for strategy in self.strategies:
                self.index[strategy].setdefault(key(strategy, request, self.rules), []).append(i)
        self.taken: dict[tuple[str, tuple[str, ...]], deque[int]] = {}
        self.report = ReplayReport(tuple(strategies))
        self.last_miss: str | None = None

    def _take(self, strategy: str, k: tuple[str, ...]) -> tuple[int, int] | None:
        """(exchange index, which of the identical ones) for a key, honouring `sequence`."""
        found = self.index[strategy].get(k)
        if not found:
            return None
        if not self.sequence:
            return found[0], 1
        queue = self.taken.setdefault((strategy, k), deque(found))
        while queue:
            i = queue.popleft()
            if not self.used[i]:
                return i, len(found) - len(queue)
        return None

    def match(self, method: str, url: str, body_bytes: bytes, fields: Fields = ()) -> Exchange | None:
        """The recorded exchange that answers this request (filed as an outcome); None on a miss."""
        live = Request(method, url, fields, body_bytes)
        n = len(self.report.outcomes) + 1
        for strategy in self.strategies:
            got = self._take(strategy, key(strategy, live, self.rules))
            if got is not None:
                i, occurrence = got
                self.used[i] = True
                rules = fired(live, self.rules) if strategy == "normalized" else ()
                outcome = Outcome(n, method, url, strategy, self.exchanges[i].action_id, occurrence, rules)
                self.report.outcomes.append(outcome)
                return self.exchanges[i]
        forgiving = self.rules if "normalized" in self.strategies else Rules(headers=self.rules.headers)
        self.last_miss = miss_line(live, self.requests, self.labels, forgiving, self.used)
        self.report.outcomes.append(Outcome(n, method, url, None, miss=self.last_miss))
        return None

    def went_live(self) -> None:
        """The last miss was sent live (`--record-missing`): it no longer counts as a miss."""
        last = self.report.outcomes[-1]
        self.report.outcomes[-1] = Outcome(last.n, last.method, last.url, None, miss=last.miss, live=True)

    def finish(self) -> ReplayReport:
        """The report, with every recorded exchange nobody asked for named."""
        self.report.unused = [lbl for lbl, used in zip(self.labels, self.used, strict=True) if not used]
        return self.report
