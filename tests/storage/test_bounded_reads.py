"""`ledger blob` and `ledger verify` stream payloads: a payload far larger than the memory they use.

Measured as a user runs them (a real `flightlog` process), its peak RSS from `os.wait4`: a 96 MiB
payload must not grow the peak by more than a third of its size (reading it whole took twice it).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from storage.errors import CorruptPayload
from storage.ledger import open_ledger
from tests.storage.factory import batch, event

MIB = 1 << 20
SIZE = 96 * MIB
GROWTH_LIMIT = SIZE // 3


def peak_rss(home: Path, args: list[str], out: Path) -> tuple[int, int]:
    """Run `flightlog ARGS` with stdout to `out`: (exit status, its peak RSS in bytes)."""
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    with open(out, "wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "flightlog", *args], stdout=sink, env=env)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            proc.returncode = 0  # reaped by wait4; keep Popen from waiting again
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024


def big_ledger(home: Path) -> tuple[str, str, str]:
    """A ledger holding one 96 MiB (incompressible) payload and one tiny one: (big sha, its
    SHA-256 as written, tiny sha)."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    spool = ledger.spool()
    whole = hashlib.sha256()
    for _ in range(SIZE // MIB):
        chunk = os.urandom(MIB)
        whole.update(chunk)
        spool.write(chunk)
    ref = spool.close()
    ledger.append(batch([event(0, payload=ref), event(1, payload=b"tiny")]))  # type: ignore[arg-type]
    tiny = ledger.event("ev-000001").payload_sha256  # type: ignore[union-attr]
    ledger.close()
    assert tiny
    return whole.hexdigest(), whole.hexdigest(), tiny


def test_blob_and_verify_stream_a_large_payload_in_bounded_memory(home: Path, tmp_path: Path) -> None:
    """`ledger blob` writes the exact 96 MiB and `ledger verify` checks it, each peaking less than
    a third of the payload above what the same command needs for a 4-byte payload."""
    sha, written, tiny = big_ledger(home)
    code, base = peak_rss(home, ["ledger", "blob", tiny], tmp_path / "tiny.bin")
    assert code == 0 and (tmp_path / "tiny.bin").read_bytes() == b"tiny"
    code, peak = peak_rss(home, ["ledger", "blob", sha], tmp_path / "big.bin")
    assert code == 0
    got = hashlib.sha256()
    with open(tmp_path / "big.bin", "rb") as f:
        while block := f.read(MIB):
            got.update(block)
    assert got.hexdigest() == written and (tmp_path / "big.bin").stat().st_size == SIZE
    assert peak - base < GROWTH_LIMIT, f"blob peaked {(peak - base) / MIB:.0f} MiB above baseline"
    code, peak = peak_rss(home, ["ledger", "verify"], tmp_path / "verify.txt")
    assert code == 0, (tmp_path / "verify.txt").read_text()
    assert f"checked 2 payloads ({SIZE + 4} bytes)" in (tmp_path / "verify.txt").read_text()
    assert peak - base < GROWTH_LIMIT, f"verify peaked {(peak - base) / MIB:.0f} MiB above baseline"


def test_a_corrupt_large_payload_is_refused_before_any_byte(home: Path, tmp_path: Path) -> None:
    """A stored frame with one flipped bit: `payload_chunks` raises before yielding anything and the
    CLI writes nothing to stdout, one line to stderr, exit 1."""
    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    spool = ledger.spool()
    for i in range(4):
        spool.write(os.urandom(MIB) + bytes([i]))
    ref = spool.close()
    ledger.append(batch([event(0, payload=ref)]))  # type: ignore[arg-type]
    path = next((home / "blobs").glob(f"*/{ref.sha256}.zst"))  # type: ignore[union-attr]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    chunks = ledger.payload_chunks(ref.sha256)  # type: ignore[union-attr]
    try:
        next(chunks)
        raise AssertionError("a corrupt payload yielded bytes")
    except CorruptPayload:
        pass
    ledger.close()
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "flightlog", "ledger", "blob", ref.sha256],  # type: ignore[union-attr]
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode().count("\n") == 1 and b"corrupt" in done.stderr
