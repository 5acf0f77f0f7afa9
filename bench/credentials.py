"""What lending costs a request: the proxy's swap step with and without placeholders to swap.

`python -m bench credentials`: the step `Egress` runs for every allowed request
(`addons.credential_swap.Swaps.swap`) on a real mitmproxy request, interleaved round after round:

- no loans (no run lends anything: the book is stat'ed, nothing else);
- loans held (three lent secrets), the request carries none of them (the scan of head and body);
- a bearer swapped (the placeholder found, the real key put in, the rest scanned), 1 KiB and 100 KiB
  bodies;

each against the same request through the step with no loans, as a ratio, and in microseconds.
"""

from __future__ import annotations

import os
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


def main() -> None:
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
