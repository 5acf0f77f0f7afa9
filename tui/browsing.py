"""What a list screen asks of the browser it runs in: the filter, the question, following new events.

The list screens (`listing` and its two views) are pushed by the app and read its shared state; they
name it by this protocol instead of importing the app, so the app can import them and no circle
forms (not even for the type checker).
"""

from __future__ import annotations

from typing import Protocol

from storage.filters import Filter


class Browsing(Protocol):
    """The browser's state a list shares: `BrowseApp` is one."""

    filter: Filter
    question: str
    refused: str | None
    """Why the first question could not be read (the list shows it under the filter bar)."""
    follow_seconds: float | None
    following: bool

    def apply_question(self, words: str) -> bool:
        """Read `words` as the filter; False (and the list told why) when they cannot be read."""
