"""A small test Directory on disk, and a Directory opened on it in a fresh ledger."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from catalog.directory import Directory, open_directory


def row(name: str, description: str, body: str = "", **extra: str) -> str:
    """A row document: frontmatter with name, description (and extras), then the body."""
    lines = ["---", f"name: {name}", f"description: {description}"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join([*lines, "---", body]) + "\n"


ROWS = {
    "tool/get_weather.md": row(
        "GET_WEATHER", "Current conditions and forecast for a city.", "# GET_WEATHER\n"
    ),
    "tool/imsg_send.md": row("IMSG_SEND", "Send a text message to a contact.", "Uses [[imsg_read]]."),
    "tool/imsg_read.md": row("IMSG_READ", "Read the latest messages of a conversation."),
    "tool/imessage_contacts.md": row("IMESSAGE_CONTACTS", "List the contacts that can receive messages."),
    "tool/tests_run.md": row("TESTS_RUN", "Run the project's test suite and report failures."),
    "tool/ledger_row.md": row("LEDGER_ROW", "One recorded event whole, by its id."),
    "article/weather_notes.md": row(
        "Weather notes",
        "How the weather tool reads its upstream.",
        "Intro text.\n\n## Usage\n\nCall GET_WEATHER with a city.\n\n## Limits\n\nSixty calls an hour.\n",
    ),
    "article/ledger_row.md": row("Ledger row article", "Why a ledger row keeps exact bytes."),
}
ALIASES = 'imessage = ["IMSG_*", "IMESSAGE*"]\nlog = ["LEDGER_ROW"]\n'


def make_folder(root: Path, rows: dict[str, str] | None = None, aliases: str | None = ALIASES) -> Path:
    """Write a Directory folder: one file per row, `aliases.toml` at the root."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in (ROWS if rows is None else rows).items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    if aliases is not None:
        (root / "aliases.toml").write_text(aliases, encoding="utf-8")
    return root


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "dir")


@pytest.fixture
def directory(tmp_path: Path, folder: Path) -> Iterator[Directory]:
    """The test Directory, opened on a fresh SQLite ledger."""
    d = open_directory(f"sqlite:///{tmp_path / 'ledger.db'}", folder)
    yield d
    d.close()


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m flightlog ARGS` in a child with FLIGHTLOG_HOME `home`, as a user runs it."""
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "flightlog", *args], env=env, capture_output=True, text=True, timeout=60
    )
