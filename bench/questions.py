"""Right / refused / wrong on the question table (issue 51), for this tree and for the code before.

The table is `tests.support.question_table`: 300 operator questions from a grammar, each with its
exact reading or the word it must be refused for, asked of a recorded Ledger (SQLite, made here)
and judged against plain SQL. Right: read as expected and answering what the SQL says, or refused
naming the word. Refused: a readable question refused. Wrong: anything else.

The code before is another checkout's source (`--against DIR`), or by default `main`'s merge base
with this branch, taken with `git archive` into a temporary folder; it is asked in a subprocess
whose `storage` is that source. Its answers are judged on what a reader takes from them (the
filter, the view and the figures): fields its answer does not carry are not held against it, but
a count of events given where calls were asked is wrong.

    python -m bench questions
    python -m bench.questions [--against DIR] [--size 300]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text

from storage.events import Batch
from storage.ledger import open_ledger
from tests.support.question_table import NOW, Question, judge, oracle, recorded_events, table

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys
from datetime import datetime
from sqlalchemy import create_engine
from storage.errors import StorageError
from storage.questions.answer import answer
from storage.questions.known_values import LedgerValues
from storage.questions.reading import ask
engine = create_engine(sys.argv[1])
now = datetime.fromisoformat(sys.argv[2])
out = []
for q in json.load(sys.stdin):
    try:
        out.append({"reply": answer(engine, ask(q, now, LedgerValues(engine)), 50)})
    except StorageError as e:
        out.append({"refusal": str(e)})
print(json.dumps(out, default=str))
"""


def asked_here(url: str, questions: list[Question]) -> list[dict[str, Any]]:
    """This tree's answers, in a subprocess as the code before is asked (the same way for both)."""
    return asked(ROOT, url, questions)


def asked(source: Path, url: str, questions: list[Question]) -> list[dict[str, Any]]:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, url, NOW.isoformat()],
        input=json.dumps([q.text for q in questions]),
        capture_output=True,
        text=True,
        cwd=source,
        env={"PYTHONPATH": str(source), "PATH": "/usr/bin:/bin", "HOME": str(source)},
        check=False,
    )
    if run.returncode != 0:
        raise SystemExit(f"bench.questions: asking {source} failed: {run.stderr.strip().splitlines()[-1:]}")
    return list(json.loads(run.stdout))


def lenient(reply: dict[str, Any] | None, q: Question) -> dict[str, Any] | None:
    """An answer of the code before, its missing reading fields filled with the expected ones (what
    a reader takes from it is the filter, the view and the figures)."""
    if reply is None:
        return None
    return {**{k: v for k, v in q.reading().items() if k not in reply}, **reply}


def verdicts(
    url: str, questions: list[Question], answers: list[dict[str, Any]], before: bool
) -> Counter[str]:
    engine = create_engine(url)

    def rows(sql: str, params: dict[str, Any]) -> list[Any]:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(text(sql), params).mappings().all()]

    out: Counter[str] = Counter()
    examples: list[str] = []
    for q, got in zip(questions, answers, strict=True):
        reply = lenient(got.get("reply"), q) if before else got.get("reply")
        expected = oracle(q, rows, "sqlite") if q.refused is None else {}
        try:
            verdict = judge(q, reply, got.get("refusal"), expected)
        except (KeyError, TypeError) as e:  # an answer of another shape: not what was asked
            verdict = f"wrong: answer without {e}"
        out[verdict.split(":")[0]] += 1
        if verdict != "right" and len(examples) < 6:
            examples.append(f"    {q.text!r}: {verdict[:150]}")
    engine.dispose()
    print("\n".join(examples))
    return out


def before_source(scratch: Path) -> Path | None:
    """`main`'s merge base with this branch, as source files in `scratch` (None: no git here)."""
    base = subprocess.run(["git", "merge-base", "HEAD", "main"], capture_output=True, text=True, cwd=ROOT)
    if base.returncode != 0:
        return None
    archive = subprocess.run(
        ["git", "archive", base.stdout.strip()], capture_output=True, cwd=ROOT, check=True
    )
    scratch.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
    return scratch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.questions", description=__doc__)
    parser.add_argument("--against", type=Path, help="the code before: another checkout's source folder")
    parser.add_argument("--size", type=int, default=300)
    options = parser.parse_args(argv)
    questions = table(options.size)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        ledger = open_ledger(url, (Path(tmp) / "blobs").as_uri())
        ledger.append(Batch("t", 1, recorded_events()))
        ledger.close()
        sides = {"now": (ROOT, False)}
        against = options.against or before_source(Path(tmp) / "before")
        if against is not None:
            sides = {"before": (against, True), **sides}
        results = {}
        for name, (source, before) in sides.items():
            print(f"{name} ({source}): examples not right")
            results[name] = verdicts(url, questions, asked(source, url, questions), before)
    print(f"\n{len(questions)} questions ({sum(q.refused is None for q in questions)} readable)")
    print(f"{'side':8} {'right':>6} {'refused':>8} {'wrong':>6}")
    for name, tally in results.items():
        print(f"{name:8} {tally['right']:6} {tally['refused']:8} {tally['wrong']:6}")


if __name__ == "__main__":
    main(sys.argv[1:])
