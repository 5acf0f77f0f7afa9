"""Errors of the Directory. Each message is one line a person (or a model) can act on."""

from __future__ import annotations

from formats.errors import FlightlogError


class CatalogError(FlightlogError):
    """Base of every error the Directory raises."""


class UnknownRow(CatalogError):
    """No row has this id or name."""


class NotCallable(UnknownRow):
    """A row asked for as a tool lives outside `tool/`: the message says the rule and the move."""


class UnknownBundle(CatalogError):
    """No bundle has this name; the message lists the bundles that exist."""


class BadAlias(CatalogError):
    """`aliases.toml` is malformed or names a row that does not exist."""


class BadPath(CatalogError):
    """A write or delete aimed at something that is not a document of a bundle."""


class BadFolder(CatalogError):
    """A Directory folder that cannot be read or written."""


class Refused(CatalogError):
    """A precondition failed; `retry_hash` is the current hash to retry with (None: do not retry)."""

    def __init__(self, message: str, retry_hash: str | None = None) -> None:
        super().__init__(message)
        self.retry_hash = retry_hash


class RevisionConflict(CatalogError):
    """The expected revision is not the head any more."""

    def __init__(self, message: str, head: int) -> None:
        super().__init__(message)
        self.head = head


class Indeterminate(CatalogError):
    """A commit failed after it began changing the head: it may or may not have landed."""

    def __init__(self, message: str, revision: int) -> None:
        super().__init__(message)
        self.revision = revision


class StoreFailed(CatalogError):
    """The revision store underneath failed (translated from storage's error)."""


class ToolError(CatalogError):
    """A tool row is malformed: its frontmatter, argument schema or upstream contract."""


class ArgumentError(CatalogError):
    """A call's arguments do not fit the tool's schema; `argument` names the bad one ("" for the whole)."""

    def __init__(self, tool: str, argument: str, message: str) -> None:
        self.tool = tool
        self.argument = argument
        where = f'argument "{argument}"' if argument else "arguments"
        super().__init__(f"{tool}: {where}: {message}")


class UnboundSecret(CatalogError):
    """A contract names a secret (`[NAME]`) that is not bound to a value: the call is refused."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"secret [{name}] is not bound to a value: the call is refused")


class RefusedHost(CatalogError):
    """A contract or request reaches a refused (retired) host; `where` says where it hid."""

    def __init__(self, host: str, where: str) -> None:
        self.host = host
        self.where = where
        super().__init__(f'refused host "{host}" in {where}')


class ImporterError(CatalogError):
    """An importer could not read its source (a document, a server, a sheet)."""


class LocalCommandRefused(CatalogError):
    """A network door tried to create, change or delete a row that runs a command on this machine
    (`catalog.local_rows` refuses it; defined here so the doors name it without loading contracts)."""
