"""Lent credentials: the placeholder a run's command holds for each secret, and the book the proxy reads.

`flightlog run` lends its command a placeholder in place of each secret it names (`--lend`, the
policy file's `[lend]` table, the providers' usual variables by default): a value that authenticates
nothing, unique to the run, shaped like the real key (its prefix, `sk-`, `sk-ant-api03-`, `ghp_`, kept
and its length matched, for clients that check the shape). The real value stays with the proxy, which
puts it in on the way out, for the secret's hosts only (`egress.credential_swap`).

Which placeholder stands for which secret is written, by name only (never a value), in a loan book:
one file per run under `FLIGHTLOG_HOME/loans/`, mode 0600 in a 0700 folder (FLIGHTLOG_HOME is not in
a sealed command's world). A proxy already running reads the folder again whenever it changes, so a
run's placeholders work from its command's first request and stop working when the run ends (its
file is removed; a file whose run has died is ignored).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from egress.processes import alive

FOLDER: Final = "loans"
ALPHABET: Final = string.ascii_letters + string.digits
MIN_RANDOM: Final = 24
"""Random characters in a placeholder at least: beyond guessing, and long enough to be found whole."""
_ISSUERS: Final = (
    "sk-proj- sk-svcacct- sk-admin- sk-ant-api03- sk-ant-admin01- sk-ant- sk-or-v1- sk- ghp_ gho_ ghu_ ghs_ "
    "ghr_ github_pat_ glpat- hf_ xai- gsk_ pplx- fw_ r8_ AIza xoxb- xoxp- npm_ pypi-"
)
KNOWN_PREFIXES: Final = tuple(sorted(_ISSUERS.split(), key=len, reverse=True))
"""Issuers' key prefixes, kept in a placeholder (clients check them: `sk-`, `sk-ant-`)."""
_PREFIX: Final = re.compile(r"^[a-z]{2,4}[-_]")
"""Any other key's kind: one short lowercase word ended by `-` or `_` (never more of the key: a
prefix guessed wider could copy secret characters into the placeholder)."""


@dataclass(frozen=True, slots=True)
class Loan:
    """One variable of the command, holding `placeholder` where the secret `name` would be."""

    variable: str
    name: str
    placeholder: str


def prefix_of(value: str) -> str:
    """The part of a key that says what kind of key it is (`sk-ant-api03-`), kept in its placeholder."""
    known = next((p for p in KNOWN_PREFIXES if value.startswith(p)), None)
    found = _PREFIX.match(value)
    prefix = known if known is not None else found.group(0) if found else ""
    return prefix if len(value) - len(prefix) >= 8 else ""


def placeholder_for(value: str) -> str:
    """A fresh placeholder shaped like `value`: its prefix, then random letters and digits to its
    length (at least `MIN_RANDOM` of them)."""
    prefix = prefix_of(value)
    count = max(len(value) - len(prefix), MIN_RANDOM)
    return prefix + "".join(secrets.choice(ALPHABET) for _ in range(count))


def lend(wanted: Mapping[str, str], values: Mapping[str, str]) -> tuple[Loan, ...]:
    """A placeholder for each variable -> secret name in `wanted` (`values`: the secrets' values, for
    their shape). A secret lent under two variables gets one placeholder."""
    made: dict[str, str] = {}
    loans = []
    for variable, name in wanted.items():
        if name not in made:
            made[name] = placeholder_for(values[name])
        loans.append(Loan(variable, name, made[name]))
    return tuple(loans)


def folder(home: Path) -> Path:
    return home / FOLDER


def register(home: Path, run: str, loans: tuple[Loan, ...]) -> Path:
    """Write the run's placeholders (placeholder -> secret name) to its page of the book, 0600."""
    where = folder(home)
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    page = where / f"{run}.json"
    text = json.dumps({"pid": os.getpid(), "loans": {loan.placeholder: loan.name for loan in loans}})
    temporary = where / f".{run}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, page)
    return page


def close(page: Path) -> None:
    """The run ended: its placeholders stand for nothing from now on."""
    with contextlib.suppress(FileNotFoundError):
        page.unlink()


def read_pages(where: Path) -> dict[str, str]:
    """Every live run's placeholders (placeholder -> secret name); an unreadable page lends nothing."""
    found: dict[str, str] = {}
    try:
        pages = sorted(where.glob("*.json"))
    except OSError:
        return found
    for page in pages:
        try:
            data = json.loads(page.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        loans = data.get("loans") if isinstance(data, dict) else None
        if not isinstance(loans, dict) or not alive(data.get("pid")):
            continue
        found.update({p: n for p, n in loans.items() if isinstance(p, str) and isinstance(n, str) and p})
    return found


class LoanBook:
    """The proxy's view of the book: read again whenever the folder changed (a stat per request)."""

    def __init__(self, home: Path) -> None:
        self.where = folder(home)
        self._stamp: tuple[int, int] | None = None
        self._loans: dict[str, str] = {}

    def current(self) -> Mapping[str, str]:
        """placeholder -> secret name, for every run lending now."""
        try:
            st = os.stat(self.where)
            stamp = (st.st_mtime_ns, st.st_ino)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            self._loans = read_pages(self.where) if stamp is not None else {}
        return self._loans
