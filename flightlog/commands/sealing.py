"""`flightlog run --sealed` and `--policy`: the options that bound what a command may send.

`--policy FILE` names the egress policy (`egress`, checked by the proxy before each request goes
upstream) for `flightlog proxy` and `flightlog run`; `--sealed` runs the command where that proxy
is its only way out (`flightlog.sealed`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from addons.proxy_env import proxy_env
from flightlog.errors import CommandError

if TYPE_CHECKING:
    from addons.proxy_env import ProxyState
    from recording.identity import Identity

PolicyOpt = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Egress policy file: what agents may send where, checked before each request goes "
        "upstream (default: FLIGHTLOG_HOME/egress.toml when it exists; re-read when it changes).",
    ),
]
StateFileOpt = Annotated[
    str, typer.Option("--state-file", hidden=True, help="Name of the state file in FLIGHTLOG_HOME.")
]
SealedOpt = Annotated[
    bool,
    typer.Option(
        "--sealed",
        help="Linux: run COMMAND in a network namespace whose only way out is a proxy started for "
        "it. As root, clients that ignore the proxy variables are caught too (recorded, or refused "
        "and recorded), DNS works, other protocols are refused; not root, only the proxy's ports "
        "lead out.",
    ),
]


def policy_path(policy: Path | None) -> str:
    """`--policy FILE` as an absolute path; a missing file is one clear error before anything starts."""
    if policy is None:
        return ""
    path = policy.expanduser()
    if not path.is_file():
        raise CommandError(f"--policy {policy}: no such file")
    return str(path.resolve())


def run_sealed(
    command: list[str], options: list[str], who: Identity, home: Path, token: dict[str, str]
) -> int:
    """`run --sealed`: COMMAND in its own network namespace, its own proxy the only way out."""
    from flightlog.sealed import seal

    def variables(state: ProxyState, ca: Path) -> dict[str, str]:
        forward = state.forward
        if forward is None:
            raise CommandError("the sealed command's proxy has no forward (regular) listener")
        return proxy_env((forward.host, forward.port), ca, who, state.reverse)

    child = {**os.environ, **token}
    return seal(command, options, who.userinfo(), home, child, variables)
