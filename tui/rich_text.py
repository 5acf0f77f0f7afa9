"""Recorded text handed to Rich and Textual: plain `Text`, never markup, shown by `formats.terminal_text`.

A `DataTable` reads a string as Rich markup (`[/x]` in a URL stopped the browser with a MarkupError,
`[link=...]` makes a hyperlink), so every cell and status line that may quote recorded text is made
a `Text` here, its controls shown, not obeyed.
"""

from __future__ import annotations

from rich.text import Text

from formats.terminal_text import DRIVES, shown


def cell(value: str | Text) -> Text:
    """A table cell that shows `value` as written: a string becomes plain `Text` (a `DataTable`
    reads a string as Rich markup, and `[/x]` in a URL stopped the browser with a MarkupError), and
    what could drive the terminal is `shown`. A `Text` of ours keeps its style."""
    if isinstance(value, Text):
        return Text(shown(value.plain), style=value.style) if DRIVES.search(value.plain) else value
    return Text(shown(value))


def noted(note: str, style: str, value: str) -> Text:
    """A status line: our `note` in `style`, then `value` (an error's words, a typed question, which
    may quote recorded text) shown as written, never read as markup."""
    return Text.assemble((note, style), shown(value))
