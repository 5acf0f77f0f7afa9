"""What changed in an agent's behaviour between two recordings, and which changes fail a CI run.

`compare` lines the two step lists up by endpoint (difflib's longest matching blocks): steps only in
B are added, only in A removed, and a step removed in one place and added in another is reordered.
Beside the order it compares the models used, the tools offered to the model, the tool calls the
model made, the MCP tools called, and the token and cost totals. `failures` applies `--fail-on`
rules (`requests`, `order`, `model`, `tools`, `tool-calls`, `mcp`, `status`, `tokens[:PCT]`,
`cost[:PCT]`, `any`) and names each rule that tripped. Pure.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from readback.behaviour import Step
from readback.errors import DriftError

RULES: Final = ("requests", "order", "model", "tools", "tool-calls", "mcp", "status", "tokens", "cost", "any")


@dataclass(frozen=True, slots=True)
class Totals:
    requests: int
    tokens_in: int
    tokens_out: int
    cost_usd: float

    @classmethod
    def of(cls, steps: Sequence[Step]) -> Totals:
        return cls(
            len(steps),
            sum(s.tokens_in for s in steps),
            sum(s.tokens_out for s in steps),
            round(sum(s.cost_usd for s in steps), 9),
        )


@dataclass(frozen=True)
class Drift:
    """The differences between recording A and recording B, each list empty when nothing changed."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    reordered: list[str] = field(default_factory=list)
    models: dict[str, list[str]] = field(default_factory=dict)
    tools_offered: dict[str, list[str]] = field(default_factory=dict)
    tool_calls: dict[str, list[str]] = field(default_factory=dict)
    mcp_calls: dict[str, list[str]] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    totals: dict[str, Totals] = field(default_factory=dict)

    def changed(self, rule: str) -> bool:
        return {
            "requests": bool(self.added or self.removed),
            "order": bool(self.reordered),
            "model": bool(self.models),
            "tools": bool(self.tools_offered),
            "tool-calls": bool(self.tool_calls),
            "mcp": bool(self.mcp_calls),
            "status": bool(self.statuses),
        }.get(rule, False)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": {"added": self.added, "removed": self.removed, "reordered": self.reordered},
            "models": self.models,
            "tools_offered": self.tools_offered,
            "tool_calls": self.tool_calls,
            "mcp_calls": self.mcp_calls,
            "statuses": self.statuses,
            "totals": {k: vars_of(v) for k, v in self.totals.items()},
        }

    def render(self) -> str:
        a, b = self.totals["a"], self.totals["b"]
        lines = [f"requests: {a.requests} -> {b.requests}"]
        lines += [f"  + {x}" for x in self.added]
        lines += [f"  - {x}" for x in self.removed]
        lines += [f"  ~ reordered: {x}" for x in self.reordered]
        for title, change in (
            ("models", self.models),
            ("tools offered", self.tools_offered),
            ("tool calls", self.tool_calls),
            ("MCP tool calls", self.mcp_calls),
        ):
            if change:
                lines.append(
                    f"{title}: {', '.join(change['a']) or '(none)'} -> {', '.join(change['b']) or '(none)'}"
                )
        lines += [f"status: {x}" for x in self.statuses]
        lines.append(f"tokens in: {a.tokens_in} -> {b.tokens_in}, out: {a.tokens_out} -> {b.tokens_out}")
        lines.append(f"cost: ${a.cost_usd:.6f} -> ${b.cost_usd:.6f}")
        return "\n".join(lines)


def vars_of(t: Totals) -> dict[str, Any]:
    return {
        "requests": t.requests,
        "tokens_in": t.tokens_in,
        "tokens_out": t.tokens_out,
        "cost_usd": t.cost_usd,
    }


def _sequence_change(a: Sequence[str], b: Sequence[str]) -> dict[str, list[str]]:
    return {} if list(a) == list(b) else {"a": list(a), "b": list(b)}


def _set_change(a: Sequence[str], b: Sequence[str]) -> dict[str, list[str]]:
    """Offered tools compared as sets over the whole run (the order they are listed in is not behaviour)."""
    sa, sb = sorted(set(a)), sorted(set(b))
    if sa == sb:
        return {}
    return {"a": sa, "b": sb, "added": sorted(set(b) - set(a)), "removed": sorted(set(a) - set(b))}


