"""The secrets flightlog is configured with: NAME=value lines from a file and named environment variables.

The values are what the Redactor replaces by `[NAME]` before anything reaches the Ledger. The same
file names, per secret, the hosts the dispatch door may send it to (`NAME.hosts=host,host`, read by
`load_secret_hosts`; see `catalog.secret_hosts` for the patterns and the defaults): those lines are
not secrets, and a file without them reads as before.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from formats.hosts import HostError, parse_pattern
from recording.errors import SecretsError

#: Values shorter than this are refused: replacing them would shred unrelated bytes.
MIN_LENGTH = 4

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_HOSTS_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\.hosts\s*=\s*(.*?)\s*$")
_DOUBLE_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "$": "$", "`": "`"}


def _unquote(raw: str) -> str | None:
    """The value of one line's right-hand side, or None when its quoting is malformed.

    `'single'` is taken literally; `"double"` understands backslash escapes of `" \\ n t r $ \\``;
    an unquoted value ends at ` #` (whitespace then #), which starts a comment, as in dotenv files.
    """
    if raw[:1] == "'":
        end = raw.find("'", 1)
        if end < 0 or (raw[end + 1 :].strip() and not raw[end + 1 :].lstrip().startswith("#")):
            return None
        return raw[1:end]
    if raw[:1] == '"':
        out: list[str] = []
        i = 1
        while i < len(raw):
            ch = raw[i]
            if ch == "\\" and i + 1 < len(raw):
                nxt = raw[i + 1]
                out.append(_DOUBLE_ESCAPES.get(nxt, "\\" + nxt))
                i += 2
                continue
            if ch == '"':
                rest = raw[i + 1 :].strip()
                return "".join(out) if not rest or rest.startswith("#") else None
            out.append(ch)
            i += 1
        return None
    return re.split(r"\s+#", raw, maxsplit=1)[0]


def parse_secrets(text: str, source: str = "secrets") -> dict[str, str]:
    """NAME=value pairs from dotenv-style text; the last of repeated names wins."""
    secrets: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _HOSTS_LINE.match(line):
            continue
        match = _LINE.match(line)
        value = _unquote(match.group(2)) if match else None
        if match is None or value is None:
            raise SecretsError(f"{source}: line {number} is not NAME=value")
        secrets[match.group(1)] = value
    return secrets


def parse_secret_hosts(text: str, source: str = "secrets") -> dict[str, tuple[str, ...]]:
    """`NAME.hosts=pattern[,pattern...]` lines: the hosts each named secret may be sent to."""
    hosts: dict[str, tuple[str, ...]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _HOSTS_LINE.match(line)
        if match is None:
            continue
        value = _unquote(match.group(2))
        patterns = tuple(p.strip().lower() for p in (value or "").split("#")[0].split(",") if p.strip())
        bad = [p for p in patterns if not _host_pattern(p)]
        if value is None or not patterns or bad:
            raise SecretsError(
                f"{source}: line {number}: {match.group(1)}.hosts takes hosts like api.example.com,"
                f" api.example.com:8443, *.example.com, 10.0.0.0/8, local or *"
                f" (got {(bad or [match.group(2)])[0]!r})"
            )
        hosts[match.group(1)] = patterns
    return hosts


def _host_pattern(text: str) -> bool:
    """Whether a `NAME.hosts` entry is `local` or a pattern of the one host language (`formats.hosts`)."""
    if text == "local":
        return True
    try:
        parse_pattern(text)
    except HostError:
        return False
    return True


def load_secret_hosts(file: Path | None) -> dict[str, tuple[str, ...]]:
    """The `NAME.hosts` lines of the secrets file (none when there is no file)."""
    if file is None:
        return {}
    try:
        text = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise SecretsError(f"cannot read secrets file {file}: {e}") from e
    return parse_secret_hosts(text, source=str(file))


def check_secrets(secrets: Mapping[str, str], source: str = "secrets") -> None:
    """Refuse names that are not identifiers and values too short to redact safely."""
    for name, value in secrets.items():
        if not _NAME.fullmatch(name):
            raise SecretsError(f"{source}: {name!r} is not a valid secret name (letters, digits, _)")
        if len(value) < MIN_LENGTH:
            raise SecretsError(
                f"{source}: the value of {name} is shorter than {MIN_LENGTH} characters; "
                "redacting it would shred unrelated bytes"
            )


def load_secrets(
    file: Path | None,
    env_names: Sequence[str] = (),
    environ: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """The secrets to redact: NAME=value lines of `file`, then the named environment variables.

    Blank lines and `#` comments are ignored; `export NAME=value` and quoted values are accepted.
    A malformed line is an error naming its line number; a named variable that is not set, or any
    value shorter than 4 characters, is an error too: a secret that silently isn't redacted is
    worse than a proxy that refuses to start.
    """
    secrets: dict[str, str] = {}
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise SecretsError(f"cannot read secrets file {file}: {e}") from e
        secrets.update(parse_secrets(text, source=str(file)))
        check_secrets(secrets, source=str(file))
    for name in env_names:
        if not _NAME.fullmatch(name):
            raise SecretsError(f"{name!r} is not a valid environment variable name")
        if name not in environ:
            raise SecretsError(f"environment variable {name} is not set")
        secrets[name] = environ[name]
        check_secrets({name: environ[name]}, source=f"environment variable {name}")
    return secrets
