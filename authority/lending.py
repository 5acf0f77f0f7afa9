"""The operator's policy for the tokens flightlog mints by itself (`flightlog run`, `flightlog mcp`).

A user who never mints a token still gets a closed proxy that works: `flightlog run` lends its child
a token minted from this policy (in FLIGHTLOG_TOKEN), `flightlog mcp` lends one to its `call` tool.
The policy lives in `FLIGHTLOG_HOME/policy.toml`; without the file it is the default:

```toml
grants = ["call"]        # add "ledger" to let agents read the Ledger, "write" to change the Directory
remote_tools = true      # every tool row whose contract runs nothing on this machine
tools = []               # further rows by name (a row that runs a command needs to be named here,
                         # and the proxy started with --allow-local-commands)
expires = "24h"          # how long a minted token lives
```

The token names every tool it allows and binds each one's contract hash (`contract` caveat), so a
row rewritten after the token was minted refuses it. Never more than the policy grants.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from authority import tokens
from authority.caveats import GRANTS, format_instant
from authority.errors import AuthorityError
from catalog.errors import CatalogError
from catalog.local_rows import contract_hash, tool_runs_locally
from catalog.tool import Tool
from formats import durations

if TYPE_CHECKING:
    from catalog.directory import Directory

POLICY_FILE: Final = "policy.toml"
_TOKEN_NAME = re.compile(r"^[A-Za-z0-9_.@/-]+$")


class LendingError(AuthorityError):
    """The policy file cannot be read or says something that is not a policy."""


@dataclass(frozen=True, slots=True)
class Policy:
    """What a token minted by flightlog itself may do."""

    grants: tuple[str, ...] = ("call",)
    remote_tools: bool = True
    tools: tuple[str, ...] = ()
    expires: timedelta = timedelta(hours=24)


def parse_policy(data: dict[str, Any], source: str = POLICY_FILE) -> Policy:
    """A `Policy` from the TOML table; an unknown key or a bad value is an error naming it."""
    known = {"grants", "remote_tools", "tools", "expires"}
    if extra := sorted(set(data) - known):
        raise LendingError(f"{source}: unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")
    grants = data.get("grants", ["call"])
    if not isinstance(grants, list) or any(g not in GRANTS for g in grants):
        raise LendingError(f"{source}: grants is a list of {', '.join(GRANTS)}")
    tools = data.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise LendingError(f"{source}: tools is a list of row names")
    remote = data.get("remote_tools", True)
    if not isinstance(remote, bool):
        raise LendingError(f"{source}: remote_tools is true or false")
    expires = data.get("expires", "24h")
    seconds = durations.seconds(expires) if isinstance(expires, str) else None
    if seconds is None:
        raise LendingError(f"{source}: expires is a duration like 30m, 12h or 7d")
    return Policy(tuple(grants), remote, tuple(tools), timedelta(seconds=seconds))


def load_policy(home: Path) -> Policy:
    """The policy in `home/policy.toml`, or the default when there is none."""
    path = home / POLICY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Policy()
    except OSError as e:
        raise LendingError(f"cannot read {path}: {e.strerror}") from e
    try:
        return parse_policy(tomllib.loads(text), str(path))
    except tomllib.TOMLDecodeError as e:
        raise LendingError(f"{path}: {e}") from e


def allowed_tools(policy: Policy, rows: Iterable[Tool]) -> list[Tool]:
    """The rows a policy token may call: those that run nothing here (when `remote_tools`), plus the
    rows the policy names (case-insensitively)."""
    named = {t.casefold() for t in policy.tools}
    return [
        t for t in rows if t.name.casefold() in named or (policy.remote_tools and not tool_runs_locally(t))
    ]


def policy_caveats(
    policy: Policy, rows: Iterable[Tool], *, now: datetime | None = None, task: str | None = None
) -> list[str]:
    """The caveats of a token minted from `policy` over the Directory's tool rows."""
    tools = sorted(allowed_tools(policy, rows), key=lambda t: t.name)
    at = (now or datetime.now(UTC)) + policy.expires
    caveats = [f"grants = {','.join(policy.grants) or 'call'}"]
    if not policy.grants:
        caveats = ["grants = call", "grants = ledger"]  # two disjoint sets: no right at all
    names = ",".join(t.name for t in tools) or "none"
    caveats.append(f"tools = {names}")
    if tools:
        caveats.append("contract = " + ",".join(f"{t.name}:{contract_hash(t)}" for t in tools))
    caveats.append(f"expires < {format_instant(at)}")
    if task:
        caveats.append(f"task = {task}")
    return caveats


def directory_tools(directory: Directory) -> list[Tool]:
    """Every readable tool row of a Directory (a row that does not read as a tool is skipped: it
    cannot be dispatched either)."""
    found = []
    for row in directory.rows("tool"):
        try:
            doc = directory.document(row.id)
            found.append(Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle))
        except CatalogError:
            continue
    return found


def mint_policy_token(home: Path, directory: Directory, *, task: str | None = None) -> str:
    """A token minted from the root key in `home`, as the policy there allows, over `directory`."""
    caveats = policy_caveats(load_policy(home), directory_tools(directory), task=task)
    return tokens.mint(tokens.root_key(home), caveats).encode()
