"""What a question counts and how counted rows are ranked: "which agent used the most tokens", "top 3
sessions by cost", "the busiest hour", "how many calls did delta make".

A mixin of the question reader (`storage.questions.reading`), beside `views.ViewWords`. Its words:

- units: calls, requests, exchanges, responses count exchanges (one request with everything that
  answered it); events count the Ledger's rows (a request and its answer are two);
- superlatives: most, least, fewest, highest, lowest, busiest, quietest; "top" before a grouping;
- a grouping noun after a superlative or a "top N" ("top 3 agents", "the costliest session"), or a
  plural one on its own ("sessions by cost");
- "by" a measure ("agents by cost", "models by latency"): ranked by it, largest first.

At the end of a question, `shape` settles the reading: a grouped answer ranked by what was named
(tokens, cost, latency, else the count of the unit), a sort of the list when nothing is grouped
("calls that cost the most"), or a total ("cost of session s4", "how many calls"). A superlative that
has nothing to rank ("the most calls" of no grouping) is refused, never dropped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from storage.questions.times import QuestionError
from storage.questions.vocabulary import GROUP_NOUNS, MEASURE_WORDS, METRICS, MOST, SORT_WORDS, UNIT_WORDS

RANKED_SORTS = {"slowest": ("duration", False), "fastest": ("duration", True), "costliest": ("cost", False)}
"""A list's order that ranks counted rows when the question groups ("the slowest model")."""


class RankWords:
    """Reads units, superlatives and ranked groupings; the reader provides the cursor and fields."""

    i: int
    words: list[str]
    values: dict[str, Any]
    group_by: str | None
    total: bool
    limit: int | None
    stat: str | None
    metrics: list[str]
    units: list[str]
    counting: bool
    most: bool | None
    per_each: bool

    def peek(self, ahead: int = 0) -> str | None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    if TYPE_CHECKING:

        def group(self, name: str) -> None:
            """Provided by `storage.questions.views.ViewWords`."""

    def set(self, name: str, value: Any) -> None:  # pragma: no cover - provided by the reader
        raise NotImplementedError

    def set_most(self, most: bool, said: str) -> None:
        if self.most is not None and self.most != most:
            raise QuestionError(f"one ranking per question: most or least? ({said!r})")
        self.most = most

    def superlative(self, low: str) -> bool:
        """'the most', 'least', 'busiest'; 'most' before an order word ('most expensive') is that
        word's; 'top' before a grouping ('top agents by cost')."""
        nxt = (self.peek() or "").lower()
        if low == "most" and nxt in SORT_WORDS:
            return True
        if (low == "least" and nxt == "expensive") or low == "cheapest":  # ranked by cost, least first
            self.i += 1 if low == "least" else 0
            self.metrics.append("cost")
            self.set_most(False, low)
            return True
        if low in MOST:
            self.set_most(MOST[low], low)
            return True
        if low == "top" and nxt in GROUP_NOUNS:
            self.set_most(True, low)
            return True
        return False

    def counts_in(self, low: str) -> bool:
        """Units (calls, events) and the count itself ('count', 'number of')."""
        if low in UNIT_WORDS:
            self.units.append(UNIT_WORDS[low])
            return True
        if MEASURE_WORDS.get(low) == "count":
            self.counting = True
            return True
        return False

    def group_noun(self, low: str) -> bool:
        """A grouping named by its noun: plural on its own ('sessions by cost'), or singular after a
        superlative, an order word or a 'top N' ('the busiest hour', 'top 3 agent')."""
        name = GROUP_NOUNS.get(low)
        if name is None:
            return False
        before = self.words[self.i - 2].lower() if self.i >= 2 else ""
        topped = before.isdigit() and self.i >= 3 and self.words[self.i - 3].lower() == "top"
        ranked = before in MOST or before in SORT_WORDS or before in ("top", "cheapest") or topped
        if not (low.endswith("s") and low != "status") and not ranked:
            return False
        self.group(name)
        return True

    def by_measure(self, low: str, target: str) -> bool:
        """'by cost', 'by tokens', 'by latency', 'by calls': ranked by it, largest first."""
        if low != "by" or not (target in METRICS or target in UNIT_WORDS or target in MEASURE_WORDS):
            return False
        self.i += 1
        if target in METRICS:
            self.metrics.append(METRICS[target])
        elif target in UNIT_WORDS:
            self.units.append(UNIT_WORDS[target])
        if self.most is None:
            self.most = True
        return True

    def unit(self) -> str:
        return self.units[-1] if self.units else "exchanges" if self.most is not None else "events"

    def shape(self) -> tuple[str | None, bool, str | None]:
        """(what groups are ranked by, whether least first, what a total is of), settling a sort of
        a grouped question into its ranking and a measure of no grouping into a total or a sort."""
        named = next((m for m in reversed(self.metrics) if m in ("cost", "tokens", "duration")), None)
        if self.per_each and self.stat is None and named is not None:  # "cost per call": its average
            self.stat = "avg"
        sort = self.values.get("sort")
        if self.group_by is not None:
            if sort in RANKED_SORTS:
                named, least = RANKED_SORTS[sort]
                self.set_most(not least, sort)
                del self.values["sort"]
                self.metrics.append(named)
            elif sort is not None:
                raise QuestionError(f"counted rows are ranked by most or least, not {sort!r}")
            if self.limit is not None and self.most is None:
                self.most = True
            if named == "duration" or self.stat is not None:
                return (self.stat or "avg") if self.most is not None else None, self.most is False, None
            if self.most is None and named is None and not self.units:
                return None, False, None
            return named or self.unit(), self.most is False, None
        if self.most is not None:
            self.most_of_a_list(named)
            return None, False, None
        if named in ("cost", "tokens") and self.stat is None and sort is None and self.limit is None:
            self.total = True
        if self.counting:
            self.total = True
        if not self.total:
            return None, False, None
        return None, False, named if named in ("cost", "tokens") else (self.units[-1] if self.units else None)

    def most_of_a_list(self, named: str | None) -> None:
        """'calls that cost the most', 'the calls that took least': a sort of the list; a
        superlative with no such sort has nothing to rank and is refused."""
        if named == "duration":  # the order of the list, not a figure summarized
            self.set("sort", "slowest" if self.most else "fastest")
            self.metrics[:] = [m for m in self.metrics if m != "duration"]
        elif named == "cost" and self.most:
            self.set("sort", "costliest")
        else:
            said = "most" if self.most else "least"
            raise QuestionError(
                f"'{said}' ranks counted rows: say of what (e.g. 'which agent used the {said} tokens',"
                " 'top 3 sessions by cost')"
            )
