"""OTLP export's edges: an unreachable receiver, the endpoint URL, the options that go together (the
spans in a real Phoenix: tests/otlp/test_otlp_phoenix.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from readback.errors import OtlpError
from readback.export import export_otlp
from readback.otlp import traces_url
from storage.ledger import Ledger
from tests.browse.recorded_exchanges import head, record


def test_an_unreachable_receiver_is_one_clear_error(sqlite_ledger: Ledger) -> None:
    """Nothing listening: OtlpError naming the traces URL, not a traceback from httpx."""
    action = record(
        sqlite_ledger, method="GET", url="http://api.example.test/x", request_head=head("GET /x HTTP/1.1", [])
    )
    with pytest.raises(OtlpError, match=r"cannot reach the OTLP receiver at http://127.0.0.1:9/v1/traces"):
        export_otlp(sqlite_ledger, [action], "http://127.0.0.1:9")


def test_traces_url_takes_a_base_or_the_full_path() -> None:
    """`--endpoint http://host:4318` and `.../v1/traces` name the same URL, as the OTel SDKs read it."""
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces") == "http://h:4318/v1/traces"


def test_endpoint_and_format_go_together(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """`--endpoint` without `--format otlp` (or otlp without it) is one clear line and exit 1."""
    env = {**os.environ, "FLIGHTLOG_LEDGER": sqlite_ledger.url, "FLIGHTLOG_BLOBS": (tmp_path / "b").as_uri()}
    for args in (["--format", "otlp"], ["--format", "har", "--endpoint", "http://127.0.0.1:9"]):
        done = subprocess.run(
            [sys.executable, "-m", "flightlog", "export", *args], capture_output=True, text=True, env=env
        )
        assert done.returncode == 1
        assert done.stderr.strip().endswith("--endpoint URL goes with --format otlp (and only with it)")


def test_content_goes_with_otlp(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """`export --content` without `--format otlp`, and `proxy --otlp-content` without an endpoint, are
    one clear line and exit 1 (content is only ever a span event)."""
    env = {**os.environ, "FLIGHTLOG_LEDGER": sqlite_ledger.url, "FLIGHTLOG_BLOBS": (tmp_path / "b").as_uri()}
    for args, said in (
        (["export", "--format", "har", "--content"], "--content goes with --format otlp"),
        (["proxy", "--otlp-content"], "--otlp-content goes with --otlp-endpoint URL"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "flightlog", *args], capture_output=True, text=True, env=env
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr.strip().endswith(said)
