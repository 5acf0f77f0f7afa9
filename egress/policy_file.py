"""The policy file (`FLIGHTLOG_HOME/egress.toml`, or `--policy FILE`) read into a `Policy`.

```toml
default = "deny"          # what no rule matches gets: "allow" (the default) or "deny"
ask_timeout = "2m"        # an `ask` nobody answers is refused after this long (default 2m)
retired_hosts = true      # refuse FLIGHTLOG_HOME/refused_hosts.txt's hosts on every path (default)

[[rule]]                  # first match wins, top down
name = "no-shell-tools"   # names the rule in refusals (default rule-N, N its place in the file)
action = "deny"           # allow | deny | ask
tools = ["shell_*"]       # MCP tools/call names; args = { path = "/etc/*" } for their arguments
[[rule]]
action = "allow"
hosts = ["api.anthropic.com", ".github.com"]   # the one host language (`formats.hosts`)
methods = ["GET", "POST"]
paths = ["/v1/*"]
agents = ["alpha"]        # sessions = [...], tasks = [...]
[[rule]]
name = "git-over-ssh"
action = "allow"
protocol = "tcp"          # http | tcp | udp | dns | quic | stdio, or a list (default: every one)
hosts = "github.com"
port = 22                 # a port, "8000-8999", or a list of those (default: every port)

[[budget]]                # model calls' usage from the Ledger; refused once reached
name = "alpha-daily"
per = "agent"             # agent | session | task: whose usage is counted
period = "day"            # day (UTC) | all
tokens = 200000           # tokens in + out; and/or cost_usd = 5.0
agents = ["alpha"]        # the same scope keys as a rule narrow which calls it limits

[[rate]]
name = "slow-down"
requests = 60             # at most this many calls in its scope ...
window = "1m"             # ... per this sliding window, per agent (per = session | task)
```

Every key is checked: an unknown key, a wrong type, a malformed host, an empty list or two rules of
one name is an error naming the file and where, so a typo never loosens a policy silently.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, Final, cast

from egress.errors import PolicyFileError
from egress.limits import PERIODS, PERS, Budget, Per, Period, Rate
from egress.patterns import any_glob, host_pattern
from egress.policy import DEFAULT_ASK_TIMEOUT, Policy
from egress.rules import ACTIONS, PROTOCOLS, Action, Rule, Scope
from formats import durations

FILE_NAME: Final = "egress.toml"
TOP: Final = frozenset(
    {"default", "ask_timeout", "retired_hosts", "rule", "budget", "rate", "sandbox", "lend"}
)
"""`[sandbox]` is the sealed command's filesystem (read by `flightlog.sandbox.policy_table`), `[lend]`
the placeholders `flightlog run` lends it (read by `flightlog.lending`)."""
SCOPE_KEYS: Final = (
    "hosts", "protocol", "port", "methods", "paths", "agents", "sessions", "tasks", "tools", "args"
)  # fmt: skip
RULE_KEYS: Final = frozenset({"name", "action", *SCOPE_KEYS})
BUDGET_KEYS: Final = frozenset({"name", "per", "period", "tokens", "cost_usd", *SCOPE_KEYS})
RATE_KEYS: Final = frozenset({"name", "per", "requests", "window", *SCOPE_KEYS})
_NAME: Final = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_METHOD: Final = re.compile(r"^[A-Z]{1,20}$")


def policy_text(path: Path) -> str | None:
    """The file's text; None when there is no file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise PolicyFileError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e


def load_policy_file(path: Path, home: Path | None = None) -> Policy:
    """The policy in `path` (with `home`'s retired hosts unless it says `retired_hosts = false`);
    an empty policy when the file does not exist."""
    text = policy_text(path)
    if text is None:
        return parse_policy({}, str(path), home)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyFileError(f"{path}: not TOML: {e}") from e
    return parse_policy(data, str(path), home)


