"""Export: HAR 1.2 that validates against the spec's schema, mitmproxy flow files mitmproxy reads back,
JSON lines; bodies and headers equal to what the Ledger recorded."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from readback.export import export, plan
from readback.recorded import Selection
from storage.filters import Filter
from storage.ledger import Ledger
from tests.browse.recorded_exchanges import head, record

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "har-1.2.schema.json").read_text())
AT = datetime(2026, 11, 30, 1, 2, 3, 456000, tzinfo=UTC)
GZ_BODY = gzip.compress(b'{"answer": "f\xc3\xbcnf", "n": 5}', mtime=0)
PNG = bytes(range(256)) * 4
REQ_JSON = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'


def seed(ledger: Ledger) -> list[str]:
    """Three exchanges: a gzip JSON answer (session s1), a binary answer (s1), a refused connection (s2)."""
    a = record(
        ledger,
        method="POST",
        url="https://api.example.test/v1/items?x=1&y=two",
        request_head=head(
            "POST /v1/items?x=1&y=two HTTP/1.1",
            [
                ("Host", "api.example.test"),
                ("Content-Type", "application/json"),
                ("Cookie", "a=1; b=2"),
                ("X-Dup", "one"),
                ("x-dup", "two"),
                ("Authorization", "Bearer [REDACTED]"),
            ],
        ),
        request_body=REQ_JSON,
        response_head=head(
            "HTTP/1.1 201 Created",
            [
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
                ("Content-Length", str(len(GZ_BODY))),
                ("Set-Cookie", "sid=[REDACTED]; Path=/; HttpOnly"),
            ],
        ),
        response_body=GZ_BODY,
        status=201,
        at=AT,
        session="s1",
        redacted=("authorization",),
    )
    b = record(
        ledger,
        method="GET",
        url="http://img.example.test/logo.png",
        request_head=head("GET /logo.png HTTP/1.1", [("Host", "img.example.test")]),
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "image/png"), ("Content-Length", "1024")]),
        response_body=PNG,
        at=AT.replace(second=4),
        session="s1",
    )
    c = record(
        ledger,
        method="GET",
        url="http://down.example.test/",
        request_head=head("GET / HTTP/1.1", [("Host", "down.example.test")]),
        status=None,
        error="ConnectionRefusedError: [Errno 111] Connection refused",
        at=AT.replace(second=5),
        session="s2",
    )
    return [a, b, c]


def run_export(ledger: Ledger, fmt: str, selection: Selection | None = None) -> bytes:
    out = io.BytesIO()
    ids = plan(ledger, selection or Selection(), fmt)
    ticks: list[int] = []
    count = export(ledger, fmt, ids, out, lambda: ticks.append(1))
    assert count == len(ids) == len(ticks)
    return out.getvalue()


def test_har_validates_against_the_har_1_2_schema_and_keeps_what_was_recorded(ledger: Ledger) -> None:
    """The HAR document is valid HAR 1.2; headers (case, order, duplicates), decoded bodies, binary as
    base64, cookies, the failed exchange as status 0 with its error, and the action ids are all there."""
    a, b, c = seed(ledger)
    har = json.loads(run_export(ledger, "har"))
    jsonschema.validate(har, SCHEMA)
    entries = har["log"]["entries"]
    assert [e["_flightlog"]["action_id"] for e in entries] == [a, b, c]

    first = entries[0]
    assert first["startedDateTime"] == "2026-11-30T01:02:03.456+00:00"
    assert first["time"] == pytest.approx(120)
    req = first["request"]
    assert req["method"] == "POST" and req["url"] == "https://api.example.test/v1/items?x=1&y=two"
    assert [(h["name"], h["value"]) for h in req["headers"]][3:5] == [("X-Dup", "one"), ("x-dup", "two")]
    assert req["queryString"] == [{"name": "x", "value": "1"}, {"name": "y", "value": "two"}]
    assert req["cookies"] == [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}]
    assert req["postData"] == {"mimeType": "application/json", "text": REQ_JSON.decode()}
    assert req["bodySize"] == len(REQ_JSON)
    resp = first["response"]
    assert (resp["status"], resp["statusText"], resp["httpVersion"]) == (201, "Created", "HTTP/1.1")
    assert resp["content"]["text"] == '{"answer": "fünf", "n": 5}'
    assert resp["content"]["size"] == len('{"answer": "fünf", "n": 5}'.encode())
    assert resp["bodySize"] == len(GZ_BODY)
    assert resp["cookies"][0] == {"name": "sid", "value": "[REDACTED]", "path": "/", "httpOnly": True}
    assert first["_flightlog"]["redacted"] == ["authorization"]

    png = entries[1]["response"]["content"]
    assert png["encoding"] == "base64" and base64.b64decode(png["text"]) == PNG

    failed = entries[2]["response"]
    assert failed["status"] == 0 and "Connection refused" in failed["_error"]


def test_har_of_a_selection_has_only_the_selected_exchanges(ledger: Ledger) -> None:
    """Selecting by session exports that session's exchanges only (and still valid HAR)."""
    a, b, _ = seed(ledger)
    har = json.loads(run_export(ledger, "har", Selection(Filter(session="s1"))))
    jsonschema.validate(har, SCHEMA)
    assert [e["_flightlog"]["action_id"] for e in har["log"]["entries"]] == [a, b]
    empty = json.loads(run_export(ledger, "har", Selection(Filter(session="nobody"))))
    jsonschema.validate(empty, SCHEMA)
    assert empty["log"]["entries"] == []


