"""How text is cut into words: every naming style meets in one lowercase form, and the fast cut
equals cutting the humps of the whole text first, on any text."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.words import normal, word_set, words

CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
WORD = re.compile(r"[^\W_]+")


def whole_text_first(text: str) -> list[str]:
    """The definition: humps cut across the whole text, then its words, lowercased."""
    return [w.lower() for w in WORD.findall(CAMEL.sub(" ", text))]


ALPHABET = "aZbYz09_ -./éÉßİıΣσǅ日²\u0307\nAbCdEHTTPServer"


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=40))
def test_words_equal_cutting_the_humps_of_the_whole_text_first(text: str) -> None:
    """Letters of any case and script, digits, underscores, combining marks: the same words (and
    the same distinct words, which is what a section's index keeps of a document)."""
    assert words(text) == whole_text_first(text)
    assert word_set(text) == set(whole_text_first(text))


def test_every_naming_style_cuts_into_the_same_words() -> None:
    """LEDGER_ROW, ledgerRow, LedgerRow, ledger-row and `ledger row` are one name; humps after
    digits and inside acronyms are cut as a reader would."""
    for name in ("LEDGER_ROW", "ledgerRow", "LedgerRow", "ledger-row", "ledger row"):
        assert normal(name) == "ledger row"
    assert words("HTTPServer v2Beta A1B getURLs") == [
        "http",
        "server",
        "v2",
        "beta",
        "a1",
        "b",
        "get",
        "ur",
        "ls",
    ]
    assert words("Straße ÉTÉ 日本") == ["straße", "été", "日本"]


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="aZbYz09_ -./\nAbCdEHTTPServer", max_size=40))
def test_ascii_text_takes_the_ascii_pattern_and_cuts_alike(text: str) -> None:
    """ASCII text is cut by the narrower ASCII pattern: the same words as the definition."""
    assert words(text) == whole_text_first(text)
    assert word_set(text) == set(whole_text_first(text))
