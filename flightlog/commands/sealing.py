"""`flightlog run --sealed` and `--policy`: the options that bound what a command may send and touch.

`--policy FILE` names the egress policy (`egress`, checked by the proxy before each request goes
upstream) for `flightlog proxy` and `flightlog run`; `--sealed` runs the command in a sandbox where
that proxy is its only way out (`flightlog.sealed`), with the filesystem `--write`, `--read`,
`--read-deny` and `--socket` add to (as the policy file's `[sandbox]` table does).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from addons.proxy_env import proxy_env
from flightlog.errors import CommandError
from flightlog.sandbox.filesystem import FsPolicy

if TYPE_CHECKING:
    from addons.proxy_env import ProxyState
    from flightlog.lending import Lending
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
        help="Linux: run COMMAND in a sandbox (bubblewrap, seccomp: its own namespaces, no "
        "privilege, FLIGHTLOG_HOME, credentials and host sockets absent) whose only way out is a "
        "proxy started for it, under the run's identity. As root, clients that ignore the proxy "
        "variables are caught too (recorded, or refused and recorded), DNS works, other protocols are "
        "refused; not root, only the proxy's ports lead out.",
    ),
]


PathsOpt = list[Path] | None
WriteOpt = Annotated[
    PathsOpt,
    typer.Option("--write", help="With --sealed: a path the command may write (beside the working "
                 "directory and a private /tmp); repeatable."),
]  # fmt: skip
ReadOpt = Annotated[
    PathsOpt,
    typer.Option("--read", help="With --sealed: a credential place the command may read after all "
                 "(read-only); repeatable."),
]  # fmt: skip
ReadDenyOpt = Annotated[
    PathsOpt,
    typer.Option(
        "--read-deny", help="With --sealed: a path absent for the command (as ~/.ssh is); repeatable."
    ),
]
SocketOpt = Annotated[
    PathsOpt,
    typer.Option("--socket", help="With --sealed: a host UNIX socket the command may connect to (all "
                 "are absent otherwise); repeatable."),
]  # fmt: skip


def sandbox_paths(
    home: Path, policy: Path | None, write: PathsOpt, read: PathsOpt, read_deny: PathsOpt, sockets: PathsOpt
) -> FsPolicy:
    """What the operator named for the sandbox: `run`'s options, then the policy file's `[sandbox]`."""
    from egress.policy_file import FILE_NAME
    from flightlog.sandbox.policy_table import read_table

    given = FsPolicy(tuple(write or ()), tuple(read or ()), tuple(read_deny or ()), tuple(sockets or ()))
    return given | read_table(policy.expanduser() if policy is not None else home / FILE_NAME)


def policy_path(policy: Path | None) -> str:
    """`--policy FILE` as an absolute path; a missing file is one clear error before anything starts."""
    if policy is None:
        return ""
    path = policy.expanduser()
    if not path.is_file():
        raise CommandError(f"--policy {policy}: no such file")
    return str(path.resolve())


def run_sealed(
    command: list[str],
    options: list[str],
    who: Identity,
    home: Path,
    token: dict[str, str],
    fs: FsPolicy,
    lending: Lending,
) -> int:
    """`run --sealed`: COMMAND in its sandbox, its own proxy the only way out. It holds the
    placeholders it is lent (`flightlog.lending`); the secrets file is absent from its world."""
    from flightlog.lending import registered
    from flightlog.sealed import seal

    def variables(state: ProxyState, ca: Path) -> dict[str, str]:
        forward = state.forward
        if forward is None:
            raise CommandError("the sealed command's proxy has no forward (regular) listener")
        return proxy_env((forward.host, forward.port), ca, who, state.reverse)

    child = lending.child_env({**os.environ, **token})
    files = lending.files
    lent = {p: p for p in sorted(files.iterdir())} if files is not None else {}
    deny = FsPolicy(read_deny=(lending.secrets_file,)) if lending.secrets_file is not None else FsPolicy()
    with registered(lending, home):
        return seal(command, options, who.userinfo(), home, child, variables, fs | deny, lent)
