"""Errors of the Directory."""


class CatalogError(Exception):
    """Base of every error the Directory raises."""


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
