"""The `flightlog` command: one Typer app, and the table of where each command lives.

Each command is a module-level function in `flightlog.commands.<module>`; a command group (`ledger`,
`directory`, `token`) is a Typer app in the module named after it. This module is the only place
that adds them to the root app, so the list below is the whole command line. Options several
commands share are defined once in `flightlog.commands.options`. Heavy imports (mitmproxy, textual,
the MCP SDK) happen inside the commands so that `flightlog --help` stays fast; and a command line
that names a command builds an app of that command alone (its module the only one imported, its
options the only ones Typer reads), so `flightlog find` or `flightlog mcp` pays for no other
command. Errors from any package are translated here into one line and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from flightlog.failures import known_errors

PASS_THROUGH: dict[str, Any] = {"allow_extra_args": True, "ignore_unknown_options": True}
COMMAND_AFTER: dict[str, Any] = PASS_THROUGH | {"allow_interspersed_args": False}
"""For commands that start a COMMAND: their own options come before it; from its name on, every word
is the command's (`flightlog run echo hi --session zz` passes `--session zz` to echo)."""

# (name, module:function, click context settings), in the order `flightlog --help` lists them.
COMMANDS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("proxy", "proxy:proxy", {}),
    ("run", "proxy:run", COMMAND_AFTER),
    ("env", "shell:env", {}),
    ("mcp-record", "mcp_record:mcp_record", COMMAND_AFTER),
    ("approve", "egress:approve", {}),
    ("find", "agent_api:find", {}),
    ("get", "agent_api:get", {}),
    ("manifest", "agent_api:manifest", {}),
    ("mcp", "agent_api:mcp", {}),
    ("contracts", "contracts:contracts", {}),
    ("call", "call:call", {}),
    ("uses", "join:uses", {}),
    ("task", "join:task", {}),
    ("trace", "join:trace", {}),
    ("replay", "replay:replay", {}),
    ("serve-replay", "replay:serve_replay", {}),
    ("diff", "drift:diff", {}),
    ("export", "export:export", {}),
    ("browse", "browse:browse", {}),
)
GROUPS: tuple[tuple[str, str], ...] = (
    ("ledger", "ledger_reprice:ledger_app"),  # `ledger`'s commands and `reprice` (ledger.py is full)
    ("directory", "directory:directory_app"),
    ("token", "token:token_app"),
)


def _load(ref: str) -> Any:
    """`module:attribute` of `flightlog.commands`, imported now."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(f"flightlog.commands.{module}"), attribute)


def build_app(only: str | None = None) -> typer.Typer:
    """The root app with every command and group of the tables above, or with the one named `only`
    (a root callback keeps it a group, so the command line reads exactly as with all of them)."""
    root = typer.Typer(
        name="flightlog",
        help="Record what AI agents do (the Ledger) and list what they can do (the Directory).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )
    for name, ref, context in COMMANDS:
        if only is None or name == only:
            root.command(name, context_settings=context or None)(_load(ref))
    for name, ref in GROUPS:
        if only is None or name == only:
            root.add_typer(_load(ref), name=name)
    if only is not None:
        root.callback()(_group)
    return root


def _group() -> None:
    """Record what AI agents do (the Ledger) and list what they can do (the Directory)."""


def named_command(argv: list[str]) -> str | None:
    """The command `argv` starts with, when it is one of the tables' (else the whole app answers:
    the root's help, or its message for an unknown command)."""
    names = {name for name, _, _ in COMMANDS} | {name for name, _ in GROUPS}
    return argv[0] if argv and argv[0] in names else None


def __getattr__(name: str) -> Any:
    """`app`, the whole command line (for tests and embedders), built on first use."""
    if name == "app":
        built = globals()["app"] = build_app()
        return built
    raise AttributeError(name)


def main() -> None:
    """Console entry point: run the app, turning known errors into one clear line."""
    try:
        build_app(named_command(sys.argv[1:]))()
    except known_errors() as e:
        # deferred: --help starts without it. The message may quote the Ledger (a recorded URL):
        # shown, it stays one line and cannot drive the terminal.
        from formats.terminal_text import shown

        print(shown(f"flightlog: {e}"), file=sys.stderr)
        sys.exit(1)
