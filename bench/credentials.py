"""What lending costs a request: the proxy's swap step with and without placeholders to swap.

`python -m bench credentials`: the step `Egress` runs for every allowed request
(`addons.credential_swap.Swaps.swap`) on a real mitmproxy request, interleaved round after round:

- no loans (no run lends anything: the book is stat'ed, nothing else);
- loans held (three lent secrets), the request carries none of them (the scan of head and body);
- a bearer swapped (the placeholder found, the real key put in, the rest scanned), 1 KiB and 100 KiB
  bodies;

each against the same request through the step with no loans, as a ratio, and in microseconds.
Then the whole proxy (`--proxy-only` for just this): `flightlog proxy` (one worker, a reverse
listener in front of a local upstream), sequential GETs from one keep-alive client, round after round
alternating a request with the real key and no loans (nothing to swap) and the same request with a
lent placeholder swapped for it: p50 and p99 per request, and the ratio.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from addons.credential_swap import Swaps
from bench.redact import _body
from egress import loan_book
from recording.identity import EMPTY
from recording.records import Exchange

REAL = {
    "OPENAI_API_KEY": "sk-proj-" + "R" * 48,
    "ANTHROPIC_API_KEY": "sk-ant-api03-" + "A" * 80,
    "GITHUB_TOKEN": "ghp_" + "G" * 36,
}


def _timed(n: int, one: Callable[[], object]) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        one()
        out.append((time.perf_counter() - start) * 1e6)
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def through_proxy(rounds: int = 5, per_round: int = 300) -> None:
    """The proxy's whole latency per request, with and without a swap (module docstring)."""
    import shutil
    import subprocess
    import sys

    import httpx

    from bench._upstream import free_port, start_upstream, wait_listening

    work = Path(tempfile.mkdtemp(prefix="flightlog-bench-credentials-"))
    upstream = start_upstream([1024], kind="asyncio")
    proc = None
    try:
        home = work / "home"
        home.mkdir()
        secrets = work / "secrets.env"
        real = REAL["OPENAI_API_KEY"]
        secrets.write_text(f"OPENAI_API_KEY={real}\nOPENAI_API_KEY.hosts=127.0.0.1:{upstream.port}\n")
        port = free_port()
        args = [sys.executable, "-m", "flightlog", "proxy", "--workers", "1", "--listen", "127.0.0.1:0",
                "--no-ai-listeners", "--mode", f"reverse:http://127.0.0.1:{upstream.port}@{port}",
                "--secrets", str(secrets)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | {
            "FLIGHTLOG_HOME": str(home)
        }
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(port, proc, "proxy")
        loans = loan_book.lend({"OPENAI_API_KEY": "OPENAI_API_KEY"}, REAL)
        got: dict[str, list[float]] = {"no swap": [], "swap": []}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", trust_env=False, timeout=30) as client:
            for _ in range(rounds):
                for case in got:
                    page = loan_book.register(home, "bench", loans) if case == "swap" else None
                    key = loans[0].placeholder if page is not None else real
                    client.get("/1024", headers={"authorization": f"Bearer {key}"}).raise_for_status()
                    for _ in range(per_round):
                        start = time.perf_counter()
                        client.get("/1024", headers={"authorization": f"Bearer {key}"}).raise_for_status()
                        got[case].append((time.perf_counter() - start) * 1e6)
                    if page is not None:
                        loan_book.close(page)
        base = _pct(got["no swap"], 0.5)
        for case, values in got.items():
            print(
                f"through the proxy, {case}: p50 {_pct(values, 0.5):.0f} us, p99 {_pct(values, 0.99):.0f} us,"
                f" {_pct(values, 0.5) / base:.3f}x the request with no swap"
            )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        upstream.stop()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--proxy-only" not in argv:
        step()
    through_proxy()


def step() -> None:
    import random

    from mitmproxy.test import tflow

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        secrets = home / "secrets.env"
        secrets.write_text(
            "".join(f"{n}={v}\n" for n, v in REAL.items()) + "OPENAI_API_KEY.hosts=api.example.com\n"
        )
        os.environ["FLIGHTLOG_HOME"] = str(home)
        opts = SimpleNamespace(flightlog_secrets=str(secrets), flightlog_secret_env=[], flightlog_prices="")
        put: Callable[[object], bool] = lambda record: True  # noqa: E731
        idle, lending = Swaps(put), Swaps(put)  # type: ignore[arg-type]
        idle.configure(opts)
        lending.configure(opts)
        idle.book = loan_book.LoanBook(home / "nobody")
        loans = loan_book.lend({n: n for n in REAL}, REAL)
        loan_book.register(home, "bench", loans)
        placeholder = loans[0].placeholder
        exchange = Exchange("f", "out", "POST", "https://api.example.com/v1", "api.example.com", EMPTY)
        small, large = _body(random.Random(1), [])[:1024], _body(random.Random(2), [])

        def request(bearer: str, body: bytes) -> Callable[[Swaps], object]:
            def one(swaps: Swaps) -> object:
                flow = tflow.tflow()
                flow.request.host, flow.request.port = "api.example.com", 443
                flow.request.headers["authorization"] = f"Bearer {bearer}"
                flow.request.raw_content = body
                start = time.perf_counter()
                swaps.swap(flow, exchange)
                return time.perf_counter() - start

            return one

        cases = {
            "no loans, 1 KiB": (idle, request("sk-anything", small)),
            "loans held, none carried, 1 KiB": (lending, request("sk-anything", small)),
            "bearer swapped, 1 KiB": (lending, request(placeholder, small)),
            "no loans, 100 KiB": (idle, request("sk-anything", large)),
            "loans held, none carried, 100 KiB": (lending, request("sk-anything", large)),
            "bearer swapped, 100 KiB": (lending, request(placeholder, large)),
        }
        got: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(5):  # interleaved: the machine's load falls on every case alike
            for name, (swaps, one) in cases.items():
                got[name] += [one(swaps) * 1e6 for _ in range(400)]  # type: ignore[operator]
        for name, values in got.items():
            base = got["no loans, 1 KiB" if "1 KiB" in name else "no loans, 100 KiB"]
            ratio = _pct(values, 0.5) / _pct(base, 0.5)
            print(
                f"{name}: p50 {_pct(values, 0.5):.1f} us, p99 {_pct(values, 0.99):.1f} us,"
                f" {ratio:.1f}x the step with no loans"
            )


if __name__ == "__main__":
    main()
