"""Checkpoints kept by witnesses: a file, an S3 bucket with Object Lock (moto's server mode), an HTTP
endpoint; published by hand (`ledger checkpoint`) and by the writer process at stop; `ledger verify
--witness` checks every checkpoint is a prefix of the Ledger and names the unwitnessed tail."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import boto3
import pytest

from recording.events import Processing
from recording.writer.process import WriterProcess, WriterSpec
from storage.chain.signing import LedgerKeys
from storage.chain.verify import verify
from storage.ledger import Ledger, open_ledger
from storage.witness.publisher import checkpoint_of, publish
from storage.witness.stores import WitnessUnavailable, open_witness
from tests.capture.test_writer_process import request, response
from tests.storage.factory import batch, event
from tests.storage.tamper import Tamperer


def record(ledger: Ledger, start: int, batches: int) -> None:
    for b in range(start, start + batches):
        ledger.append(batch([event(2 * b), event(2 * b + 1)], position=b + 1))


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {n: v for n, v in os.environ.items() if not n.startswith("FLIGHTLOG_")}
    env["FLIGHTLOG_HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "ledger", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_a_file_witness_finds_a_removed_tail_and_names_what_came_after(
    ledger_url: str, tmp_path: Path
) -> None:
    """`ledger checkpoint` publishes and prints a signed checkpoint; verify against the witness is ok
    while the Ledger grows (the growth named as unwitnessed tail), and not ok once a witnessed batch
    is removed, even though the chain left behind is consistent."""
    home, blobs = tmp_path / "home", (tmp_path / "blobs").as_uri()
    witness = (tmp_path / "elsewhere" / "checkpoints.jsonl").as_uri()
    ledger = open_ledger(ledger_url, blobs, keys=LedgerKeys(home))
    record(ledger, 0, 3)
    done = cli(home, "checkpoint", "--witness", witness, "--ledger", ledger_url, "--blobs", blobs)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["checkpoint"]["heads"]["test"][0] == 3 and printed["checkpoint"]["events"] == 6
    record(ledger, 3, 1)
    done = cli(home, "verify", "--witness", witness, "--ledger", ledger_url, "--blobs", blobs)
    assert done.returncode == 0, done.stdout
    assert "unwitnessed: test batches #4-#4 (2 events" in done.stdout
    Tamperer(ledger_url).run(
        "DELETE FROM events WHERE event_id IN ('ev-000004', 'ev-000005', 'ev-000006', 'ev-000007');"
        " DELETE FROM batches WHERE chain_index >= 3; UPDATE positions SET position = 2",
        drop=("events_no_delete", "batches_no_delete", "batches_no_update"),
    )
    assert cli(home, "verify", "--ledger", ledger_url, "--blobs", blobs).returncode == 0  # beyond, alone
    done = cli(home, "verify", "--witness", witness, "--ledger", ledger_url, "--blobs", blobs)
    assert done.returncode == 1
    assert "truncated: the checkpoint of" in done.stdout and "witnessed test at #3" in done.stdout
    ledger.close()


def test_an_s3_witness_keeps_checkpoints_under_object_lock(s3_endpoint: str, tmp_path: Path) -> None:
    """Each checkpoint is one object under COMPLIANCE retention: its deletion is refused; verify reads
    them back. A bucket made without Object Lock refuses the checkpoint, in one line."""
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="witness", ObjectLockEnabledForBucket=True)
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", keys=LedgerKeys(tmp_path / "home"))
    record(ledger, 0, 2)
    url = f"s3://witness/ledger-a?endpoint={s3_endpoint}&retain_days=1"
    (place,) = publish(checkpoint_of(ledger), [url])
    key = place.removeprefix("s3://witness/")
    version = client.head_object(Bucket="witness", Key=key)["VersionId"]
    with pytest.raises(client.exceptions.ClientError, match="AccessDenied"):
        client.delete_object(Bucket="witness", Key=key, VersionId=version)
    record(ledger, 2, 1)
    report = verify(ledger, witnesses=[url])
    assert report.ok and report.witness is not None and report.witness.checkpoints == 1
    assert [(t.collector, t.first, t.last) for t in report.witness.tails] == [("test", 3, 3)]
    with pytest.raises(WitnessUnavailable, match="Object Lock"):
        open_witness(f"s3://ledger/x?endpoint={s3_endpoint}").publish(checkpoint_of(ledger))
    ledger.close()


class Kept(BaseHTTPRequestHandler):
    """A witness service as an operator might run elsewhere: POST keeps a line, GET gives them all."""

    lines: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        self.lines.append(self.rfile.read(int(self.headers["content-length"])))
        self.send_response(201)
        self.end_headers()

    def do_GET(self) -> None:
        body = b"\n".join(self.lines)
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_witness() -> Iterator[str]:
    Kept.lines = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Kept)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/checkpoints"
    server.shutdown()
    server.server_close()


def test_the_writer_publishes_at_stop_to_an_http_witness(
    ledger_url: str, tmp_path: Path, http_witness: str
) -> None:
    """The writer process, given a witness, publishes a checkpoint signed with its collector's key
    when it stops: verify against the witness is ok with no unwitnessed tail. Rewriting a witnessed
    row and re-signing with the collector's key (a key holder) is then found."""
    blobs = (tmp_path / "blobs").as_uri()

    async def main() -> None:
        spec = WriterSpec(ledger_url, blobs, "wp", witnesses=(http_witness,), checkpoint_interval=3600)
        writer = WriterProcess(
            spec, Processing(), lambda retry: open_ledger(ledger_url, blobs, retry_seconds=retry)
        )
        await writer.start()
        for n in range(20):
            writer.put(request(n, b'{"n": %d}' % n))
            writer.put(response(n))
        await writer.stop(timeout=20)

    asyncio.run(main())
    assert len(Kept.lines) == 1 and json.loads(Kept.lines[0])["checkpoint"]["signer"] == "wp"
    ledger = open_ledger(ledger_url, blobs)
    report = verify(ledger, witnesses=[http_witness])
    assert report.ok and report.witness is not None and not report.witness.tails, report.chain.problems
    from tests.storage.tamper import rechain, signing_key

    tamper = Tamperer(ledger_url)
    tamper.run(
        "UPDATE events SET status = 201 WHERE event_id LIKE '%:response' AND seq = 2",
        drop=("events_no_update",),
    )
    rechain(ledger, tamper, "wp", 1, sign_with=signing_key(ledger, "wp"))
    report = verify(ledger, witnesses=[http_witness])
    assert report.chain.ok and report.witness is not None
    assert any("rewritten since" in line for line in report.witness.problems), report.witness.problems
    ledger.close()
