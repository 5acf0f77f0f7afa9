"""Errors of the command line: each carries one line a person can act on."""


class CommandError(Exception):
    """A command failed for a reason the user can fix; the CLI prints it as one line."""