def parse_policy(data: Mapping[str, Any], source: str, home: Path | None = None) -> Policy:
    """A `Policy` from the TOML's tables (see the module's docstring)."""
    _known(data, TOP, source)
    default = data.get("default", "allow")
    if default not in ("allow", "deny"):
        raise PolicyFileError(f'{source}: default is "allow" or "deny", not {default!r}')
    timeout = _duration(data.get("ask_timeout", DEFAULT_ASK_TIMEOUT), f"{source}: ask_timeout")
    retired_on = data.get("retired_hosts", True)
    if not isinstance(retired_on, bool):
        raise PolicyFileError(f"{source}: retired_hosts is true or false")
    names: set[str] = set()
    rules = tuple(
        _rule(item, i, f"{source}: rule {i}", names)
        for i, item in enumerate(_tables(data, "rule", source), start=1)
    )
    budgets = tuple(
        _budget(item, i, f"{source}: budget {i}", names)
        for i, item in enumerate(_tables(data, "budget", source), start=1)
    )
    rates = tuple(
        _rate(item, i, f"{source}: rate {i}", names)
        for i, item in enumerate(_tables(data, "rate", source), start=1)
    )
    retired = _retired(home) if retired_on and home is not None else None
    return Policy(
        rules=rules,
        default=cast(Action, default),
        budgets=budgets,
        rates=rates,
        ask_timeout=timeout,
        retired=retired if retired else None,
        source=source,
    )


def _retired(home: Path) -> Any:
    from catalog.errors import CatalogError
    from catalog.retired_hosts import load_refused_hosts

    try:
        return load_refused_hosts(home)
    except CatalogError as e:
        raise PolicyFileError(f"retired hosts: {e}") from e


