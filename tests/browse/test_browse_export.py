"""`flightlog browse` hands the browser an exporter: the selection written as HAR, a mitmproxy flow file
or JSON lines, each read back by its real reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mitmproxy import http
from mitmproxy.io import FlowReader

from flightlog.commands.browse import exporter
from storage.ledger import Ledger
from tests.browse.conversations import conversation_ledger
from tui.errors import TuiError

__all__ = ["conversation_ledger"]


def written(said: str) -> Path:
    return Path(said.rsplit(" to ", 1)[1])


def test_export_the_selection_in_each_format(conversation_ledger: Ledger, tmp_path: Path) -> None:
    """HAR (json), flows (mitmproxy's FlowReader) and JSON lines hold the chosen exchanges, nothing else."""
    export = exporter(conversation_ledger, tmp_path)
    har = written(export("har", ["c1", "c2"]))
    entries = json.loads(har.read_text())["log"]["entries"]
    assert [e["request"]["url"] for e in entries] == ["https://api.openai.com/v1/chat/completions"] * 2
    assert "[OPENAI_API_KEY]" in json.dumps(entries)
    flows = written(export("mitmproxy", ["c5"]))
    with flows.open("rb") as f:
        read = list(FlowReader(f).stream())
    assert len(read) == 1 and isinstance(read[0], http.HTTPFlow)
    assert read[0].request.url == "https://ws.example.com/feed"
    lines = written(export("jsonl", ["c1"])).read_text().splitlines()
    assert sorted(json.loads(line)["event_id"] for line in lines) == ["c1-request", "c1-response"]


def test_an_unknown_format_or_folder_is_one_line(conversation_ledger: Ledger, tmp_path: Path) -> None:
    """A format the browser does not offer, or a folder that cannot be written, is one clear TuiError."""
    with pytest.raises(TuiError, match="export as har, mitmproxy, jsonl"):
        exporter(conversation_ledger, tmp_path)("otlp", ["c1"])
    with pytest.raises(TuiError, match="cannot write"):
        exporter(conversation_ledger, tmp_path / "missing")("har", ["c1"])
