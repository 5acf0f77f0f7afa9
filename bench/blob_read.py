"""Peak memory of `flightlog ledger blob` and `ledger verify` on one large payload (default 1 GiB).

Both stream: the payload is decoded and hashed chunk by chunk, so the peak RSS of the command stays
near what it needs for a tiny payload, whatever the size. Measured with `os.wait4` on the real
command; the payload is incompressible (random) so the stored frame is as large as the payload.

    python -m bench.blob_read [--mib N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from storage.events import Batch, Event
from storage.ledger import open_ledger

MIB = 1 << 20


def _ledger(home: Path, mib: int) -> tuple[str, str]:
    """A ledger in `home` holding one `mib` MiB payload and one tiny one: their addresses."""
    from datetime import UTC, datetime

    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    spool = ledger.spool(home)
    for _ in range(mib):
        spool.write(os.urandom(MIB))
    ref = spool.close()
    at = datetime.now(UTC)
    events = (
        Event("big", "a", "http.response", "in", at, payload=ref, payload_state="complete"),
        Event("tiny", "a", "http.request", "in", at, payload=b"tiny", payload_state="complete"),
    )
    ledger.append(Batch("bench", 1, events))
    big, tiny = ledger.event("big"), ledger.event("tiny")
    ledger.close()
    assert big and tiny and big.payload_sha256 and tiny.payload_sha256
    return big.payload_sha256, tiny.payload_sha256


def _peak(home: Path, args: list[str]) -> tuple[int, float, float]:
    """(exit code, peak RSS in MiB, seconds) of `flightlog ARGS`, stdout discarded."""
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "flightlog", *args], stdout=sink, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, time.perf_counter() - start


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.blob_read")
    parser.add_argument("--mib", type=int, default=1024, help="payload size in MiB")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="flightlog-bench-blob-"))
    try:
        print(f"storing one {args.mib} MiB payload ...", flush=True)
        big, tiny = _ledger(home, args.mib)
        for label, command in (
            ("ledger blob (4 bytes)", ["ledger", "blob", tiny]),
            (f"ledger blob ({args.mib} MiB)", ["ledger", "blob", big]),
            ("ledger verify", ["ledger", "verify"]),
        ):
            code, peak, seconds = _peak(home, command)
            print(f"{label:26s} exit {code}  peak RSS {peak:7,.0f} MiB  {seconds:6.1f} s")
        print("goal: peak RSS bounded (near the 4-byte case), not growing with the payload")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
