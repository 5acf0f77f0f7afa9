"""The options the capture addon declares: one name, one default and one help text each.

`flightlog proxy` sets them from its flags and `mitmdump -s addons/mitmdump_entry.py` from `--set`, so
both launchers read the same table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

DEFAULT_OUTBOUND: Final = ("api.openai.com", "api.anthropic.com")
"""Reverse-proxy targets whose traffic is outbound by default: the model APIs an agent calls."""
MAX_COMMIT_MS: Final = 10_000
"""The longest `flightlog_commit_ms`: past it what a writer holds unwritten is a risk, not a saving."""

OPTIONS: tuple[tuple[str, object, object, str], ...] = (
    ("flightlog_ledger", str, "", "Ledger database URL (default: FLIGHTLOG_LEDGER)."),
    ("flightlog_blobs", str, "", "Blob store URL, file:// or s3:// (default: FLIGHTLOG_BLOBS)."),
    ("flightlog_collector", str, "", "This proxy's collector id in the Ledger."),
    ("flightlog_secrets", str, "", "File of NAME=value secrets replaced by [NAME]."),
    ("flightlog_secret_env", Sequence[str], [], "Names of environment variables whose values are secrets."),
    (
        "flightlog_redact_auth_headers",
        bool,
        True,
        "Redact Authorization, Cookie, X-Api-Key and similar header values even when not configured.",
    ),
    ("flightlog_prices", str, "", "A price table file overriding the shipped one."),
    (
        "flightlog_stream_grace",
        int,
        25,
        "Seconds to keep reading a streamed answer after its client left (stored as partial).",
    ),
    (
        "flightlog_max_request_body",
        str,
        "8m",
        "Request bodies larger than this are streamed through unread and recorded as missing.",
    ),
    ("flightlog_ignore_hosts", Sequence[str], [], "Hosts never recorded (flightlog.local always is)."),
    (
        "flightlog_outbound_hosts",
        Sequence[str],
        list(DEFAULT_OUTBOUND),
        "Reverse-proxy targets whose traffic is outbound (direction out), e.g. model APIs.",
    ),
    (
        "flightlog_drain_timeout",
        int,
        30,
        "Seconds to keep trying to write what is queued at exit when the Ledger is down.",
    ),
    (
        "flightlog_commit_ms",
        int,
        50,
        "Milliseconds the writer gathers events before one batch commits (more: less CPU an event,"
        " a later commit). `flightlog proxy` gives 100 when its processes outnumber the cores.",
    ),
    ("flightlog_stats_file", str, "", "Write the writer's counters here as JSON at exit."),
)
"""The options `load()` declares: name, type, default, help."""
