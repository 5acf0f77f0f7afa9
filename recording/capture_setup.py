"""What the capture addon is set up with: Ledger URLs, redaction and prices, hosts never recorded,
and the counters it leaves behind for the bench.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from formats.usage import extract_usage
from recording.events import Processing
from recording.prices import PriceTable
from recording.redaction.redact import Redactor
from recording.redaction.secrets import load_secrets
from storage.configuration import environment
from storage.locations import default_blobs_url, default_ledger_url, default_secrets_file, flightlog_home

if TYPE_CHECKING:
    from recording.writer.process import WriterSpec
    from recording.writer.thread import Writer


def default_urls(env: Mapping[str, str] = os.environ) -> tuple[str, str]:
    """The Ledger and blob URLs when no option names them (`storage.locations`, as everywhere)."""
    return default_ledger_url(env), default_blobs_url(env)


PROCESSING_OPTIONS = frozenset(
    {"flightlog_secrets", "flightlog_secret_env", "flightlog_redact_auth_headers", "flightlog_prices"}
)


def processing_files(opts: Any) -> tuple[Path | None, Path]:
    """The secrets file (the named one, else FLIGHTLOG_HOME/secrets.env when it exists) and the price
    override file that `processing` reads: what the proxy watches for changes."""
    home = flightlog_home()
    named = Path(opts.flightlog_secrets) if opts.flightlog_secrets else default_secrets_file(home)
    return named, Path(opts.flightlog_prices) if opts.flightlog_prices else home / "prices.toml"


def processing(opts: Any) -> Processing:
    """Redaction, usage and prices as the options say; a bad secrets or price file raises RecordingError."""
    secrets_file, prices_file = processing_files(opts)
    found = load_secrets(secrets_file, list(opts.flightlog_secret_env))
    redactor = Redactor(found, redact_auth_headers=opts.flightlog_redact_auth_headers)
    prices = PriceTable.load(prices_file)
    return Processing(redactor=redactor, extract_usage=extract_usage, prices=prices)


def storage_hosts(blobs_url: str = "", env: Mapping[str, str] = os.environ) -> Sequence[str]:
    """Hosts of the storage layer's own endpoints (an S3 endpoint), so their traffic is never recorded.

    The storage layer does not use the proxy itself; this covers a client that sends it there anyway.
    """
    from urllib.parse import parse_qs, urlsplit

    endpoints = [env.get(n, "") for n in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")]
    if blobs_url.startswith("s3://"):
        endpoints += parse_qs(urlsplit(blobs_url).query).get("endpoint", [])
    return [host for e in endpoints if e and (host := urlsplit(e).hostname)]


def write_stats(path: Path, writer: Writer) -> None:
    """The writer's counters and answer→commit delays (p50/p99), for the bench."""
    delays = sorted(writer.stats.delays)

    def pct(p: float) -> float | None:
        return delays[min(len(delays) - 1, int(p * len(delays)))] if delays else None

    path.write_text(
        json.dumps(
            {
                "written": writer.stats.written,
                "dropped": writer.stats.dropped + writer.stats.proxy_dropped,
                "unrecordable": writer.stats.unrecordable,
                "rejected": writer.stats.rejected,
                "batches": writer.stats.batches,
                "commit_ms": round(writer.flush_interval * 1000),
                "delay_p50": pct(0.50),
                "delay_p99": pct(0.99),
            }
        )
    )


def writer_spec(options: Any, collector: str) -> WriterSpec:
    """What the writer process needs, from the proxy's options (empty ones: the environment's)."""
    from recording.writer.process import WriterSpec

    ledger_url, blobs_url = default_urls()
    return WriterSpec(
        ledger_url=options.flightlog_ledger or ledger_url,
        blobs_url=options.flightlog_blobs or blobs_url,
        collector=collector,
        drain_timeout=float(options.flightlog_drain_timeout),
        stats_file=options.flightlog_stats_file,
        flush_interval=options.flightlog_commit_ms / 1000,
        journal=str(flightlog_home() / "journal"),
        witnesses=tuple(options.flightlog_witness) or tuple(environment("witness").split()),
        checkpoint_interval=float(options.flightlog_checkpoint_interval),
    )
