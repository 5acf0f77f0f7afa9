"""The names of the ways a Directory row can be called (its forms), in their one order.

Seed 000 counts 26 forms every tool has; a tool with a live scoped token gains three credential-free
links, and a row with an upstream contract shows it last. `catalog.contracts` renders them and the
sheet importer reads one column per form (`catalog.importers.sheet_layout`): both read the names
from here, so a form added is a column added.
"""

from __future__ import annotations

from typing import Final

ALWAYS_FORMS: Final = (
    "dispatch",
    "dispatch_dry_run",
    "url",
    "curl",
    "wget",
    "cli",
    "python",
    "python_mcp",
    "javascript",
    "webhook",
    "apple_shortcut",
    "sdk",
    "function",
    "mcp_stdio",
    "mcp_http",
    "mcp_jsonrpc",
    "websocket",
    "sse",
    "graphql",
    "ssh",
    "mcp_config_claude_code",
    "mcp_config_json",
    "mcp_config_vscode",
    "openai_tool",
    "openai_responses_tool",
    "anthropic_tool",
)
"""The forms every tool has (seed 000: 26)."""
TOKEN_FORMS: Final = ("link", "link_curl", "link_markdown")
"""The credential-free links a tool with a live scoped token gains (29)."""
FORM_NAMES: Final = (*ALWAYS_FORMS, *TOKEN_FORMS, "upstream")
"""Every form in order (30 for a fully equipped row)."""
