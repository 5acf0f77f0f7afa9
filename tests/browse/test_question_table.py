"""The question table (issue 51): 300 operator questions from a grammar (shapes x values held and
not held x times x misspellings, `tests.support.question_table`), each read exactly as expected or
refused naming the word it must be refused for, and each answer equal to what plain SQL written in
the table says, on a recorded Ledger on SQLite and on PostgreSQL. Goal: none wrong, none of the
readable ones refused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from storage.errors import StorageError
from storage.events import Batch
from storage.ledger import Ledger, open_ledger
from storage.questions.answer import answer
from storage.questions.known import KnownValues
from storage.questions.known_values import LedgerValues
from storage.questions.reading import ask
from storage.questions.vocabulary import CHECKED
from tests.support.question_table import NOW, Question, judge, oracle, recorded_events, table

TABLE = table()


@pytest.fixture
def recorded(ledger_url: str, tmp_path: Path) -> Iterator[Ledger]:
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    ledger.append(Batch("t", 1, recorded_events()))
    yield ledger
    ledger.close()


def asked(q: Question, source: Any, known: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return answer(source, ask(q.text, NOW, known), 50), None
    except StorageError as e:
        return None, str(e)


def test_the_table_is_big_and_covers_the_grammar() -> None:
    """At least 150 questions (300 here), every shape, value and time among them, refusals too."""
    assert len(TABLE) == 300 and len({q.text for q in TABLE}) == 300
    assert {q.shape.words for q in TABLE} >= {"how many calls {v} {t}", "which session cost the most {v} {t}"}
    assert sum(q.refused is not None for q in TABLE) >= 50
    assert sum(q.refused is None for q in TABLE) >= 150


@pytest.mark.parametrize("q", TABLE, ids=[q.text for q in TABLE])
def test_each_question_reads_exactly_so_or_is_refused_naming_the_word(q: Question) -> None:
    """The reading alone (no database): the filter, view, grouping, rank, limit and total's measure
    exactly; or a refusal naming the word (the Ledger's values from the recorded events)."""
    values: dict[str, set[str]] = {}
    for e in recorded_events():
        for name in CHECKED:
            if getattr(e, name) is not None:
                values.setdefault(name, set()).add(getattr(e, name))
    known = KnownValues(values)
    try:
        question = ask(q.text, NOW, known)
    except StorageError as e:
        assert q.refused is not None, f"refused: {e}"
        assert repr(q.refused) in str(e), str(e)
        return
    assert q.refused is None, f"answered, where it must refuse naming {q.refused!r}: {question.explain()}"
    got = question.to_json()
    assert {k: got[k] for k in q.reading()} == q.reading(), question.explain()


def test_every_answer_agrees_with_plain_sql(recorded: Ledger) -> None:
    """Every question asked of the recorded Ledger: right (read as expected and answering what plain
    SQL says, or refused naming its word), never wrong, no readable question refused."""
    engine = recorded.engine
    dialect = "postgresql" if engine.dialect.name == "postgresql" else "sqlite"

    def rows(sql: str, params: dict[str, Any]) -> list[Any]:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(sql), params).mappings().all()]

    verdicts: dict[str, str] = {}
    for q in TABLE:
        reply, refusal = asked(q, engine, LedgerValues(engine))
        expected = oracle(q, rows, dialect) if q.refused is None else {}
        verdicts[q.text] = judge(q, reply, refusal, expected)
    tally = Counter(v.split(":")[0] for v in verdicts.values())
    wrong = {t: v for t, v in verdicts.items() if v != "right"}
    assert not wrong, f"{dict(tally)}: " + "\n".join(f"{t!r}: {v}" for t, v in list(wrong.items())[:15])
    assert tally == {"right": 300}
