"""What `flightlog run` lends its command: placeholders for secrets, never the secrets themselves.

Which variables get one: each `--lend VARIABLE[=SECRET]`, each line of the policy file's `[lend]`
table (`VARIABLE = "SECRET"`), and, by default, the providers' usual variables for every provider key
the secrets file (or `--secret-env`) holds (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GITHUB_TOKEN` and
`GH_TOKEN`, ...). The run writes the placeholders to the loan book (`egress.loan_book`) for the proxy,
which swaps them for the real values on requests to each secret's hosts (`egress.credential_swap`).

The command's environment keeps no real value: a lent variable holds its placeholder, and any other
variable whose value is a secret's value is dropped (an operator's shell that exported the key).
"""

from __future__ import annotations

import os
import secrets
import tomllib
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from catalog.secret_hosts import DEFAULTS, SecretHosts
from egress import loan_book
from egress.loan_book import Loan
from flightlog import lent_files
from flightlog.errors import CommandError
from recording.errors import SecretsError
from recording.redaction.secrets import load_secret_hosts, load_secrets
from storage.locations import default_secrets_file

if TYPE_CHECKING:
    from collections.abc import Iterator

ALIASES: Final[Mapping[str, tuple[str, ...]]] = {"GITHUB_TOKEN": ("GITHUB_TOKEN", "GH_TOKEN")}
"""Secrets whose clients read more than one variable; every other provider key: its own name."""


@dataclass(frozen=True)
class Lending:
    """The loans of one run and what the command gets for them."""

    loans: tuple[Loan, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: Path | None = None
    drop: frozenset[str] = frozenset()
    """Variables of the operator's environment that hold a secret's value: not passed on."""
    secrets_file: Path | None = None
    """Where the real values are (absent from a sealed command's world)."""

    def child_env(self, base: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in base.items() if k not in self.drop} | dict(self.env)


def parse_lend(given: list[str] | None) -> dict[str, str]:
    """`--lend VARIABLE` (the secret of that name) or `--lend VARIABLE=SECRET`."""
    out: dict[str, str] = {}
    for item in given or []:
        variable, _, name = item.partition("=")
        variable, name = variable.strip(), (name.strip() or variable.strip())
        if not variable.isidentifier() or not name.isidentifier():
            raise CommandError(f"--lend wants VARIABLE or VARIABLE=SECRET, not {item!r}")
        out[variable] = name
    return out


def lend_table(policy: Path | None) -> dict[str, str]:
    """The policy file's `[lend]` table: VARIABLE = "SECRET" (none without a file or a table)."""
    if policy is None:
        return {}
    try:
        data = tomllib.loads(policy.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CommandError(f"{policy}: cannot read the [lend] table: {e}") from e
    table = data.get("lend", {})
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and k.isidentifier() and isinstance(v, str) and v.isidentifier()
        for k, v in table.items()
    ):
        raise CommandError(f'{policy}: [lend] maps VARIABLE = "SECRET" (names of letters, digits, _)')
    return dict(table)


def wanted(named: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    """variable -> secret: the providers' usual variables for the keys held, then those named."""
    out: dict[str, str] = {}
    for name in values:
        if name in DEFAULTS:
            out.update({variable: name for variable in ALIASES.get(name, (name,))})
    for variable, name in named.items():
        if name not in values:
            raise CommandError(f"cannot lend {name} to {variable}: the secrets file holds no {name}")
        out[variable] = name
    return out


def plan(
    secrets_file: Path | None,
    secret_env: list[str] | None,
    named: Mapping[str, str],
    home: Path,
    environ: Mapping[str, str] = os.environ,
) -> tuple[Lending, SecretHosts]:
    """The run's loans (placeholders made here) and the lent files and variables for them."""
    file = secrets_file or default_secrets_file(home)
    try:
        values = load_secrets(file, secret_env or (), environ)
        hosts = SecretHosts(load_secret_hosts(file))
    except SecretsError as e:
        raise CommandError(str(e)) from e
    loans = loan_book.lend(wanted(named, values), values)
    real = set(values.values())
    drop = frozenset(k for k, v in environ.items() if v in real)
    folder, file_env = lent_files.write_files(loans, hosts.of, environ) if loans else (None, {})
    env = {loan.variable: loan.placeholder for loan in loans} | file_env
    where = file.resolve() if file is not None and file.exists() else None
    return Lending(loans, env, folder, drop, where), hosts


@contextmanager
def registered(lending: Lending, home: Path) -> Iterator[None]:
    """The run's page of the loan book, for as long as its command runs; its files removed after."""
    page = (
        loan_book.register(home, f"{os.getpid()}-{secrets.token_hex(4)}", lending.loans)
        if lending.loans
        else None
    )
    try:
        yield
    finally:
        if page is not None:
            loan_book.close(page)
        lent_files.remove(lending.files)