def compare(a: Sequence[Step], b: Sequence[Step]) -> Drift:
    """The drift from recording A to recording B."""
    ea, eb = [s.endpoint for s in a], [s.endpoint for s in b]
    matcher = difflib.SequenceMatcher(a=ea, b=eb, autojunk=False)
    added: list[str] = []
    removed: list[str] = []
    statuses: list[str] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("delete", "replace"):
            removed += [f"#{i + 1} {ea[i]}" for i in range(i1, i2)]
        if op in ("insert", "replace"):
            added += [f"#{j + 1} {eb[j]}" for j in range(j1, j2)]
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                if a[i].status != b[j].status:
                    statuses.append(f"#{i + 1} {ea[i]}: {a[i].status} -> {b[j].status}")
    moved = Counter(x.split(" ", 1)[1] for x in added) & Counter(x.split(" ", 1)[1] for x in removed)
    reordered = sorted(moved.elements())
    if moved:
        left = Counter(moved)
        added = [x for x in added if not _consume(left, x)]
        left = Counter(moved)
        removed = [x for x in removed if not _consume(left, x)]
    models_a = list(dict.fromkeys(s.model for s in a if s.model))
    models_b = list(dict.fromkeys(s.model for s in b if s.model))
    return Drift(
        added=added,
        removed=removed,
        reordered=reordered,
        models=_set_change(models_a, models_b),
        tools_offered=_set_change(
            [t for s in a for t in s.tools_offered], [t for s in b for t in s.tools_offered]
        ),
        tool_calls=_sequence_change(
            [t for s in a for t in s.tool_calls], [t for s in b for t in s.tool_calls]
        ),
        mcp_calls=_sequence_change([t for s in a for t in s.mcp_calls], [t for s in b for t in s.mcp_calls]),
        statuses=statuses,
        totals={"a": Totals.of(a), "b": Totals.of(b)},
    )


def _consume(left: Counter[str], item: str) -> bool:
    name = item.split(" ", 1)[1]
    if left[name] > 0:
        left[name] -= 1
        return True
    return False


def parse_fail_on(values: Sequence[str]) -> list[tuple[str, float]]:
    """`--fail-on tools,tokens:10%` as (rule, tolerance percent) pairs; an unknown rule is an error."""
    rules: list[tuple[str, float]] = []
    for value in values:
        for part in (p.strip() for p in value.split(",") if p.strip()):
            name, _, pct = part.partition(":")
            if name not in RULES:
                raise DriftError(f"--fail-on {name!r}: use {', '.join(RULES)}")
            tolerance = 0.0
            if pct:
                if name not in ("tokens", "cost"):
                    raise DriftError(f"--fail-on {part!r}: only tokens and cost take a tolerance")
                try:
                    tolerance = float(pct.rstrip("%"))
                except ValueError as e:
                    raise DriftError(
                        f"--fail-on {part!r}: the tolerance is a percentage, e.g. tokens:10%"
                    ) from e
            rules.append((name, tolerance))
    return rules


def _beyond(a: float, b: float, tolerance: float) -> bool:
    if a == b:
        return False
    if a == 0:
        return True
    return abs(b - a) / abs(a) * 100 > tolerance


def failures(drift: Drift, rules: Sequence[tuple[str, float]]) -> list[str]:
    """The rules that tripped, each with what tripped it."""
    ta, tb = drift.totals["a"], drift.totals["b"]
    out = []
    for name, tolerance in rules:
        names = [r for r in RULES if r not in ("any", "tokens", "cost")] if name == "any" else [name]
        for rule in names:
            if drift.changed(rule):
                out.append(f"{rule} changed")
        if name in ("tokens", "any"):
            tol = tolerance if name == "tokens" else 0.0
            if _beyond(ta.tokens_in + ta.tokens_out, tb.tokens_in + tb.tokens_out, tol):
                out.append(
                    f"tokens {ta.tokens_in + ta.tokens_out} -> {tb.tokens_in + tb.tokens_out} (over {tol:g}%)"
                )
        if name in ("cost", "any"):
            tol = tolerance if name == "cost" else 0.0
            if _beyond(ta.cost_usd, tb.cost_usd, tol):
                out.append(f"cost ${ta.cost_usd:.6f} -> ${tb.cost_usd:.6f} (over {tol:g}%)")
    return list(dict.fromkeys(out))
