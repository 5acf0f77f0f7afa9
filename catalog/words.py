"""How text is cut into words, and how a question's framing is taken off before it is searched.

Names are written in every style (`LEDGER_ROW`, `ledgerRow`, `ledger-row`, `ledger row`); all of them
cut into the same lowercase words, so a person's words and a row's name meet in one form.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
"""`_WORD` on ASCII text (its letters and digits are these), matched faster."""

FRAMING: Final = re.compile(
    r"^(?:(?:how|where|what|which|who|when|why)\s+(?:do|does|can|could|should|would|is|are|was|were)\s+"
    r"(?:i|we|you|my|me|the|a|an|one)?\s*"
    r"|how\s+to\s+|where\s+(?:is|are)\s+(?:my|the|our)?\s*|what(?:'s|\s+is)\s+(?:my|the|a|an)?\s*"
    r"|is\s+there\s+(?:a|an|any)?\s*|(?:can|could|would)\s+you\s+|please\s+|i\s+(?:want|need|would\s+like)\s+to\s+"
    r"|show\s+me\s+(?:the|my|a|an)?\s*|find\s+(?:me\s+)?(?:the|my|a|an)?\s*|tell\s+me\s+(?:about\s+)?"
    r"|(?:a|an|the)\s+(?=\S))",
    re.IGNORECASE,
)
"""One leading phrase of question framing; `strip_framing` removes as many as lead the query."""

_STOP = "a an the to of for in on at by with from into and or my our your me i we it is are be do does"
_MORE = "can could should would please some any this that these those"
STOPWORDS: Final = frozenset(_STOP.split()) | frozenset(_MORE.split())
"""Words that carry no meaning in a row's name; dropped from multi-word matching, never from exact."""


def words(text: str) -> list[str]:
    """The lowercase words of `text`, cutting at punctuation, underscores and camelCase humps.

    The same as cutting the humps of the whole text first, then the words (the hump pattern looks
    only at letters and digits, which never straddle a word's edge), but the pattern's look-behinds
    run only on the few words that can hold a hump (`_humpless`)."""
    out: list[str] = []
    for w in (_ASCII_WORD if text.isascii() else _WORD).findall(text):
        if _humpless(w):
            out.append(w.lower())
        else:
            out.extend(_CAMEL.sub(" ", w).lower().split())
    return out


def word_set(text: str) -> set[str]:
    """`set(words(text))`, each distinct spelling cut once: a section is indexed by every distinct
    word of every document, and a document repeats most of its words (~230 words, ~90 distinct)."""
    out: set[str] = set()
    for w in set((_ASCII_WORD if text.isascii() else _WORD).findall(text)):
        if _humpless(w):
            out.add(w.lower())
        else:
            out.update(_CAMEL.sub(" ", w).lower().split())
    return out


def _humpless(w: str) -> bool:
    """Whether a word (a run of letters and digits) cannot hold a camelCase hump: all lowercase,
    all digits, capitalized, or all capitals without a digit. Most words of prose are."""
    return w.islower() or w.isdigit() or w[1:].islower() or (w.isupper() and w.isalpha())


def strip_framing(query: str) -> str:
    """`query` without its question framing ("how do I", "where is my", ...) and trailing `?`."""
    text = query.strip().rstrip("?!. ").strip()
    while True:
        stripped = FRAMING.sub("", text, count=1).strip()
        if stripped == text or not stripped:
            return text
        text = stripped


def content_words(ws: list[str]) -> list[str]:
    """The words that carry meaning (stopwords dropped), unless that would leave nothing."""
    kept = [w for w in ws if w not in STOPWORDS]
    return kept or ws


def normal(text: str) -> str:
    """The words of `text` joined by single spaces: the form names and queries are compared in."""
    return " ".join(words(text))


_SIBILANT = ("s", "x", "z", "ch", "sh")


@lru_cache(maxsize=65536)
def stems(word: str) -> frozenset[str]:
    """The stems a word may be an inflection of: plurals (-s, -es, -ies) and -ing, -ed forms.

    Deliberately simple (no dictionary): it can over-fold ("news" -> "new"), and the layers that
    use it are the ones whose matches are "somewhere in the row" anyway.
    """
    out = {word}
    n = len(word)
    if n < 4 or not word.isalpha():
        return frozenset(out)
    if word.endswith("ies") and n > 4:
        out.add(word[:-3] + "y")
    elif word.endswith("es") and word[:-2].endswith(_SIBILANT):
        out.add(word[:-2])
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        out.add(word[:-1])
    for suffix in ("ing", "ed"):
        base = word[: -len(suffix)]
        if word.endswith(suffix) and len(base) >= 3:
            out |= {base, base + "e"}
            if base[-1] == base[-2]:
                out.add(base[:-1])
            if suffix == "ed" and base.endswith("i"):
                out.add(base[:-1] + "y")
    return frozenset(out)


def _inflections(stem: str) -> set[str]:
    out = {stem, stem + "s", stem + "ing", stem + "ed"}
    if stem.endswith(_SIBILANT):
        out.add(stem + "es")
    if stem.endswith("e"):
        out |= {stem + "d", stem[:-1] + "ing"}
    if stem.endswith("y") and len(stem) > 2:
        out |= {stem[:-1] + "ies", stem[:-1] + "ied"}
    if len(stem) >= 3 and stem[-1] not in "aeiouwxy":
        out |= {stem + stem[-1] + "ing", stem + stem[-1] + "ed"}
    return out


@lru_cache(maxsize=65536)
def forms(word: str) -> frozenset[str]:
    """Every form that folds together with `word` ("umbrella" finds "umbrellas" and back)."""
    if len(word) < 3 or not word.isalpha():
        return frozenset((word,))
    reduced = stems(word) - {word}
    return frozenset(f for s in (reduced or {word}) for f in _inflections(s)) | {word}