def test_selection_takes_the_shared_filter_and_actions(ledger: Ledger) -> None:
    """Any Filter field selects (here status class and host); --action narrows further, in order."""
    a, b, c = seed(ledger)
    ids = plan(ledger, Selection(Filter(status="2xx")), "har")
    assert ids == [a, b]  # the answer's status selects its action; the failed one has none
    assert plan(ledger, Selection(Filter(host="img.example.test")), "har") == [b]
    assert plan(ledger, Selection(actions=(c, a)), "har") == [a, c]
    assert plan(ledger, Selection(Filter(session="s1"), actions=(b, c)), "jsonl") == [
        f"{b}:request",
        f"{b}:response",
    ]


def test_mitmproxy_flow_file_reads_back_with_mitmproxys_reader(ledger: Ledger) -> None:
    """mitmproxy's own FlowReader reads every flow back with the recorded heads and raw bodies."""
    from mitmproxy.io import FlowReader

    a, b, c = seed(ledger)
    flows = list(FlowReader(io.BytesIO(run_export(ledger, "mitmproxy"))).stream())
    assert [f.metadata["flightlog_action"] for f in flows] == [a, b, c]
    first = flows[0]
    recorded = {e.kind: e for e in ledger.action(a)}
    assert first.request.method == "POST"
    assert first.request.url == "https://api.example.test/v1/items?x=1&y=two"
    assert first.request.raw_content == REQ_JSON
    assert list(first.request.headers.fields) == [
        tuple(line.split(b": ", 1)) for line in recorded["http.request"].head.split(b"\r\n")[1:]
    ]
    assert first.response is not None
    assert first.response.status_code == 201 and first.response.reason == "Created"
    assert first.response.raw_content == GZ_BODY
    assert first.response.content == b'{"answer": "f\xc3\xbcnf", "n": 5}'
    assert first.response.headers.get_all("Set-Cookie") == ["sid=[REDACTED]; Path=/; HttpOnly"]
    assert flows[1].response is not None and flows[1].response.raw_content == PNG
    assert flows[2].response is None and flows[2].error is not None
    assert "Connection refused" in flows[2].error.msg


