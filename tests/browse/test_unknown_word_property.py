"""A word no construct reads, put anywhere in a question that reads, refuses the question naming it
(issue 51): never dropped, never taken for a value the Ledger does not hold. Hypothesis draws the
question (the readable rows of the question table), the place and the word."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage.errors import StorageError
from storage.questions.known import KnownValues
from storage.questions.reading import QuestionError, ask
from storage.questions.vocabulary import CHECKED, FUNCTION_WORDS, GROUP_NOUNS, quoted_tokens
from tests.support.question_table import NOW, recorded_events, table

READABLE = [q.text for q in table() if q.refused is None]
VALUES: dict[str, set[str]] = {}
for _event in recorded_events():
    for _name in CHECKED:
        if (_value := getattr(_event, _name)) is not None:
            VALUES.setdefault(_name, set()).add(_value)
KNOWN = KnownValues(VALUES)


def unknown(word: str) -> bool:
    """A word the reader has no construct for: asked beside a plain noun, it is refused by name, and it
    is no function word (those are read only beside others: 'than', 'and')."""
    if word in FUNCTION_WORDS or word in GROUP_NOUNS:
        return False
    try:
        ask(f"calls {word}", NOW, KNOWN)
    except StorageError as e:
        return str(e).startswith(f"did not understand {word!r}")
    return False


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9).filter(unknown)


def test_the_questions_read_as_they_are() -> None:
    """Each question the property starts from reads (so a refusal is the inserted word's doing)."""
    assert len(READABLE) >= 150
    for text in READABLE:
        ask(text, NOW, KNOWN)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(READABLE), st.integers(min_value=0, max_value=40), WORDS)
@example("average latency with status 429 in the last 2 hours", 37, "as")  # was read as status 'a'
def test_an_unknown_word_anywhere_is_refused_by_name(text: str, place: int, word: str) -> None:
    """Insert `word` between any two words (or at either end): the question is refused, naming it."""
    words = [f"'{w}'" if quoted else w for w, quoted in quoted_tokens(text)]
    at = place % (len(words) + 1)
    changed = " ".join([*words[:at], word, *words[at:]])
    try:
        question = ask(changed, NOW, KNOWN)
    except QuestionError as e:
        assert repr(word) in str(e), f"{changed!r}: {e}"
        return
    raise AssertionError(f"{changed!r} read as {question.explain()}")


def test_every_place_of_every_readable_question_refuses_one_unknown_word() -> None:
    """The same, exhaustively for one word: each readable question with 'zqx' at each place."""
    assert unknown("zqx")
    read = []
    for text in READABLE:
        words = [f"'{w}'" if quoted else w for w, quoted in quoted_tokens(text)]
        for at in range(len(words) + 1):
            changed = " ".join([*words[:at], "zqx", *words[at:]])
            try:
                read.append(f"{changed!r}: {ask(changed, NOW, KNOWN).explain()}")
            except QuestionError as e:
                if "'zqx'" not in str(e):
                    read.append(f"{changed!r}: {e}")
    assert read == []
