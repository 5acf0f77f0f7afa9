"""Placeholders where clients read keys from files: a netrc and git's credential store, lent to a run.

requests and curl read a netrc (requests honours `NETRC`), git asks a credential helper; each gets a
file naming the run's placeholder (never the real value) for every host of the secret that is a plain
host name or address. The files live in a folder of the run's own (`run --sealed` binds it into the
sandbox at the same path), which holds nothing else and is removed when the run ends. They point the
command there through its environment (`NETRC`, and git's `GIT_CONFIG_COUNT` variables adding a
`credential.helper`), so the operator's own `~/.netrc` and git configuration are left as they are.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from egress.loan_book import Loan
from formats.hosts import HostError, parse_pattern

USER: Final = "x-access-token"
"""The user name the files give with a token (GitHub's convention; a token server ignores it)."""


def plain_hosts(patterns: tuple[str, ...]) -> list[tuple[str, int | None]]:
    """The hosts (and ports) among a secret's patterns that a file can name: no wildcards, networks."""
    out: list[tuple[str, int | None]] = []
    for text in patterns:
        if text in ("*", "local") or "*" in text or "/" in text or text.startswith("."):
            continue
        try:
            parse_pattern(text)
        except HostError:
            continue
        host, sep, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
        out.append((host, int(port)) if sep and port.isdigit() else (text.strip("[]"), None))
    return out


def netrc_text(loans: tuple[Loan, ...], hosts: Callable[[str], tuple[str, ...]]) -> str:
    lines = []
    for loan in {loan.name: loan for loan in loans}.values():
        for host, _ in plain_hosts(hosts(loan.name)):
            lines.append(f"machine {host} login {USER} password {loan.placeholder}")
    return "\n".join(lines) + ("\n" if lines else "")


def git_credentials_text(loans: tuple[Loan, ...], hosts: Callable[[str], tuple[str, ...]]) -> str:
    lines = []
    for loan in {loan.name: loan for loan in loans}.values():
        for host, port in plain_hosts(hosts(loan.name)):
            authority = host if port is None else f"{host}:{port}"
            for scheme in ("https", "http"):
                lines.append(f"{scheme}://{USER}:{loan.placeholder}@{authority}")
    return "\n".join(lines) + ("\n" if lines else "")


def write_files(
    loans: tuple[Loan, ...], hosts: Callable[[str], tuple[str, ...]], environ: Mapping[str, str]
) -> tuple[Path | None, dict[str, str]]:
    """The run's folder of lent files (None when no loan names a plain host) and the variables that
    point the command at them."""
    netrc = netrc_text(loans, hosts)
    if not netrc:
        return None, {}
    folder = Path(tempfile.mkdtemp(prefix="flightlog-lent-"))
    folder.chmod(0o755)  # a sealed command's user reads it: it holds placeholders only
    for name, text in (("netrc", netrc), ("git-credentials", git_credentials_text(loans, hosts))):
        (folder / name).write_text(text, encoding="utf-8")
        (folder / name).chmod(0o644)
    count = int(environ.get("GIT_CONFIG_COUNT", "0") or 0)
    env = {
        "NETRC": str(folder / "netrc"),
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": "credential.helper",
        f"GIT_CONFIG_VALUE_{count}": f"store --file={folder / 'git-credentials'}",
    }
    return folder, env


def remove(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
