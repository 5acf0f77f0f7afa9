"""Faults under load: answered exchanges against recorded ones when the writer, the proxy, or both
are killed with SIGKILL.

Run as `python -m bench.faults [--clients 20] [--seconds 10] [--ledger URL]`. For each scenario a
fresh Ledger (SQLite by default) and a proxy on a fixed port; `--clients` threads send GETs with
unique ids through it for `--seconds`; then:

  writer  kill -9 of the writer process at 1/3 of the run (the proxy restarts it)
  proxy   kill -9 of the proxy at 1/3 (its writer drains what reached the pipe); a new proxy is
          started on the same port and the clients carry on
  both    kill -9 of the writer at 1/3, then of the proxy at 2/3, restarted as above

Prints one line per scenario: answered, recorded, missing (answered, not recorded), doubled
(recorded more than once). Goal: 0 missing, 0 doubled.
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
from pathlib import Path

from tests.capture.test_kill_writer import load, recorded_ids, writer_pid
from tests.support.upstream import upstream


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(home: Path, port: int, ledger: str, blobs: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update({"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger, "FLIGHTLOG_BLOBS": blobs})
    log = (home / f"proxy-{time.monotonic_ns()}.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "proxy", "--workers", "1", "--listen", f"127.0.0.1:{port}"],
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


def scenario(name: str, clients: int, seconds: float, ledger_url: str | None) -> str:
    base = Path(tempfile.mkdtemp(prefix=f"flightlog-faults-{name}-"))
    home = base / "home"
    home.mkdir()
    ledger = ledger_url or f"sqlite:///{base / 'ledger.db'}"
    blobs = (base / "blobs").as_uri()
    port = _free_port()
    answered: list[str] = []
    with upstream() as up:
        proc = _start(home, port, ledger, blobs)
        worker = threading.Thread(
            target=load, args=(f"http://127.0.0.1:{port}", up.base, clients, seconds, answered)
        )
        worker.start()
        time.sleep(seconds / 3)
        if name in ("writer", "both"):
            pid = writer_pid(proc.pid)
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
        if name == "both":
            time.sleep(seconds / 3)
        if name in ("proxy", "both"):
            proc.kill()
            proc.wait()
            time.sleep(1.0)  # the orphaned writer drains what reached its pipe
            proc = _start(home, port, ledger, blobs)
        worker.join()
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
    time.sleep(2)
    recorded = recorded_ids(ledger, blobs)
    missing = sum(1 for rid in answered if rid not in recorded)
    doubled = sum(1 for n in recorded.values() if n > 1)
    counts = f"answered {len(answered):6}  recorded {len(recorded):6}"
    return f"{name:7} {counts}  missing {missing:4}  doubled {doubled:4}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.faults")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--ledger", default=None, help="a Ledger URL (default: a fresh SQLite file each)")
    parser.add_argument("--only", default="writer,proxy,both")
    args = parser.parse_args(argv)
    for name in args.only.split(","):
        print(scenario(name, args.clients, args.seconds, args.ledger), flush=True)


if __name__ == "__main__":
    main()
