"""What each path adds to a stream: first byte and per-event delay, direct, through plain mitmdump,
and through flightlog, for every door an agent's request can take.

A slow event stream (5 events 100 ms apart, tests/support/wire_upstream.py's `/sse-slow`) is read by
each door of tests/support/paths.py (forward HTTP, CONNECT+TLS, HTTP/2, reverse, a model listener,
and that listener through the forward listener), straight from its upstream, through plain mitmdump
streaming what flightlog streams (tests/support/stream_oracle.py), and through `flightlog proxy`,
in interleaved rounds. Printed per door: the median first byte (ms after the request went) of each,
and the median time each later event arrived after the direct one did (the per-event delay a proxy
adds). Timing figures on a shared machine are noisy: compare the columns of one run.

    python -m bench.paths [--rounds 7]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
from pathlib import Path

from tests.support.differential import plain_mitmdump
from tests.support.paths import DOORS, Proxy, Upstreams, direct, visit
from tests.support.proxy import live_proxy
from tests.support.wire_upstream import h1_upstream, h2_upstream

ORACLE = Path(__file__).parents[1] / "tests" / "support" / "stream_oracle.py"
ROW = "{:14} {:>9} {:>9} {:>9}   {:>9} {:>9}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ms(value: float) -> str:
    return f"{value * 1000:.1f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.paths")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="flightlog-paths-"))
    with h1_upstream() as h1, h1_upstream(base) as h1s, h2_upstream(base) as h2, socket.socket() as down:
        down.bind(("127.0.0.1", 0))
        ups = Upstreams(h1.port, h1s.port, h2.port, down.getsockname()[1])
        cert = base / "upstream-cert.pem"
        to_h1, to_down = f"http://127.0.0.1:{ups.h1}", f"http://127.0.0.1:{ups.down}"
        rev, rev_down = _free_port(), _free_port()
        modes = [
            "--mode",
            "regular",
            "--mode",
            f"reverse:{to_h1}@{rev}",
            "--mode",
            f"reverse:{to_down}@{rev_down}",
        ]
        flags = [
            "--mode", f"reverse:{to_h1}@0", "--mode", f"reverse:{to_down}@0",
            "--ai-upstream", f"openai={to_h1}", "--ai-upstream", f"anthropic={to_down}",
            "--set", f"ssl_verify_upstream_trusted_ca={cert}",
        ]  # fmt: skip
        with (
            plain_mitmdump(base / "mitmdump", cert, *modes, "-s", str(ORACLE)) as forward,
            live_proxy(base / "home", f"sqlite:///{base / 'ledger.db'}", args=flags) as proxy,
        ):
            ours = Proxy(
                proxy.port,
                proxy.reverse_port(f"127.0.0.1:{ups.h1}"),
                proxy.reverse_port(f"127.0.0.1:{ups.down}"),
                proxy.ca,
                proxy.ai_port("openai"),
                proxy.ai_port("anthropic"),
            )
            oracle = Proxy(forward, rev, rev_down, base / "mitmdump" / "mitmproxy-ca-cert.pem")
            print("first byte (ms, median) and delay per event vs direct (ms, median), 5 events 100 ms apart")
            print(ROW.format("door", "direct", "mitmdump", "flightlog", "+mitmdump", "+flightlog"))
            for door in DOORS:
                firsts: dict[str, list[float]] = {"direct": [], "mitmdump": [], "flightlog": []}
                added: dict[str, list[float]] = {"mitmdump": [], "flightlog": []}
                for n in range(args.rounds):
                    path = f"/sse-slow?shape=bench-{door}-{n}"
                    seen = {
                        "direct": direct(door, path, ups, cert),
                        "mitmdump": visit(door, path, oracle, ups),
                        "flightlog": visit(
                            door, path, ours, ups, session=f"bench{n}" if "model" in door else ""
                        ),
                    }
                    base_events = seen["direct"].events
                    for name, got in seen.items():
                        if got.first_byte is not None:
                            firsts[name].append(got.first_byte)
                        if name != "direct":
                            pairs = list(zip(got.events, base_events, strict=False))
                            if pairs:
                                added[name].append(statistics.mean(a - b for a, b in pairs))
                print(
                    ROW.format(
                        door,
                        *(_ms(statistics.median(firsts[k])) if firsts[k] else "-" for k in firsts),
                        *(_ms(statistics.median(added[k])) if added[k] else "-" for k in added),
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
