"""`run --replay`'s options, defined once and spread into `run` as one parameter (as `with_filters` does).

`run` keeps its own shape; everything about replaying lives here: which recording (`--replay
SELECTION`, read like every Ledger question, and the Ledger it is in), how requests are matched,
how streams are paced, whether misses may go live and be recorded.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from flightlog.commands.options import Given, spread_options, worded_filter
from flightlog.errors import CommandError
from flightlog.settings import load_settings

if typing.TYPE_CHECKING:
    from readback.recorded import Selection
    from recording.identity import Identity

ReplayOpt = Annotated[
    str | None,
    typer.Option(
        "--replay",
        help="Run COMMAND against a hermetic serve-back of this recording: a session, a task or any"
        " Ledger question in plain words ('session s1', 'task t2 model gpt-4o', 'all').",
    ),
]
_Opt = typer.Option
REPLAY_OPTIONS: dict[str, Any] = {
    "ledger": Annotated[
        str | None, _Opt("--ledger", help="With --replay: the Ledger (URL) holding the recording.")
    ],
    "blobs": Annotated[str | None, _Opt("--blobs", help="With --replay: that Ledger's blob store URL.")],
    "match": Annotated[
        str,
        _Opt(
            "--match",
            help="With --replay: matching strategies tried in order (exact, normalized, url) and"
            " sequence (repeated identical requests get the recorded answers in order);"
            " default exact,normalized,sequence.",
        ),
    ],
    "match_rules": Annotated[
        Path | None,
        _Opt("--match-rules", help="With --replay: a TOML file overriding the normalizing rules."),
    ],
    "timing": Annotated[
        str,
        _Opt(
            "--timing", help="With --replay: fixed (--chunk-delay between chunks, the default) or recorded."
        ),
    ],
    "chunk_delay": Annotated[
        float,
        _Opt("--chunk-delay", help="With --replay: seconds between the chunks of a stream (default 0)."),
    ],
    "record_missing": Annotated[
        bool,
        _Opt("--record-missing", help="With --replay: send misses live and record them into the Ledger."),
    ],
    "report_json": Annotated[
        Path | None, _Opt("--report-json", help="With --replay: write the per-request report here.")
    ],
}


@dataclass(frozen=True)
class ReplayOptions:
    """The replay options, those not given at their defaults."""

    ledger: str | None = None
    blobs: str | None = None
    match: str = "exact,normalized,sequence"
    match_rules: Path | None = None
    timing: str = "fixed"
    chunk_delay: float = 0.0
    record_missing: bool = False
    report_json: Path | None = None

    @classmethod
    def given(cls, values: Given) -> ReplayOptions:
        return cls(**{name: value for name, value in values.items() if value is not None})


with_replay_options = spread_options("replaying", REPLAY_OPTIONS)
"""`run`'s replay options, for a command with a `replaying: Given` parameter."""


def replay_selection(words: str, ledger_url: str) -> Selection:
    """The recording named in plain words, read against the Ledger's values as `ask` reads them
    ("session a" where a session is named "a"); a word not understood is refused (it would select
    all)."""
    # deferred: SQLAlchemy loads slowly; `run` without --replay never needs it
    from readback.recorded import Selection
    from storage.questions.known_values import LedgerValues

    reader = load_settings().open_reader(ledger_url)
    try:
        return Selection(worded_filter(words, f"--replay {words!r}", LedgerValues(reader)))
    finally:
        reader.close()


def run_with_replay(
    command: list[str], replay: str, given: Given, who: Identity, extra_env: dict[str, str]
) -> int:
    """`run --replay`: check the options, select the recording, run COMMAND against it."""
    options = ReplayOptions.given(given)
    # deferred: mitmproxy and SQLAlchemy load slowly; only `run --replay` needs them
    from flightlog.replay_run import Plan, run_replayed
    from readback.matching import load_rules, parse_strategies

    if options.timing not in ("fixed", "recorded"):
        raise CommandError(f"--timing is fixed or recorded, not {options.timing!r}")
    if not 0 <= options.chunk_delay <= 60:
        raise CommandError(f"--chunk-delay is between 0 and 60 seconds, not {options.chunk_delay}")
    strategies = parse_strategies(options.match)
    rules = load_rules(options.match_rules)
    settings = load_settings()
    ledger_url = options.ledger or settings.ledger_url
    selection = replay_selection(replay, ledger_url)
    plan = Plan(
        ledger_url=ledger_url,
        blobs_url=options.blobs or settings.blobs_url,
        selection=selection,
        strategies=strategies,
        rules=rules,
        timing=options.timing,
        chunk_delay=options.chunk_delay,
    )
    return run_replayed(
        command, plan, settings.confdir, who, options.record_missing, options.report_json, extra_env
    )
