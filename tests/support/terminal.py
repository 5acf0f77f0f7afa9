"""What of some printed or drawn text a terminal would obey: the check of every hostile-text test."""

from __future__ import annotations


def obeyable(text: str, laid_out: str = "\t\n") -> list[str]:
    """The C0 and C1 controls and DEL in `text`, but for those in `laid_out` (which a view lays out
    rather than sends: line breaks, and tabs where the view keeps them)."""
    return [c for c in text if c not in laid_out and (c < " " or "\x7f" <= c <= "\x9f")]
