"""Faults under load: answered exchanges against recorded ones when the proxy is stopped (SIGTERM)
or a part of it is killed (SIGKILL).

Run as `python -m bench.faults [--clients 20] [--seconds 10] [--workers 2] [--ledger URL]`. For each
scenario a fresh Ledger (SQLite by default) and a proxy of `--workers` workers on a fixed port;
`--clients` threads send GETs with unique ids through it for `--seconds`; then:

  sigterm     SIGTERM to the proxy at 1/3 (it drains); a new proxy is started on the same port
  supervisor  kill -9 of the `flightlog proxy` process at 1/3 (with workers, they stop and drain;
              alone, its writer drains what reached the pipe); restarted as above
  worker      kill -9 of one worker at 1/3 (the supervisor starts it again; needs --workers > 1)
  writer      kill -9 of one writer process at 1/3 (its proxy restarts it)
  both        kill -9 of a writer at 1/3, then of the proxy at 2/3, restarted as above
  postgres  the Ledger is a private PostgreSQL cluster (bench/_fault_env.py, never the shared one),
          stopped (fast shutdown: connections cut) at 1/3 and started again 2 s later
  disk    the SQLite Ledger and its blobs live on a small tmpfs, filled to the last byte at 1/3
          and emptied at 2/3
  stream  not a fault but the writer falling behind: `--stream-runs` answers of `--stream-mib` MiB
          (default 3 of 1 GiB) through a one-worker proxy and through plain mitmdump; prints how
          many were stored complete and partial, the capture.overflow events, and the client
          times side by side with their ratio (`bench._big_stream`)

Prints a table: answered, recorded, missing (answered, not recorded), said (of those missing, how
many a `capture.lost` event names: what a killed proxy could not record is counted, not silent),
doubled (recorded more than once), and the one line each outage made the proxy log. Goal: 0 missing
(or every missing one said), 0 doubled.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench._fault_env import PrivatePostgres, SmallDisk, private_postgres, small_disk
from bench._needs import Skip
from tests.capture.test_kill_writer import load, recorded_ids, writer_pid
from tests.support.upstream import upstream


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int, name: str) -> list[int]:
    """The pids of `pid`'s children whose process name starts with `name` (cut to 15 characters)."""
    out = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(line.split()[0]) for line in out.stdout.splitlines() if line.split()[1].startswith(name[:15])]


def _gone(pids: list[int], timeout: float = 60.0) -> None:
    """Wait until the processes `pids` have exited (workers draining after their supervisor died)."""
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                    break
            except (ProcessLookupError, OSError):
                break
            time.sleep(0.05)


