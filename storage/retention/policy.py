"""A retention policy: which payloads may go, read from a TOML file.

```toml
older_than_days = 90          # every payload, unless a rule below names its host or agent
larger_than = "50 MiB"        # bodies over this size, whatever their age
[hosts]
"api.openai.com" = 30         # a host's payloads after 30 days ("*.example.com": its subdomains too)
[agents]
alpha = 7
```

The most specific rule wins: an event whose agent or host a rule names is kept as long as that rule
says (the shorter of the two when both do), the default applies to the others, and without a default
they are kept. A payload is due only when every event that points at it is due (identical bytes are
stored once: a newer event must not lose its body to an older one's rule), and never when a
`ledger.*` event (a prune record) points at it. The rules compile to one SQL condition, so the
Ledger is read once, in the database.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from storage.errors import StorageError
from storage.event_sql import LIKE_ESCAPE, bind_time
from storage.reader import Reader

FILE: Final = "retention.toml"
RECORD_KINDS: Final = "ledger.%"
"""The Ledger's own records (`ledger.prune`): their payloads are never due."""
SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
UNITS: Final = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 2**20,
                "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12, "tib": 2**40}  # fmt: skip


class PolicyError(StorageError):
    """A retention policy that cannot be read (one line naming the file and the entry)."""


@dataclass(frozen=True, slots=True)
class Policy:
    older_than_days: float | None = None
    larger_than: int | None = None
    hosts: dict[str, float] = field(default_factory=dict)
    agents: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        """The policy in one line (kept in each prune record it made)."""
        parts = []
        if self.older_than_days is not None:
            parts.append(f"older than {self.older_than_days:g} days")
        parts += [f"host {h} after {d:g} days" for h, d in sorted(self.hosts.items())]
        parts += [f"agent {a} after {d:g} days" for a, d in sorted(self.agents.items())]
        if self.larger_than is not None:
            parts.append(f"bodies over {self.larger_than} bytes")
        return "retention policy: " + ("; ".join(parts) or "keeps everything")


def size_of(value: Any, where: str) -> int:
    """A size: a number of bytes, or text such as `50 MiB`, `2gb`, `500k`."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = SIZE.match(value) if isinstance(value, str) else None
    if match is None or match.group(2).lower() not in UNITS:
        raise PolicyError(f"{where}: {value!r} is not a size (bytes, or e.g. '50 MiB')")
    return int(float(match.group(1)) * UNITS[match.group(2).lower()])


def _days(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise PolicyError(f"{where}: {value!r} is not a number of days")
    return float(value)


def parse(data: dict[str, Any], where: str) -> Policy:
    """A policy from its TOML's table; an unknown key is refused, never ignored."""
    known = {"older_than_days", "larger_than", "hosts", "agents"}
    if unknown := sorted(set(data) - known):
        raise PolicyError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    rules = {}
    for name in ("hosts", "agents"):
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise PolicyError(f"{where}: [{name}] must be a table of NAME = DAYS")
        rules[name] = {str(k).lower() if name == "hosts" else str(k): _days(v, f"{where} [{name}] {k}")
                       for k, v in table.items()}  # fmt: skip
    return Policy(
        older_than_days=_days(data["older_than_days"], f"{where} older_than_days")
        if "older_than_days" in data
        else None,
        larger_than=size_of(data["larger_than"], f"{where} larger_than") if "larger_than" in data else None,
        hosts=rules["hosts"],
        agents=rules["agents"],
    )


def load(path: Path) -> Policy:
    """The policy in `path`; `PolicyError` naming the file when it cannot be read."""
    try:
        return parse(tomllib.loads(path.read_text("utf-8")), str(path))
    except FileNotFoundError as e:
        raise PolicyError(f"no retention policy at {path} (write one: older_than_days = 90, ...)") from e
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PolicyError(f"{path}: {e}".splitlines()[0]) from e


def _like(host: str) -> str:
    for ch in (LIKE_ESCAPE, "%", "_"):
        host = host.replace(ch, LIKE_ESCAPE + ch)
    return "%." + host


def due_sql(policy: Policy, dialect: str, now: datetime, params: list[Any]) -> str:
    """SQL true for an event `e` whose payload (blob `b`) the policy says may go; binds into `params`."""

    def cutoff(days: float) -> Any:
        return bind_time(dialect, now - timedelta(days=days))  # type: ignore[arg-type]

    def case(column: str, rules: dict[str, float], hosts: bool) -> tuple[str, list[Any]]:
        whens, bound = [], []
        for name, days in sorted(rules.items()):
            if hosts and name.startswith("*."):
                whens.append(
                    f"WHEN lower({column}) = ? OR lower({column}) LIKE ? ESCAPE '{LIKE_ESCAPE}' THEN ?"
                )
                bound += [name[2:], _like(name[2:]), cutoff(days)]
            else:
                whens.append(f"WHEN {'lower(' + column + ')' if hosts else column} = ? THEN ?")
                bound += [name, cutoff(days)]
        return (f"(CASE {' '.join(whens)} END)" if whens else "NULL"), bound

    agent, agent_params = case("e.agent", policy.agents, False)
    host, host_params = case("e.host", policy.hosts, True)
    parts = []
    if policy.larger_than is not None:
        parts.append("b.size > ?")
        params.append(policy.larger_than)
    if policy.agents:  # a rule names the agent and the event is older than it keeps
        parts.append(f"{agent} > e.at")
        params.extend(agent_params)
    if policy.hosts:
        parts.append(f"{host} > e.at")
        params.extend(host_params)
    if policy.older_than_days is not None:
        parts.append(f"({agent} IS NULL AND {host} IS NULL AND e.at < ?)")
        params.extend([*agent_params, *host_params, cutoff(policy.older_than_days)])
    return "(" + (" OR ".join(parts) or "1 = 0") + ")"


def due_payloads(reader: Reader, policy: Policy, now: datetime) -> list[dict[str, Any]]:
    """Every payload not yet pruned that the policy says may go: sha256, size, stored_size, location."""
    params: list[Any] = [RECORD_KINDS]
    due = due_sql(policy, reader.dialect, now, params)
    sql = (
        "SELECT b.sha256, b.size, b.stored_size, b.location FROM blobs b JOIN ("
        f" SELECT e.payload_sha256 AS sha, MIN(CASE WHEN e.kind NOT LIKE ? AND {due} THEN 1 ELSE 0 END)"
        " AS every FROM events e JOIN blobs b ON b.sha256 = e.payload_sha256"
        " WHERE NOT EXISTS (SELECT 1 FROM pruned p WHERE p.sha256 = e.payload_sha256)"
        " GROUP BY e.payload_sha256) d ON d.sha = b.sha256 WHERE d.every = 1 ORDER BY b.sha256"
    )
    return reader.rows(sql, params, "find the payloads the retention policy lets go")
