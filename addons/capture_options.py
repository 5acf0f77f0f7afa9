"""The options the capture addon declares (each declared once, in `storage.configuration`), and the
checks of their values `configure()` runs.

`flightlog proxy` sets them from its flags and `mitmdump -s addons/mitmdump_entry.py` from `--set`, so
both launchers read the same table and meet the same checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from storage.configuration import COMMIT_MS, options

MAX_COMMIT_MS: Final = 10_000
"""The longest `flightlog_commit_ms`: past it what a writer holds unwritten is a risk, not a saving."""
MAX_REQUEST_BODY: Final = 8 * 1024 * 1024
"""Request bodies larger than this are not read (recorded `missing`) unless the option says more."""
SHARED_COMMIT_MS: Final = 100


def commit_ms(workers: int, cores: int) -> int:
    """How long each writer gathers events before it commits, for `workers` proxies on `cores`.

    Each worker is two busy processes (its proxy and its writer). While they fit on the cores, a
    writer's CPU is spare and a commit comes every `COMMIT_MS`. Once they outnumber the cores, the
    writers' CPU is taken from the proxies, and a commit every `SHARED_COMMIT_MS` carries twice the
    events: the Ledger cost of one writer fed by every worker (its batches are as large), with each
    worker keeping a writer of its own. Measured with 2 workers on 2 cores (bench.workers): writer
    CPU per request 10-19% less on SQLite and 14-21% on PostgreSQL, the same requests a second
    within this machine's noise, the answer->commit p99 still within its goal. One process fed by
    every worker would save only its own fixed cost besides (its looks at the pipe, `pipe_reader`),
    about 1% a request.
    """
    return SHARED_COMMIT_MS if 2 * workers > cores else COMMIT_MS


OPTIONS: Final = options()
"""The options `load()` declares: name, type, default, help (`storage.configuration`'s proxy options)."""


def check(opts: Any, updated: set[str]) -> int | None:
    """Refuse option values capture cannot use (mitmproxy's OptionsError: one line at startup or on
    `--set`); the request body limit in bytes when `flightlog_max_request_body` changed."""
    from mitmproxy import exceptions
    from mitmproxy.utils import human

    if "flightlog_stream_grace" in updated and opts.flightlog_stream_grace < 0:
        raise exceptions.OptionsError("flightlog_stream_grace must be 0 or more seconds")
    commit = opts.flightlog_commit_ms
    if "flightlog_commit_ms" in updated and not 1 <= commit <= MAX_COMMIT_MS:
        raise exceptions.OptionsError(f"flightlog_commit_ms must be 1 to {MAX_COMMIT_MS} ms, not {commit}")
    secrets = opts.flightlog_secrets
    if "flightlog_secrets" in updated and secrets and not Path(secrets).is_file():
        raise exceptions.OptionsError(f"secrets file not found: {opts.flightlog_secrets}")
    ledger = opts.flightlog_ledger
    if "flightlog_ledger" in updated and ledger and not ledger.startswith(("sqlite:", "postgresql")):
        raise exceptions.OptionsError(
            "the Ledger URL (--ledger, flightlog_ledger) must be sqlite:///PATH or "
            f"postgresql+psycopg://..., not {opts.flightlog_ledger!r}"
        )
    if "flightlog_max_request_body" not in updated:
        return None
    try:
        return human.parse_size(opts.flightlog_max_request_body) or MAX_REQUEST_BODY
    except ValueError as e:
        raise exceptions.OptionsError(f"flightlog_max_request_body: {e}") from e
