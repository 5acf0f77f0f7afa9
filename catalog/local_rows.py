"""What a row may do on this machine, and who may change such a row: the Directory's half of authority.

A row *runs locally* when its contract runs a command or code on the machine that dispatches it: an
`upstream` (or any part of an array) whose method is `CLI` or `CODE`, an MCP server started as a
command (no `url`), or a row that opted in with `cli: true`. Such a row hands whoever may change it
a shell, so it can be created or changed only from the operator's side (the Directory folder, or
the CLI with FLIGHTLOG_HOME); a network door (HTTP or MCP) opens its Directory `for_network`, whose
commits refuse any change that would write, overwrite or delete such a row.

`contract_hash(tool)` is the short digest of what a call to a row actually does (its upstream
contract, argument schema and `cli` flag, not its description): a token's `contract` caveat binds
it, so a rewritten row refuses tokens minted for its earlier contract.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from catalog.errors import CatalogError, LocalCommandRefused
from catalog.tool import Tool, split_document
from storage.documents import Change

LOCAL_METHODS: Final = frozenset({"CLI", "CODE"})
CONTRACT_HASH_CHARS: Final = 16


def contract_runs_locally(contract: Any) -> bool:
    """True when any part of `contract` runs a command or code here (CLI, CODE, MCP over stdio)."""
    parts = contract if isinstance(contract, list) else [contract]
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        method = str(part.get("method", "")).strip().upper()
        if method in LOCAL_METHODS:
            return True
        if method == "MCP":
            server = part.get("server")
            if not isinstance(server, Mapping) or "url" not in server:
                return True
        if method != "MCP" and any(k in part for k in ("command", "code", "argv")):
            return True
    return False


def frontmatter_runs_locally(frontmatter: Mapping[str, Any]) -> bool:
    """True for a row that opted into commands (`cli` not false) or whose upstream runs locally."""
    if frontmatter.get("cli", False) is not False:
        return True
    return "upstream" in frontmatter and contract_runs_locally(frontmatter.get("upstream"))


def text_runs_locally(text: str | None) -> bool:
    """True when a document's text is a row that runs locally. A frontmatter block that cannot be
    read while it mentions a command counts as one: a network door gets no benefit of the doubt."""
    if not text:
        return False
    try:
        frontmatter, _ = split_document(text)
    except CatalogError:
        lowered = text.lower()
        return any(word in lowered for word in ("cli", "code", "command"))
    return frontmatter_runs_locally(frontmatter)


def tool_runs_locally(tool: Tool) -> bool:
    """True when dispatching `tool` would run a command or code on this machine."""
    return tool.cli_opt_in or (tool.upstream is not None and contract_runs_locally(tool.upstream))


def contract_hash(tool: Tool) -> str:
    """The digest a `contract` caveat binds: upstream, argument schema and the `cli` flag."""
    what = {"upstream": tool.upstream, "args": tool.args_schema, "cli": tool.cli_opt_in}
    canonical = json.dumps(what, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:CONTRACT_HASH_CHARS]


def refuse_local_changes(changes: Sequence[Change], current: Callable[[str, str], str | None]) -> None:
    """Raise `LocalCommandRefused` when a change would write a row that runs locally, or overwrite or
    delete one; `current(bundle, path)` gives the text there now (None when absent)."""
    for change in changes:
        where = f"{change.bundle}/{change.path}"
        if text_runs_locally(change.content):
            raise LocalCommandRefused(
                f"{where}: a row that runs a command or code on this machine can be written only from "
                "the operator's side (the Directory folder or the flightlog CLI), not through a network door"
            )
        if text_runs_locally(current(change.bundle, change.path)):
            raise LocalCommandRefused(
                f"{where} runs a command or code on this machine: it can be changed or deleted only from "
                "the operator's side (the Directory folder or the flightlog CLI)"
            )
