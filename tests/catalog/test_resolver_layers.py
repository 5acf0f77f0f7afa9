"""The resolver's layer table (seed 000, DESIGN.md), every layer with the cases on each side of its
edge: what still lands in it, and what falls to the next one down (or to nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.directory import Directory, open_directory
from catalog.words import STOPWORDS
from tests.catalog.conftest import ROWS, make_folder, row

LAYER_ROWS = {
    **ROWS,
    "tool/github_issue_create.md": row("GITHUB_ISSUE_CREATE", "Open an issue in a repository."),
    "tool/github_issue_list.md": row("GITHUB_ISSUE_LIST", "Every open issue of a repository."),
}


@pytest.fixture
def layered(tmp_path: Path) -> Iterator[Directory]:
    """The shared test rows (conftest.ROWS) plus two GitHub rows whose names share two words."""
    d = open_directory(f"sqlite:///{tmp_path / 'ledger.db'}", make_folder(tmp_path / "dir", LAYER_ROWS))
    yield d
    d.close()


@pytest.mark.parametrize(
    ("query", "top", "score", "layer"),
    [
        # 1000: the name is the query (any case, any spelling of the separators is not enough)
        ("GET_WEATHER", "get_weather", 1000, "name"),
        ("get_weather", "get_weather", 1000, "name"),
        ("Get_Weather", "get_weather", 1000, "name"),
        ("get_weathe", "get_weather", 900, "prefix"),  # one letter short: the start of the name
        # 900: the query is the start of the name
        ("get_wea", "get_weather", 900, "prefix"),
        ("github_issue_c", "github_issue_create", 900, "prefix"),
        ("github issue c", "github_issue_create", 900, "prefix"),  # words joined as the name is
        # 850: the name is exactly the query's words, in any order
        ("get weather", "get_weather", 850, "phrase"),
        ("weather get", "get_weather", 850, "phrase"),
        ("create github issue", "github_issue_create", 850, "phrase"),
        ("issue create github", "github_issue_create", 850, "phrase"),
        ("list the github issue", "github_issue_list", 800, "words"),  # "the" is not in the name
        ("get weather weather", "get_weather", 800, "words"),  # a word more often than the name has it
        ("create github issues", "github_issue_create", 800, "words"),  # folded: not exactly the words
        # 800: every word of the query is a word of the name
        ("issue github", "github_issue_list", 800, "words"),  # both rows match; the shorter name first
        ("github issue", "github_issue_list", 900, "prefix"),  # in the name's order: its start
        ("issues github", "github_issue_list", 800, "words"),
        # 750-772: a word of the query is an alias meaning the row
        ("imessage", "imessage_contacts", 900, "prefix"),  # a name that starts so outranks the alias
        ("send imessage", "imsg_send", 764, "alias"),  # + 14: "send" is a word of the name
        ("conversation imessage", "imsg_read", 752, "alias"),  # + 2: "conversation" is in the row
        # 700: every word of the query is somewhere in the row
        ("city forecast", "get_weather", 700, "text"),
        ("the city forecast", "get_weather", 700, "text"),  # the stop word is dropped, not required
        # 600: the name starts with the first word and the rest is in the row
        ("ge city", "get_weather", 600, "lead"),
        # 300: one edit or one transposition away, within the word's budget
        ("wether", "get_weather", 300, "typo"),
        ("waether", "get_weather", 300, "typo"),
        # 200: sounds like a word of the name
        ("tiktok", "tests_run", 200, "sound"),
        ("wthr", "get_weather", 200, "sound"),  # two edits in four letters: too far to be a typo
    ],
)
def test_every_layer_and_its_edges(layered: Directory, query: str, top: str, score: int, layer: str) -> None:
    """Each query's best row, its integer score and the layer that score names."""
    hits = layered.find(query, k=5)
    assert hits, f"no hit for {query!r}"
    assert (hits[0].row.id, hits[0].score, hits[0].layer) == (top, score, layer)


def test_the_phrase_layer_carries_both_rows_only_when_each_is_exactly_the_words(layered: Directory) -> None:
    """ "create github issue" is GITHUB_ISSUE_CREATE at 850; GITHUB_ISSUE_LIST holds two of the three
    words and no "create", so it is not a phrase hit (it meets the row only in its text, if at all)."""
    hits = {h.row.id: (h.score, h.layer) for h in layered.find("create github issue", k=5)}
    assert hits["github_issue_create"] == (850, "phrase")
    assert hits.get("github_issue_list", (0, ""))[0] < 850


@pytest.mark.parametrize("query", ["xyzzy", "zzqx", "qqq"])
def test_beyond_every_layer_is_nothing(layered: Directory, query: str) -> None:
    """No likeness at all: no row is invented."""
    assert layered.find(query, k=5) == []


@pytest.mark.parametrize("query", ["the", "a", "the a", "my the", "an"])
def test_stop_words_alone_never_match_somewhere_in_a_row(layered: Directory, query: str) -> None:
    """Every row holds "the" or "a" somewhere: a query of stop words alone finds nothing at 700 or
    below (before, "the" matched rows at 700 because the text held it)."""
    assert all(w in STOPWORDS for w in query.split())
    assert [h for h in layered.find(query, k=10) if h.score <= 700] == []


def test_a_stop_word_in_a_name_is_still_found_by_that_name(tmp_path: Path) -> None:
    """The rule is about "somewhere in the row": a row named with a stop word is still found by its
    name (1000), and the phrase layer counts the stop word like any other word of the name."""
    rows = {"tool/the_end.md": row("THE_END", "Stop the world."), "tool/end.md": row("END", "Finish.")}
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", make_folder(tmp_path / "d", rows, aliases=None))
    try:
        assert [(h.row.id, h.score) for h in d.find("THE_END", k=1)] == [("the_end", 1000)]
        assert [(h.row.id, h.score) for h in d.find("end the", k=1)] == [("the_end", 850)]
    finally:
        d.close()