def _tables(data: Mapping[str, Any], key: str, source: str) -> list[Mapping[str, Any]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise PolicyFileError(f"{source}: {key} is a list of tables: write [[{key}]] above each one")
    return items


def _known(table: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    if extra := sorted(set(table) - known):
        raise PolicyFileError(f"{where}: unknown key {extra[0]!r} (known: {', '.join(sorted(known))})")


def _name(table: Mapping[str, Any], default: str, where: str, names: set[str]) -> str:
    name = table.get("name", default)
    if not isinstance(name, str) or not _NAME.match(name):
        raise PolicyFileError(f"{where}: name is 1-64 letters, digits, '_', '.' or '-', not {name!r}")
    if name in names:
        raise PolicyFileError(f"{where}: the name {name!r} is used twice")
    names.add(name)
    return name


def _rule(table: Mapping[str, Any], i: int, where: str, names: set[str]) -> Rule:
    _known(table, RULE_KEYS, where)
    action = table.get("action")
    if action not in ACTIONS:
        raise PolicyFileError(f"{where}: action is one of {', '.join(ACTIONS)}, not {action!r}")
    name = _name(table, f"rule-{i}", where, names)
    return Rule(name, cast(Action, action), scope(table, f"{where} ({name})"), i)


def _budget(table: Mapping[str, Any], i: int, where: str, names: set[str]) -> Budget:
    _known(table, BUDGET_KEYS, where)
    name = _name(table, f"budget-{i}", where, names)
    at = f"{where} ({name})"
    tokens, cost = table.get("tokens"), table.get("cost_usd")
    if tokens is None and cost is None:
        raise PolicyFileError(f"{at}: a budget needs tokens, cost_usd or both")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        raise PolicyFileError(f"{at}: tokens is a whole number of 0 or more")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0):
        raise PolicyFileError(f"{at}: cost_usd is a number of 0 or more")
    return Budget(
        name,
        scope(table, at),
        per=_choice(table, "per", PERS, "agent", at),  # type: ignore[arg-type]
        period=cast(Period, _choice(table, "period", PERIODS, "day", at)),
        tokens=tokens,
        cost_usd=None if cost is None else float(cost),
    )


def _rate(table: Mapping[str, Any], i: int, where: str, names: set[str]) -> Rate:
    _known(table, RATE_KEYS, where)
    name = _name(table, f"rate-{i}", where, names)
    at = f"{where} ({name})"
    requests = table.get("requests")
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        raise PolicyFileError(f"{at}: requests is a whole number of 1 or more")
    window = _duration(table.get("window", "1m"), f"{at}: window")
    if window <= 0:
        raise PolicyFileError(f"{at}: window is longer than 0 s")
    per = cast(Per, _choice(table, "per", PERS, "agent", at))
    return Rate(name, scope(table, at), requests, timedelta(seconds=window), per)


def _choice(table: Mapping[str, Any], key: str, choices: tuple[str, ...], default: str, where: str) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise PolicyFileError(f"{where}: {key} is one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _duration(value: Any, where: str) -> float:
    """Seconds from `90`, `"90s"`, `"2m"`, `"1h"`, `"500ms"`."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    seconds = durations.seconds(value) if isinstance(value, str) else None
    if seconds is None:
        raise PolicyFileError(f"{where} is a duration like 30s, 2m or 1h, not {value!r}")
    return seconds


def _strings(table: Mapping[str, Any], key: str, where: str) -> list[str] | None:
    """A key holding a string or a non-empty list of them (None when absent)."""
    if key not in table:
        return None
    value = table[key]
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise PolicyFileError(f"{where}: {key} is a string or a non-empty list of strings")
    return items


def scope(table: Mapping[str, Any], where: str) -> Scope:
    """The scope keys of a rule, budget or rate, read and compiled (`egress.rules.Scope`)."""
    hosts = tuple(host_pattern(h, f"{where}: hosts") for h in _strings(table, "hosts", where) or ())
    methods = _strings(table, "methods", where)
    if methods is not None:
        methods = [m.upper() for m in methods]
        if bad := [m for m in methods if not _METHOD.match(m)]:
            raise PolicyFileError(f"{where}: methods: {bad[0]!r} is not an HTTP method")
    globs = {k: _strings(table, k, where) for k in ("paths", "agents", "sessions", "tasks", "tools")}
    args = _args(table.get("args"), where)
    protocols = _protocols(table, where)
    ports = _ports(table.get("port"), where) if "port" in table else ()
    if protocols is not None:
        if "http" not in protocols and (methods is not None or globs["paths"] is not None):
            raise PolicyFileError(f"{where}: methods and paths name HTTP requests: add http to protocol")
        if not protocols & {"http", "stdio"} and (globs["tools"] is not None or args):
            raise PolicyFileError(f"{where}: tools and args name MCP calls (over http or stdio)")
    written = [
        f"port={','.join(_range_text(r) for r in ports)}"
        if k == "port"
        else f"{k}={','.join(_strings(table, k, where) or ())}"
        for k in SCOPE_KEYS
        if k in table and k != "args"
    ]
    written += [f"args.{'.'.join(keys)}={','.join(vals)}" for keys, vals in args]
    return Scope(
        hosts=hosts,
        protocols=protocols,
        ports=ports,
        methods=frozenset(methods) if methods is not None else None,
        **{k: any_glob(v) if v is not None else None for k, v in globs.items()},
        args=tuple((keys, any_glob(vals)) for keys, vals in args),
        text=" ".join(written),
    )


def _protocols(table: Mapping[str, Any], where: str) -> frozenset[str] | None:
    names = _strings(table, "protocol", where)
    if names is None:
        return None
    lowered = {n.lower() for n in names}
    if bad := sorted(lowered - set(PROTOCOLS)):
        raise PolicyFileError(f"{where}: protocol is one of {', '.join(PROTOCOLS)}, not {bad[0]!r}")
    return frozenset(lowered)


def _ports(value: Any, where: str) -> tuple[tuple[int, int], ...]:
    """`port = 22`, `"8000-8999"` or a non-empty list of those, as inclusive ranges."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise PolicyFileError(f'{where}: port is a port, a range like "8000-8999" or a non-empty list')
    ranges = []
    for item in items:
        first, _, last = str(item).partition("-") if isinstance(item, str) else (item, "", item)
        try:
            lo, hi = _port_number(first), _port_number(last if last != "" else first)
        except ValueError:
            raise PolicyFileError(
                f'{where}: port {item!r} is not a port (1-65535) or a range like "8000-8999"'
            ) from None
        if lo > hi:
            raise PolicyFileError(f"{where}: port range {item!r} ends before it starts")
        ranges.append((lo, hi))
    return tuple(ranges)


def _port_number(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(value)
    number = int(value.strip()) if isinstance(value, str) and value.strip().isdigit() else value
    if not isinstance(number, int) or not 0 < number < 65536:
        raise ValueError(value)
    return number


def _range_text(port_range: tuple[int, int]) -> str:
    lo, hi = port_range
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _args(value: Any, where: str) -> list[tuple[tuple[str, ...], list[str]]]:
    if value is None:
        return []
    if not isinstance(value, dict) or not value:
        raise PolicyFileError(f"{where}: args is a table of argument name = glob (or a list of globs)")
    out = []
    for key, globs in value.items():
        items = [globs] if isinstance(globs, str) else globs
        if not isinstance(items, list) or not items or not all(isinstance(g, str) for g in items):
            raise PolicyFileError(f"{where}: args.{key} is a glob or a non-empty list of globs")
        out.append((tuple(key.split(".")), items))
    return out