def test_mitmdump_opens_the_exported_flow_file(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """`mitmdump -nr FILE` (the same loader `mitmproxy -r` and mitmweb use) lists every exported flow."""
    ledger = sqlite_ledger
    seed(ledger)
    path = tmp_path / "flows.mitm"
    path.write_bytes(run_export(ledger, "mitmproxy"))
    mitmdump = Path(sys.executable).parent / "mitmdump"
    out = subprocess.run(
        [str(mitmdump), "-n", "-r", str(path), "--set", f"confdir={tmp_path / 'conf'}", "--flow-detail", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "POST https://api.example.test/v1/items?x=1&y=two" in out.stdout
    assert "img.example.test/logo.png" in out.stdout and "201 Created" in out.stdout


def test_jsonl_has_every_event_with_its_payload(ledger: Ledger) -> None:
    """One JSON object per event, in recorded order; text payloads as text, binary as base64."""
    a, b, c = seed(ledger)
    lines = [json.loads(x) for x in run_export(ledger, "jsonl").splitlines()]
    assert [x["action_id"] for x in lines] == [a, a, b, b, c, c]
    assert lines[0]["payload"] == REQ_JSON.decode() and lines[0]["payload_base64"] is None
    assert base64.b64decode(lines[1]["payload_base64"]) == GZ_BODY
    assert base64.b64decode(lines[3]["payload_base64"]) == PNG
    assert lines[5]["error"].startswith("ConnectionRefusedError") and lines[5]["payload"] is None


def test_export_command_writes_files_and_stdout(sqlite_ledger: Ledger, tmp_path: Path) -> None:
    """`flightlog export --format har -o FILE --session s1` writes valid HAR and says how many; jsonl goes
    to standard output; an unknown format is one clear line and exit 1."""
    ledger = sqlite_ledger
    a, b, _ = seed(ledger)
    env = {**os.environ, "FLIGHTLOG_LEDGER": ledger.url, "FLIGHTLOG_BLOBS": (tmp_path / "blobs").as_uri()}
    base = [sys.executable, "-m", "flightlog", "export"]
    out = tmp_path / "s1.har"
    done = subprocess.run(
        [*base, "--format", "har", "-o", str(out), "--session", "s1"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert f"exported 2 exchanges as har to {out}" in done.stderr
    har = json.loads(out.read_text())
    jsonschema.validate(har, SCHEMA)
    assert [e["_flightlog"]["action_id"] for e in har["log"]["entries"]] == [a, b]

    lines = subprocess.run(
        [*base, "--format", "jsonl", "--action", b, "--no-progress"], capture_output=True, env=env
    )
    assert lines.returncode == 0, lines.stderr
    assert [json.loads(x)["kind"] for x in lines.stdout.splitlines()] == ["http.request", "http.response"]

    words = subprocess.run(
        [*base, "--format", "har", "--no-progress", "errors in session s2"], capture_output=True, env=env
    )
    assert words.returncode == 0, words.stderr
    assert b"read as: session=s2 status=errors" in words.stderr
    assert [e["response"]["status"] for e in json.loads(words.stdout)["log"]["entries"]] == [0]

    bad = subprocess.run([*base, "--format", "pcap"], capture_output=True, text=True, env=env)
    assert bad.returncode == 1 and bad.stderr.startswith(
        "flightlog: --format is one of har, mitmproxy, jsonl"
    )


def test_har_flightlog_carries_model_tokens_cost_and_timing(sqlite_ledger: Ledger) -> None:
    """An AI call's HAR entry says in `_flightlog` what the Ledger knows of it: model, tokens, cost,
    and the answer's first/last byte offsets."""
    from tests.storage.factory import batch, event

    answer = {"model": "gpt-4o-mini", "tokens_in": 11, "tokens_out": 7, "cost_usd": 0.0000123}
    timing = {"first_byte_ms": 12.5, "last_byte_ms": 80.0}
    sqlite_ledger.append(batch([event(0, b"{}"), event(1, b"{}", **answer, **timing)]))
    out = io.BytesIO()
    export(sqlite_ledger, "har", plan(sqlite_ledger, Selection(), "har"), out)
    (entry,) = json.loads(out.getvalue())["log"]["entries"]
    assert {k: entry["_flightlog"].get(k) for k in (*answer, *timing)} == answer | timing
    jsonschema.validate(json.loads(out.getvalue()), SCHEMA)
