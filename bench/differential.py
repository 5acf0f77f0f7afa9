"""The differential suite's long form: many generated odd-but-legal heads through plain mitmdump
and through flightlog, compared byte for byte (what the upstream received, what the client got).

Run as `python -m bench.differential [--examples N] [--seed S]`. Prints how many generated shapes
were tried and how many were equal; every difference is printed in full. The fast subset (15
examples and the fixed shapes) runs in `make test` (tests/capture/test_differential.py).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, seed, settings

from tests.capture.differential_shapes import big_shapes, curl_shapes, h1_shapes, h2_shapes
from tests.capture.test_differential import odd_heads
from tests.support.differential import Shape, compare, plain_mitmdump, run
from tests.support.proxy import live_proxy
from tests.support.wire_upstream import h1_upstream, h2_upstream


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.differential")
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="flightlog-differential-"))
    tried, equal, different = 0, 0, []
    with h1_upstream() as h1, h1_upstream(base) as h1s, h2_upstream(base) as h2:
        assert h1s.cert is not None
        ups = {"h1": h1, "h1s": h1s, "h2": h2}
        extra = ["--set", f"ssl_verify_upstream_trusted_ca={h1s.cert}"]
        with (
            plain_mitmdump(base / "mitmdump", h1s.cert) as port,
            live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=extra) as proxy,
        ):
            oracle_ca = base / "mitmdump" / "mitmproxy-ca-cert.pem"

            def check(shape: Shape) -> None:
                nonlocal tried, equal
                tried += 1
                problems = compare(run(shape, port, ups, oracle_ca), run(shape, proxy.port, ups, proxy.ca))
                if problems:
                    different.append((shape, problems))
                else:
                    equal += 1

            fixed = [*h1_shapes("h1"), *h1_shapes("h1s"), *h2_shapes("h1s"), *h2_shapes("h2")]
            for shape in [*fixed, *big_shapes("h1"), *curl_shapes("h1s"), *curl_shapes("h2")]:
                check(shape)

            @seed(args.seed)
            @settings(max_examples=args.examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))  # fmt: skip
            @given(shape=odd_heads())
            def generated(shape: Shape) -> None:
                check(shape)

            generated()
    for shape, problems in different:
        print(f"DIFFERENT {shape.name}: {shape.raw[:300]!r}")
        for problem in problems:
            print("   ", problem)
    print(f"differential: {tried} shapes tried, {equal} equal to plain mitmdump, {len(different)} different")


if __name__ == "__main__":
    main()