def _start(home: Path, port: int, ledger: str, blobs: str, workers: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update({"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger, "FLIGHTLOG_BLOBS": blobs})
    log = (home / f"proxy-{time.monotonic_ns()}.log").open("wb")
    proc = subprocess.Popen(  # no model API listeners: port + 1 and + 2 of a bind(0) port may be taken
        [sys.executable, "-m", "flightlog", "proxy", "--workers", str(workers), "--listen",
         f"127.0.0.1:{port}", "--no-ai-listeners"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if json.loads((home / "proxy.json").read_text()).get("pid") == proc.pid:
                return proc
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise SystemExit("the proxy did not start")


@contextmanager
def _ledger_for(name: str, base: Path, given: str | None) -> Iterator[tuple[str, str, object]]:
    """(ledger URL, blobs URL, the thing the scenario breaks) for one scenario."""
    if name == "postgres":
        with private_postgres() as pg:
            yield pg.url, (base / "blobs").as_uri(), pg
    elif name == "disk":
        with small_disk("48m") as disk:
            yield f"sqlite:///{disk.path / 'ledger.db'}", (disk.path / "blobs").as_uri(), disk
    else:
        yield given or f"sqlite:///{base / 'ledger.db'}", (base / "blobs").as_uri(), None


def _break(name: str, proc: subprocess.Popen[bytes], target: object, third: float) -> None:
    """The fault, from 1/3 of the run (the writer and proxy kills restart nothing themselves)."""
    workers = _children(proc.pid, "flightlog-worker")
    if name in ("writer", "both"):
        pid = writer_pid(workers[0] if workers else proc.pid)
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
    elif name == "worker":
        if not workers:
            raise Skip("the worker scenario needs --workers 2 or more")
        os.kill(workers[0], signal.SIGKILL)
    elif isinstance(target, PrivatePostgres):
        target.stop()
        time.sleep(2.0)
        target.start()
    elif isinstance(target, SmallDisk):
        target.fill()
        time.sleep(third)
        target.free()
    if name == "both":
        time.sleep(third)


def _outage_lines(home: Path) -> list[str]:
    """What the proxies said about the Ledger going and coming back."""
    lines = []
    for log in sorted(home.glob("proxy-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if any(said in line for said in ("ledger unavailable", "ledger is back", "not recorded")):
                lines.append(line.strip()[:220])
    return lines


def _said(ledger_url: str, blobs_url: str) -> int:
    """How many answered exchanges the Ledger's `capture.lost` events name."""
    from sqlalchemy import text

    from tests.capture.ledger_view import ledger_of

    ledger = ledger_of(ledger_url, blobs_url)
    with ledger.engine.connect() as c:
        errors = [r[0] for r in c.execute(text("SELECT error FROM events WHERE kind = 'capture.lost'"))]
    ledger.close()
    return sum(int(e.split(" ", 1)[0]) for e in errors if e and e.split(" ", 1)[0].isdigit())


def scenario(
    name: str, clients: int, seconds: float, ledger_url: str | None, workers: int
) -> tuple[str, list[str]]:
    """One scenario's table row and the proxy's outage lines."""
    base = Path(tempfile.mkdtemp(prefix=f"flightlog-faults-{name}-"))
    home = base / "home"
    home.mkdir()
    port = _free_port()
    answered: list[str] = []
    tag = f"{name}-{uuid.uuid4().hex[:8]}-"  # a Ledger given with --ledger holds earlier runs' ids too
    with ExitStack() as stack:
        ledger, blobs, target = stack.enter_context(_ledger_for(name, base, ledger_url))
        up = stack.enter_context(upstream())
        proc = _start(home, port, ledger, blobs, workers)
        worker = threading.Thread(
            target=load, args=(f"http://127.0.0.1:{port}", up.base, clients, seconds, answered, tag)
        )
        worker.start()
        time.sleep(seconds / 3)
        _break(name, proc, target, seconds / 3)
        if name in ("supervisor", "both", "sigterm"):
            held = _children(proc.pid, "flightlog-worker")  # they hold the port until they drained
            proc.send_signal(signal.SIGTERM if name == "sigterm" else signal.SIGKILL)
            proc.wait(120)
            _gone(held)
            time.sleep(1.0)  # an orphaned writer drains what reached its pipe
            proc = _start(home, port, ledger, blobs, workers)
        worker.join()
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        time.sleep(2)
        recorded = {rid: n for rid, n in recorded_ids(ledger, blobs).items() if rid.startswith(tag)}
        said = _said(ledger, blobs)
    missing = sum(1 for rid in answered if rid not in recorded)
    doubled = sum(1 for n in recorded.values() if n > 1)
    row = f"| {name} | {len(answered)} | {len(recorded)} | {missing} | {said} | {doubled} |"
    return row, _outage_lines(home)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.faults")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ledger", default=None, help="a Ledger URL (default: a fresh SQLite file each)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", default="sigterm,supervisor,worker,writer,both,postgres,disk,stream")
    parser.add_argument("--stream-runs", type=int, default=3)
    parser.add_argument("--stream-mib", type=int, default=1024)
    args = parser.parse_args(argv)
    names = args.only.split(",")
    if "stream" in names:
        from bench._big_stream import stream_scenario

        print("\n".join(stream_scenario(args.stream_runs, args.stream_mib, _start, _free_port)), flush=True)
        names.remove("stream")
    if not names:
        return
    print(f"{args.workers} workers, {args.clients} clients, {args.seconds:g} s a scenario")
    print("| fault | answered | recorded | missing | said | doubled |\n|---|---|---|---|---|---|", flush=True)
    said: list[str] = []
    for name in names:
        try:
            row, lines = scenario(name, args.clients, args.seconds, args.ledger, args.workers)
        except Skip as e:
            print(f"| {name} | skipped: {e} | | | | |", flush=True)
            continue
        print(row, flush=True)
        said += [f"{name}: {line}" for line in lines]
    if said:
        print("\nwhat the proxy said:", *said, sep="\n  ")


if __name__ == "__main__":
    main()
