"""The resolver's nine layers on a small Directory: each hit names its score, layer and words."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.directory import Directory, open_directory
from catalog.resolver import Resolver, budget, no_match
from catalog.words import strip_framing
from tests.catalog.conftest import make_folder


def top(directory: Directory, query: str) -> tuple[str, int, str, tuple[str, ...]]:
    hits = directory.find(query, k=5)
    assert hits, f"no hit for {query!r}"
    h = hits[0]
    return h.row.id, h.score, h.layer, h.matched


@pytest.mark.parametrize(
    ("query", "expected_id", "score", "layer"),
    [
        ("GET_WEATHER", "get_weather", 1000, "name"),
        ("get_weather", "get_weather", 1000, "name"),
        ("get_wea", "get_weather", 900, "prefix"),
        ("get weather", "get_weather", 850, "phrase"),
        ("weather get", "get_weather", 850, "phrase"),
        ("weather get get", "get_weather", 800, "words"),
        ("city forecast", "get_weather", 700, "text"),
        ("ge city", "get_weather", 600, "lead"),
        ("wether", "get_weather", 300, "typo"),
        ("waether", "get_weather", 300, "typo"),
        ("tiktok", "tests_run", 200, "sound"),
    ],
)
def test_each_layer_scores_its_integer(
    directory: Directory, query: str, expected_id: str, score: int, layer: str
) -> None:
    """Every layer of DESIGN.md answers with its own integer score and names itself."""
    assert top(directory, query)[:3] == (expected_id, score, layer)


def test_typo_and_transposition_carry_the_words_that_matched(directory: Directory) -> None:
    """A misspelling says which word it took for which (waether -> weather is one transposition)."""
    assert top(directory, "waether")[3] == ("waether~weather",)
    assert top(directory, "tiktok")[3] == ("tiktok~tests",)


def test_alias_means_every_row_its_patterns_name(directory: Directory) -> None:
    """`imessage` names IMSG_* and IMESSAGE* rows; another query word that is a word of the row's name
    adds 14 (seed 000: "send an imessge" -> IMSG_SEND 764)."""
    hits = {h.row.id: (h.score, h.layer) for h in directory.find("imessage", k=10)}
    assert hits == {
        "imsg_send": (750, "alias"),
        "imsg_read": (750, "alias"),
        "imessage_contacts": (900, "prefix"),
    }
    send = directory.find("send imessage", k=1)[0]
    assert (send.row.id, send.score, send.layer, send.matched) == (
        "imsg_send",
        764,
        "alias",
        ("imessage", "send"),
    )


def test_question_framing_is_stripped(directory: Directory) -> None:
    """'how do I get the weather?' searches 'get the weather': the framing is never a search term."""
    assert strip_framing("How do I get the weather?") == "get the weather"
    assert strip_framing("where is my ledger row") == "ledger row"
    row_id, score, layer, matched = top(directory, "how do I get the weather?")
    assert (row_id, score, layer) == ("get_weather", 800, "words")
    assert "how" not in matched


def test_no_match_is_empty_and_said_plainly(directory: Directory) -> None:
    """Nothing is invented: a query no layer matches gives no rows and a plain sentence."""
    assert directory.find("zzqx", k=10) == []
    assert no_match(" zzqx ") == (
        'Nothing in the Directory is called, or means, "zzqx". Every row is listed at GET /api/directory'
    )


def test_hits_are_rows_that_exist_best_first(directory: Directory) -> None:
    """Every hit is a real row, sorted by score; k and the bundle filter cut the list."""
    ids = {r.id for r in directory.rows()}
    hits = directory.find("ledger row", k=10)
    assert all(h.row.id in ids for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(directory.find("ledger row", k=1)) == 1
    assert {h.row.bundle for h in directory.find("ledger row", bundle="article")} == {"article"}


def test_colliding_ids_get_their_bundle(directory: Directory) -> None:
    """Two bundles holding ledger_row.md: each id takes its bundle prefix; unique ids stay short."""
    ids = {r.id for r in directory.rows()}
    assert {"tool/ledger_row", "article/ledger_row", "get_weather", "weather_notes"} <= ids
    assert directory.row("tool/ledger_row").name == "LEDGER_ROW"
    assert directory.row("LEDGER_ROW").id == "tool/ledger_row"


def test_edit_budget_scales_with_word_length() -> None:
    """No edits under four letters, one up to seven, two from eight."""
    assert [budget(w) for w in ("abc", "abcd", "abcdefg", "abcdefgh")] == [0, 1, 1, 2]


def test_fuzzy_layers_only_fill_what_exact_layers_leave(directory: Directory) -> None:
    """With enough exact hits the fuzzy layers never run, since they could not outrank them."""
    resolver = Resolver(directory.index)
    assert all(h.score >= 600 for h in resolver.find("ledger", k=1))


def test_alias_naming_no_row_is_reported_not_fatal(tmp_path: Path) -> None:
    """An alias pattern that names no row is skipped and reported; the Directory still loads and
    answers (it used to refuse to load, taking every command down)."""
    folder = make_folder(tmp_path / "d", aliases='sms = ["SMS_*"]\nimessage = ["IMSG_"]\n')
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        assert d.alias_problems == (
            'aliases.toml: alias "sms" pattern "SMS_*" names no row in the Directory',
        )
        assert d.find("send imessage", k=1)[0].layer == "alias"
    finally:
        d.close()


def test_malformed_aliases_are_reported_not_fatal(tmp_path: Path) -> None:
    """A value that is not a pattern list is reported with the alias named; the rest still work."""
    folder = make_folder(tmp_path / "d", aliases='sms = 3\nlog = ["LEDGER_ROW"]\n')
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        assert d.alias_problems == ('aliases.toml: alias "sms" must be a pattern or a list of patterns',)
        assert d.find("log", k=1)[0].row.name == "LEDGER_ROW"
    finally:
        d.close()


def test_invalid_toml_is_reported_not_fatal(tmp_path: Path) -> None:
    """An aliases.toml that is not TOML at all gives one problem and no aliases, never a dead Directory."""
    folder = make_folder(tmp_path / "d", aliases="imessage = [\n")
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        assert len(d.alias_problems) == 1 and "not valid TOML" in d.alias_problems[0]
        assert d.find("get weather", k=1)[0].row.name == "GET_WEATHER"
    finally:
        d.close()
