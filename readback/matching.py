"""How a live request finds its recorded twin: the matching strategies, the volatile-part rules, the miss.

Real agents never send the same bytes twice: tool-call ids, timestamps and request ids change from run
to run, SDKs add `stream_options`, header order follows the client's version. So a run chooses its
strategies, tried in order for every request:

- `exact`: method, canonical URL and body bytes as recorded (the listed headers too, in order);
- `normalized`: the same after the rules (`Rules`, shipped in match_rules.toml, overridable) are applied
  to both sides: keys dropped, volatile values and patterns replaced by numbered placeholders, header
  order ignored;
- `url`: method and URL only (serve-replay's old loose fallback; not a default of `run --replay`);

and `sequence` decides what repeated identical requests get: the recorded answers in recorded order
(with it) or the first recorded answer every time (without it).

When nothing matches, `closest` names the recorded request most like the live one and the first way it
differs, in one line. Everything here is pure: tested without a proxy.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from readback.errors import MatchingError
from readback.recorded import canonical_url
from storage.heads import Fields

STRATEGIES: Final = ("exact", "normalized", "url")
DEFAULT_STRATEGIES: Final = ("exact", "normalized", "sequence")
SHOWN: Final = 60


@dataclass(frozen=True, slots=True)
class Request:
    """A request as matching sees it: method, URL (as recorded: secrets concealed), fields, body."""

    method: str
    url: str
    fields: Fields = ()
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Rules:
    """The volatile parts of a request, ignored by the `normalized` strategy."""

    drop_keys: frozenset[str] = frozenset()
    volatile_keys: frozenset[str] = frozenset()
    drop_query: frozenset[str] = frozenset()
    headers: tuple[str, ...] = ()
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()

    @classmethod
    def from_data(cls, data: dict[str, Any], base: Rules | None = None) -> Rules:
        """Rules from a parsed rules file; a key it leaves out keeps `base`'s value."""
        known = {"drop_keys", "volatile_keys", "drop_query", "headers", "patterns"}
        unknown = set(data) - known
        if unknown:
            first = sorted(unknown)[0]
            raise MatchingError(f"unknown match rule {first!r} (known: {', '.join(sorted(known))})")
        base = base or cls()

        def names(key: str, default: Iterable[str]) -> tuple[str, ...]:
            value = data.get(key, list(default))
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise MatchingError(f"match rule {key} is a list of strings")
            return tuple(value)

        patterns = base.patterns
        if "patterns" in data:
            if not isinstance(data["patterns"], dict):
                raise MatchingError("match rule patterns is a table of NAME = 'regex'")
            compiled = []
            for name, source in data["patterns"].items():
                try:
                    compiled.append((str(name), re.compile(str(source))))
                except re.error as e:
                    raise MatchingError(f"match rule pattern {name}: {e}") from e
            patterns = tuple(compiled)
        return cls(
            drop_keys=frozenset(names("drop_keys", base.drop_keys)),
            volatile_keys=frozenset(names("volatile_keys", base.volatile_keys)),
            drop_query=frozenset(names("drop_query", base.drop_query)),
            headers=tuple(h.lower() for h in names("headers", base.headers)),
            patterns=patterns,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "drop_keys": sorted(self.drop_keys),
            "volatile_keys": sorted(self.volatile_keys),
            "drop_query": sorted(self.drop_query),
            "headers": list(self.headers),
            "patterns": {name: p.pattern for name, p in self.patterns},
        }


def default_rules() -> Rules:
    """The shipped rules (match_rules.toml beside this module)."""
    text = resources.files("readback").joinpath("match_rules.toml").read_text()
    return Rules.from_data(tomllib.loads(text))


