"""The rows a request acts on, as the gate judges them (`authority.gate.Row`).

A call acts on the row it runs. A change acts on every row it writes or deletes, judged as it is
before and as it would be after: its names (the frontmatter `name` of both texts) and, for a tool
row, its contracts (name and `contract_hash` of both), so a token limited to some tools or bound
to a contract can neither rewrite another row nor turn its own into another. `restore` acts on
every row that differs between the head and the revision restored.

A request whose changes cannot be read acts on an unreadable row that no row caveat allows: the
gate refuses it for a limited token, and the Directory's own checks refuse it for anyone else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from authority.gate import Row
from catalog import changes as changeset
from catalog.errors import CatalogError, NotCallable, UnknownRow
from catalog.local_rows import contract_hash
from catalog.tool import Tool, split_document

if TYPE_CHECKING:
    from catalog.directory import Directory

TOOL_BUNDLE: Final = "tool"
UNREADABLE: Final = Row("?", "?")
"""What an unreadable change acts on: no name, no contract, no bundle a token names."""


@dataclass(frozen=True, slots=True)
class Located:
    """A tool row found for a call: the tool, where it lives and the hash of the version found."""

    tool: Tool
    bundle: str
    path: str
    hash: str | None = None

    @property
    def row(self) -> Row:
        """The row the call runs, as the gate judges it."""
        return Row(
            self.bundle, self.path, frozenset({self.tool.name}), ((self.tool.name, contract_hash(self.tool)),)
        )


def placed(tool: Tool) -> Located:
    """A tool known by itself (no Directory): placed at `BUNDLE/NAME.md`, no version hash."""
    return Located(tool, tool.bundle, f"{tool.name}.md")


def _facts(bundle: str, text: str | None) -> tuple[set[str], list[tuple[str, str | None]]]:
    """The names and (name, contract) pairs of one version of a row (none for an absent one)."""
    if text is None:
        return set(), []
    try:
        front, body = split_document(text)
    except CatalogError:
        return set(), []
    name = front.get("name")
    if not isinstance(name, str) or not name.strip():
        return set(), []
    if bundle != TOOL_BUNDLE:
        return {name}, [(name, None)]
    try:
        return {name}, [(name, contract_hash(Tool.from_frontmatter(front, body, bundle=bundle)))]
    except CatalogError:
        return {name}, [(name, None)]


def changed_row(bundle: str, path: str, before: str | None, after: str | None) -> Row:
    """A row as a change touches it: what it was and what it would become."""
    names_before, contracts_before = _facts(bundle, before)
    names_after, contracts_after = _facts(bundle, after)
    return Row(bundle, path, frozenset(names_before | names_after), (*contracts_before, *contracts_after))


def rows_of_changes(directory: Directory, changes: Sequence[Mapping[str, Any]]) -> tuple[Row, ...]:
    """The rows of `transact`'s changes (`{operation, bundle, path, content?}`), each before and after."""
    rows = []
    for change in changes:
        try:
            parsed = changeset.parse_change(change)
        except CatalogError:
            return (UNREADABLE,)
        rows.append(
            changed_row(
                parsed.bundle, parsed.path, directory.text_at(parsed.bundle, parsed.path), parsed.content
            )
        )
    return tuple(rows)


def rows_of_request(directory: Directory, verb: str, doc: Mapping[str, Any]) -> tuple[Row, ...]:
    """The rows one of the Directory's changing verbs acts on, from its arguments as sent."""
    try:
        if verb == "write":
            return rows_of_changes(directory, [{**doc, "operation": "write"}])
        if verb == "delete":
            return rows_of_changes(directory, [{**doc, "operation": "delete"}])
        if verb == "transact":
            listed = doc.get("changes")
            return (
                rows_of_changes(directory, listed) if isinstance(listed, list) and listed else (UNREADABLE,)
            )
        if verb == "restore":
            revision = doc.get("revision")
            if not isinstance(revision, int):
                return (UNREADABLE,)
            return tuple(
                changed_row(c.bundle, c.path, directory.text_at(c.bundle, c.path), c.content)
                for c in directory.restore_changes(revision)
            )
    except CatalogError:
        return (UNREADABLE,)
    return (UNREADABLE,)


def located_in(directory: Directory) -> Callable[[str], Located | None]:
    """`name -> Located | None`: the tool row, where it lives and the version found (for the gate's
    row caveats and for `trace`, which compares a call with the version it ran under)."""

    def locate(name: str) -> Located | None:
        try:
            doc = directory.tool(name)
        except NotCallable:
            raise  # found, outside tool/: the refusal says so, not "no tool named"
        except UnknownRow:
            return None
        tool = Tool.from_frontmatter(doc.frontmatter, doc.body, bundle=doc.bundle)
        return Located(tool, doc.bundle, doc.path, doc.hash)

    return locate


def version_in(directory: Directory) -> Callable[[str], Tool | None]:
    """`hash -> Tool | None`: a tool row as it was in one version the Directory keeps (what `trace`
    compares a call with: the version it ran under)."""

    def version(sha: str) -> Tool | None:
        try:
            text = directory.text_of(sha)
            if text is None:
                return None
            front, body = split_document(text)
            return Tool.from_frontmatter(front, body)
        except CatalogError:
            return None

    return version
