"""A fresh install's starter rows are not just documents: each one runs through the door.

Every starter tool is called with sample arguments through the in-process door (the same one
`flightlog call` runs), against a Ledger holding a few events: each answers ok, and the door binds
flightlog's own Ledger token itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from door.dispatch import Dispatcher
from flightlog.commands.call import open_dispatcher
from flightlog.settings import load_settings
from storage.ledger import open_ledger
from tests.storage.factory import batch, event

STARTER = Path(__file__).parents[2] / "catalog" / "starter" / "tool"


@pytest.fixture
def door(home: Path) -> Iterator[tuple[Dispatcher, str]]:
    settings = load_settings()
    ledger = open_ledger(settings.ledger_url, settings.blobs_url)
    ledger.append(batch([event(0, payload=b'{"hello": 1}'), event(1, status=500)]))
    sha = ledger.event("ev-000000").payload_sha256  # type: ignore[union-attr]
    ledger.close()
    opened = open_dispatcher(settings, None, None, None)
    yield opened, str(sha)
    opened.close()


def sample_args(sha: str) -> dict[str, dict[str, Any]]:
    return {
        "LEDGER_ROW": {"event_id": "ev-000001"},
        "LEDGER_ACTION": {"action_id": "act-000000"},
        "LEDGER_BLOB": {"sha256": sha},
        "LEDGER_COUNTS": {"since": "2020-01-01T00:00:00Z"},
        "LEDGER_GROUP": {"by": "kind"},
        "LEDGER_QUERY": {"filter": {"agent": "alpha"}},
        "LEDGER_ASK": {"question": "errors from agent alpha"},
        "DIRECTORY_MANIFEST": {},
        "DIRECTORY_SEARCH": {"query": "ledger row"},
        "DIRECTORY_GET": {"ids": "ledger_row"},
        "DIRECTORY_ROW": {"id": "ledger_row"},
        "DIRECTORY_SNAPSHOT": {},
        "DIRECTORY_WRITE": {
            "bundle": "article",
            "path": "note.md",
            "content": "---\nname: NOTE\ndescription: d\n---\nhi\n",
        },
        "DISPATCH": {"tool": "LEDGER_COUNTS", "args": {}},
    }


def starter_names() -> list[str]:
    names = []
    for path in sorted(STARTER.glob("*.md")):
        for line in path.read_text().splitlines():
            if line.startswith("name: "):
                names.append(line.removeprefix("name: ").strip())
                break
    return names


def test_every_starter_tool_has_sample_arguments_here() -> None:
    """A new starter row must be added to this test (DIRECTORY_DELETE is exercised separately)."""
    assert set(starter_names()) - {"DIRECTORY_DELETE"} == set(sample_args("x"))


@pytest.mark.parametrize("tool", sorted(sample_args("x")))
def test_starter_tool_runs_through_the_door(door: tuple[Dispatcher, str], tool: str) -> None:
    """ok, with a result, for each starter tool called as an agent would call it."""
    dispatcher, sha = door
    result = dispatcher.dispatch({"tool": tool, "args": sample_args(sha)[tool]}, door="cli")
    assert result.status == 200, json.dumps(result.reply)[:500]
    assert result.reply["ok"] is True, json.dumps(result.reply)[:500]


def test_directory_delete_runs_with_the_hash_a_refusal_offers(door: tuple[Dispatcher, str]) -> None:
    """DIRECTORY_DELETE: the first try is refused with the hash to retry with; the retry deletes."""
    dispatcher, _ = door
    doc = "---\nname: GONE\ndescription: d\n---\nbye\n"
    written = dispatcher.dispatch(
        {"tool": "DIRECTORY_WRITE", "args": {"bundle": "article", "path": "gone.md", "content": doc}},
        door="cli",
    )
    assert written.reply["ok"] is True
    first = dispatcher.dispatch(
        {"tool": "DIRECTORY_DELETE", "args": {"bundle": "article", "path": "gone.md", "replaces": "0" * 64}},
        door="cli",
    )
    assert first.reply["ok"] is False
    offered = first.reply["result"]["retry_with"]
    assert len(offered) == 64
    retried = dispatcher.dispatch(
        {"tool": "DIRECTORY_DELETE", "args": {"bundle": "article", "path": "gone.md", "replaces": offered}},
        door="cli",
    )
    assert retried.reply["ok"] is True, json.dumps(retried.reply)
