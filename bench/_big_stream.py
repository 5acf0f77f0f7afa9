"""`bench.faults`'s `stream` scenario: 1 GiB answers through a one-worker proxy, beside plain mitmdump.

Each run downloads one answer of `--stream-mib` MiB (default 1024) through `flightlog proxy
--workers 1` and then through plain mitmdump, timing the client from request to last byte. Once the
proxy stopped (drained), the Ledger says how many answers were stored `complete` and how many
`partial`, and how many `capture.overflow` events (drops at a full queue) there were. Printed: those
counts, each client time and the ratio flightlog / mitmdump. Goal: every answer complete, no
overflow (the writer's backpressure slows the reads instead, `recording.writer.pacing`).
"""

from __future__ import annotations

import signal
import tempfile
import time
from pathlib import Path

import certifi
import httpx

from tests.support.big_stream import big_stream
from tests.support.differential import plain_mitmdump


def _download(proxy: str, url: str) -> tuple[float, int]:
    """(seconds from request to last byte, bytes received) for one GET through `proxy`."""
    started = time.perf_counter()
    got = 0
    with (
        httpx.Client(proxy=proxy, trust_env=False, timeout=600) as client,
        client.stream("GET", url) as answer,
    ):
        for chunk in answer.iter_raw(1024 * 1024):
            got += len(chunk)
    return time.perf_counter() - started, got


def _states(ledger: str, blobs: str) -> tuple[int, int, int]:
    """(complete, partial, capture.overflow events) in the Ledger."""
    from sqlalchemy import text

    from tests.capture.ledger_view import ledger_of

    book = ledger_of(ledger, blobs)
    with book.engine.connect() as c:
        rows = c.execute(text("SELECT kind, payload_state FROM events")).all()
    book.close()
    answers = [state for kind, state in rows if kind == "http.response"]
    overflow = sum(1 for kind, _ in rows if kind == "capture.overflow")
    return answers.count("complete"), answers.count("partial"), overflow


def stream_scenario(runs: int, mib: int, start_proxy: object, free_port: object) -> list[str]:
    """The scenario's lines (a table), `runs` answers of `mib` MiB each way."""
    size = mib * 1024 * 1024
    base = Path(tempfile.mkdtemp(prefix="flightlog-faults-stream-"))
    home = base / "home"
    home.mkdir()
    ledger, blobs = f"sqlite:///{base / 'ledger.db'}", (base / "blobs").as_uri()
    ours: list[tuple[float, int]] = []
    plain: list[tuple[float, int]] = []
    with big_stream() as up:
        url = f"{up.base}/{size}"
        port = free_port()  # type: ignore[operator]
        proc = start_proxy(home, port, ledger, blobs, 1)  # type: ignore[operator]
        try:
            for _ in range(runs):
                ours.append(_download(f"http://127.0.0.1:{port}", url))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(600)
        with plain_mitmdump(base / "mitmdump", Path(certifi.where())) as plain_port:
            for _ in range(runs):
                plain.append(_download(f"http://127.0.0.1:{plain_port}", url))
    complete, partial, overflow = _states(ledger, blobs)
    whole = sum(1 for _, got in ours if got == size)
    lines = [
        f"{runs} answers of {mib} MiB through `flightlog proxy --workers 1` and plain mitmdump:",
        "| run | flightlog s | mitmdump s | ratio |",
        "|---|---|---|---|",
    ]
    for n, ((t_ours, _), (t_plain, _)) in enumerate(zip(ours, plain, strict=True), 1):
        lines.append(f"| {n} | {t_ours:.1f} | {t_plain:.1f} | {t_ours / t_plain:.2f} |")
    total_ours, total_plain = sum(t for t, _ in ours), sum(t for t, _ in plain)
    lines.append(f"| all | {total_ours:.1f} | {total_plain:.1f} | {total_ours / total_plain:.2f} |")
    lines.append(
        f"clients got every byte: {whole} of {runs}; stored complete: {complete}, partial: {partial}; "
        f"capture.overflow events: {overflow}"
    )
    return lines
