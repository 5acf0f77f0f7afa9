"""The sheet layout of seed 000: a row's name and description, then one column per way of calling it,
then its type, kind and id. Every column is matched by its header label, never by its position.

A label is read case-insensitively, spaces and `-` as `_` ("Apple Shortcut" is `apple_shortcut`,
"server-sent events" is `server_sent_events`), then looked up in `LABELS`; a label not there is
refused by name. The labels:

- the row: `name`, `description`, `type` (its bundle; `bundle` too), `kind`, `id` (its path in the
  bundle, without `.md`), `args` (the arguments' JSON Schema), `cli_opt_in` (true: the door may run
  the row's command here), `status`, `grain`, `frontmatter` (any other frontmatter keys, as a JSON
  object) and `text` (the document's body);
- the ways of calling it: every form name of `catalog.contracts` (`dispatch`, `url`, `curl`, ...,
  `upstream`) and the seed's own words for them (`REST`, `URL`, `MCP`, `CLI`, `Claude Code`,
  `Apple Shortcut`, `SDK`, `function`, `WebSocket`, `SSE`, `GraphQL`, `SSH`, `dry run`, ...). Each
  cell holds one runnable form as JSON. `upstream` is the row's own contract (the service's call,
  placeholders and all); every other way is derived from the canonical call, so it is checked (a
  runnable shape, and a web form aimed at flightlog's door) and never stored;
- the upstream contract in parts, for sheets written by hand: `upstream_method` (or `method`),
  `upstream_url`, `upstream_headers` (or `headers`), `upstream_body` (or `body`), `upstream_command`
  (or `command`), `upstream_server` (or `server`), `upstream_tool`, `upstream_arguments` (or
  `arguments`), `upstream_language` (or `language`), `upstream_code` (or `code`).

`url` and `cli` are the seed's ways (the one-line link, the command line), so a contract's own URL is
`upstream_url` and the opt-in flag is `cli_opt_in`.
"""

from __future__ import annotations

import re
from typing import Final

from catalog.form_names import FORM_NAMES

ROW_COLUMNS: Final = (
    "name",
    "description",
    "type",
    "kind",
    "id",
    "args",
    "cli_opt_in",
    "status",
    "grain",
    "frontmatter",
    "text",
)
PART_COLUMNS: Final = (
    "upstream_method",
    "upstream_url",
    "upstream_headers",
    "upstream_body",
    "upstream_command",
    "upstream_server",
    "upstream_tool",
    "upstream_arguments",
    "upstream_language",
    "upstream_code",
)
"""The upstream contract in parts (their labels without `upstream_` read the same, but `url`)."""
WAY_COLUMNS: Final = FORM_NAMES
"""One column per form (`catalog.form_names.FORM_NAMES`), in the forms' order."""

SEED_WORDS: Final = {
    "rest": "dispatch",
    "rest_door": "dispatch",
    "oip": "dispatch",
    "oip_dispatch": "dispatch",
    "dispatch_door": "dispatch",
    "dry_run": "dispatch_dry_run",
    "one_line_url": "url",
    "mcp": "mcp_http",
    "mcp_over_http": "mcp_http",
    "mcp_over_stdio": "mcp_stdio",
    "claude_code": "mcp_config_claude_code",
    "mcp_client_configuration": "mcp_config_claude_code",
    "shortcut": "apple_shortcut",
    "js": "javascript",
    "sdk_method": "sdk",
    "function_call": "function",
    "direct_function_call": "function",
    "web_socket": "websocket",
    "server_sent_events": "sse",
    "service": "upstream",
    "upstream_service": "upstream",
}
"""The seed's words for the ways of calling (its list: "the build's own REST door, a one-line URL,
MCP over HTTP, the MCP client configuration for Claude Code, ..."), to the form each names."""

LABELS: Final[dict[str, str]] = {
    **{c: c for c in (*ROW_COLUMNS, *PART_COLUMNS, *WAY_COLUMNS)},
    **{p.removeprefix("upstream_"): p for p in PART_COLUMNS if p != "upstream_url"},
    **SEED_WORDS,
    "bundle": "type",
}
"""Every label a header may have, to the column it names."""
DOOR_PATHS: Final = {
    "dispatch": "/api/dispatch",
    "dispatch_dry_run": "/api/dispatch",
    "url": "/api/dispatch",
    "webhook": "/api/dispatch",
    "sse": "/api/dispatch",
    "link": "/api/dispatch",
    "graphql": "/api/graphql",
    "mcp_jsonrpc": "/api/mcp",
}
"""The door route a derived web form is aimed at: a cell aimed elsewhere holds some other call."""


def label(cell: str) -> str:
    """A header cell as a label: lowercase, runs of spaces and `-` as one `_`."""
    return re.sub(r"[\s-]+", "_", cell.strip().lower())


def column_of(cell: str) -> str | None:
    """The column a header cell names, or None when it names none (refused by the caller)."""
    return LABELS.get(label(cell))