def load_rules(path: Path | None) -> Rules:
    """The shipped rules, overridden key by key by a user's TOML file when one is given."""
    rules = default_rules()
    if path is None:
        return rules
    try:
        data = tomllib.loads(path.read_text())
    except OSError as e:
        raise MatchingError(f"cannot read match rules {path}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise MatchingError(f"match rules {path} is not TOML: {e}") from e
    return Rules.from_data(data, rules)


def parse_strategies(text: str) -> tuple[str, ...]:
    """`exact,normalized,sequence` as a tuple; an unknown name is one clear error."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if name not in (*STRATEGIES, "sequence"):
            raise MatchingError(f"unknown matching strategy {name!r} (use {', '.join(STRATEGIES)}, sequence)")
    if not any(n in STRATEGIES for n in names):
        raise MatchingError(f"--match names no strategy to match by ({', '.join(STRATEGIES)})")
    return names


# ---- normalizing ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Pass:
    """One normalization of one request: the placeholders handed out and the rules that changed it."""

    rules: Rules
    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    fired: set[str] = field(default_factory=set)

    def text(self, value: str) -> str:
        for name, pattern in self.rules.patterns:
            value = pattern.sub(functools.partial(self._sub, name), value)
        return value

    def _sub(self, name: str, match: re.Match[str]) -> str:
        return self._placeholder(name, match.group(0))

    def _placeholder(self, name: str, value: str) -> str:
        self.fired.add(name)
        key = (name, value)
        if key not in self.seen:
            self.seen[key] = f"<{name}#{sum(1 for k in self.seen if k[0] == name) + 1}>"
        return self.seen[key]

    def value(self, value: Any) -> Any:
        if isinstance(value, dict):
            out = {}
            for k, v in value.items():
                if k in self.rules.drop_keys:
                    self.fired.add(k)
                elif k in self.rules.volatile_keys:
                    self.fired.add(k)
                    out[k] = f"<{k}>"
                else:
                    out[k] = self.value(v)
            return out
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


def parse_json(body: bytes) -> Any | None:
    """The body as JSON, or None when it is not JSON (then it is compared as text or bytes)."""
    if not body or body[:1] not in b"{[":
        return None
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def normalized_body(body: bytes, rules: Rules) -> tuple[Any, frozenset[str]]:
    """The body with the rules applied (JSON: a value; text: a string; else bytes) and the rules fired."""
    one = _Pass(rules)
    doc = parse_json(body)
    if doc is not None:
        return one.value(doc), frozenset(one.fired)
    try:
        return one.text(body.decode("utf-8")), frozenset(one.fired)
    except UnicodeDecodeError:
        return body, frozenset()


def normalized_url(url: str, rules: Rules) -> str:
    parts = urlsplit(canonical_url(url))
    if not parts.query or not rules.drop_query:
        return urlunsplit(parts)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in rules.drop_query]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _listed(fields: Fields, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    wanted = set(names)
    return tuple(
        (n.decode("latin-1").lower(), v.decode("latin-1"))
        for n, v in fields
        if n.decode("latin-1").lower() in wanted
    )


def _digest(value: Any) -> str:
    if isinstance(value, bytes):
        return hashlib.sha256(value).hexdigest()
    data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()


def key(strategy: str, request: Request, rules: Rules) -> tuple[str, ...]:
    """The key a request is filed under for one strategy; equal keys match."""
    method = request.method.upper()
    if strategy == "url":
        return (method, canonical_url(request.url))
    if strategy == "exact":
        heads = json.dumps(_listed(request.fields, rules.headers))
        return (method, canonical_url(request.url), hashlib.sha256(request.body).hexdigest(), heads)
    if strategy == "normalized":
        body, _ = normalized_body(request.body, rules)
        heads = json.dumps(sorted(_listed(request.fields, rules.headers)))
        return (method, normalized_url(request.url, rules), _digest(body), heads)
    raise MatchingError(f"unknown matching strategy {strategy!r}")


def fired(request: Request, rules: Rules) -> tuple[str, ...]:
    """The rules that changed this request when normalized (for the per-request report)."""
    return tuple(sorted(normalized_body(request.body, rules)[1]))


# ---- the closest recorded request, when nothing matched ---------------------------------------------


def _flat(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf values by JSON path (`messages[0].content`), for counting and naming differences."""
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{path}.{k}" if path else str(k)))
        return out
    if isinstance(value, list):
        if not value:
            return {path: []}
        out = {}
        for i, v in enumerate(value):
            out.update(_flat(v, f"{path}[{i}]"))
        return out
    return {path: value}


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    text = json.dumps(value) if not isinstance(value, bytes) else repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


_ABSENT: Final = object()


def differences(recorded: Request, live: Request, rules: Rules) -> list[str]:
    """How `live` differs from `recorded` (after normalizing), most telling first: method, URL, body paths."""
    out: list[str] = []
    if recorded.method.upper() != live.method.upper():
        out.append(f"method is {recorded.method} there, {live.method} here")
    r_url, l_url = normalized_url(recorded.url, rules), normalized_url(live.url, rules)
    if r_url != l_url:
        out.append(f"URL is {r_url} there, {l_url} here")
    r_body, _ = normalized_body(recorded.body, rules)
    l_body, _ = normalized_body(live.body, rules)
    if isinstance(r_body, dict | list) and isinstance(l_body, dict | list):
        r_flat, l_flat = _flat(r_body), _flat(l_body)
        for path in dict.fromkeys([*r_flat, *l_flat]):
            a, b = r_flat.get(path, _ABSENT), l_flat.get(path, _ABSENT)
            if a != b:
                out.append(f"body {path or '(top)'} is {_show(a)} there, {_show(b)} here")
    elif r_body != l_body:
        out.append(f"body is {_show(r_body)} there, {_show(l_body)} here")
    r_heads = sorted(_listed(recorded.fields, rules.headers))
    l_heads = sorted(_listed(live.fields, rules.headers))
    if r_heads != l_heads:
        out.append(f"headers {rules.headers} are {r_heads} there, {l_heads} here")
    return out


def closest(live: Request, recorded: Sequence[Request], rules: Rules) -> tuple[int, list[str]] | None:
    """The index of the recorded request most like `live` and how they differ; None if none recorded.

    Closeness: same method, then same URL, then the fewest differing body paths, then the earliest.
    """
    best: tuple[tuple[int, int, int], int, list[str]] | None = None
    for i, other in enumerate(recorded):
        diffs = differences(other, live, rules)
        score = (
            int(other.method.upper() != live.method.upper()),
            int(normalized_url(other.url, rules) != normalized_url(live.url, rules)),
            len(diffs),
        )
        if best is None or score < best[0]:
            best = (score, i, diffs)
    return None if best is None else (best[1], best[2])


def miss_line(
    live: Request,
    recorded: Sequence[Request],
    labels: Sequence[str],
    rules: Rules,
    used: Sequence[bool] = (),
) -> str:
    """One line for a request with no recorded answer: the closest recorded request and how it differs.

    `rules` are the ones the run matched by (no rules when it matched by exact bytes only), so a
    difference the run did not forgive is named, not normalized away.
    """
    found = closest(live, recorded, rules)
    if found is None:
        return f"no recorded answer for {live.method} {live.url}: the recording is empty"
    i, diffs = found
    if not diffs and i < len(used) and used[i]:
        how = "it is the same request, but every recorded answer to it was already used"
    elif not diffs:
        how = "they differ only in byte layout (JSON key order or spacing, an encoding)"
    else:
        more = len(diffs) - 1
        how = diffs[0] + (f" (and {more} more difference{'s' if more > 1 else ''})" if more else "")
    return f"no recorded answer for {live.method} {live.url}; closest recorded: {labels[i]}: {how}"
