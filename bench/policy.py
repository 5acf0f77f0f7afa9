"""The egress policy's cost per request: the judgement alone, and the proxy with 1,000 rules.

Run as `python -m bench.policy [--seconds S] [--rounds R] [--rules N] [--sizes 1024]`.

1. The engine alone (no proxy): microseconds per `Policy.judge` for 0, 10, 100 and N rules over a mix
   of calls (hosts named by exact, `*.domain`, glob and protocol/port rules, hosts no rule names,
   addresses in other spellings, IDN names in Unicode and punycode, paths, agents), the index's
   per-host answers warm as they are in a running proxy; and per call built from the host as a
   client spelled it (made canonical, `formats.hosts`) and judged, as the proxy does.
2. The proxy: `flightlog proxy` in reverse mode in front of nginx (or the asyncio upstream), wrk with
   16 connections, with no policy file and with a policy of N rules (default allow; the requests
   pass every rule that could apply: the rules without a host, which every request meets, are
   checked in full), interleaved round after round. Prints req/s, p99 and the proxy process's CPU
   ms per request for each, and each round's ratio of the policy's to no policy's (median and range:
   the machine's drift between rounds cancels). Goal: within the noise of no policy. Both proxies
   run the choke point (`addons.choke_point`: always on); its own cost per request is printed
   beside the engine's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._needs import Skip, need
from bench._probe import probe_line
from bench._upstream import add_load_options, free_port, start_upstream, stop_upstream, wait_listening
from bench.capture import STATE_FILE, Running, cpu_seconds, stop, wrk
from egress.policy_file import parse_policy
from egress.rules import Call


def rules_toml(count: int) -> str:
    """`count` rules of every kind an operator writes (exact hosts, subdomains, globs, networks,
    paths, per-agent rules, tool rules), none of which refuses the benchmark's requests."""
    out = ['default = "allow"', "retired_hosts = false"]
    kinds = [
        lambda i: f'hosts = ["svc-{i}.example.com"]',
        lambda i: f'hosts = ["*.zone-{i}.example.net"]',
        lambda i: f'hosts = ["api.example.org"]\npaths = ["/v{i}/*"]',
        lambda i: f'hosts = ["api-{i}-*.example.io"]',
        lambda i: f'hosts = ["10.{i % 250}.0.0/16"]',
        lambda i: f'agents = ["agent-{i}"]\nmethods = ["DELETE"]',
        lambda i: f'hosts = ["mcp-{i}.example.com"]\ntools = ["drop_{i}_*"]',
        lambda i: f'protocol = "tcp"\nhosts = ["git-{i}.example.com"]\nport = [22, "2200-2299"]',
    ]
    weights = [380, 250, 150, 80, 20, 50, 40, 30]
    i = 0
    for kind, weight in zip(kinds, weights, strict=True):
        for _ in range(weight * count // 1000 or (1 if count else 0)):
            if i >= count:
                break
            out.append(f'[[rule]]\nname = "r{i}"\naction = "deny"\n{kind(i)}')
            i += 1
    return "\n".join(out) + "\n"


HOSTS = ["svc-3.example.com", "a.zone-9.example.net", "api.example.org", "api-5-eu.example.io",
         "10.7.1.2", "2130706433", "Bücher.example", "xn--bcher-kva.example"]  # fmt: skip
AGENTS = [None, "alpha", "agent-7"]


def _calls() -> list[Call]:
    return [Call("http", h, 443, "GET", f"/x{i}/y", AGENTS[i % 3], "s1") for i, h in enumerate(HOSTS * 4)]


def _built_and_judged(policy: object, calls: int) -> None:
    judge = policy.judge  # type: ignore[attr-defined]
    for i in range(calls):
        judge(Call("http", HOSTS[i % 8], 443, "GET", f"/x{i}/y", AGENTS[i % 3], "s1"))


def engine(counts: list[int], seconds: float = 1.0) -> None:
    calls = _calls()
    print("engine alone: microseconds per judgement (best of repeated passes over 32 calls);")
    print("  then per call built from the host as spelled (made canonical) and judged")
    for count in counts:
        policy = parse_policy(__import__("tomllib").loads(rules_toml(count)), "bench")
        for call in calls:
            policy.judge(call)  # warm the index's per-host answers
        best = float("inf")
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            for call in calls:
                policy.judge(call)
            best = min(best, (time.perf_counter() - start) / len(calls))
        built = float("inf")
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            _built_and_judged(policy, len(calls))
            built = min(built, (time.perf_counter() - start) / len(calls))
        print(
            f"  {count:>5} rules: {best * 1e6:6.2f} us   built and judged {built * 1e6:6.2f} us", flush=True
        )


def choke_point(seconds: float = 1.0) -> None:
    """The choke point's own cost per request, beside the judgement's: the verdict the judge leaves
    (`Egress.grant`: a verdict and a permit) and the checks of `request` and `server_connect`, on
    mitmproxy's own flow objects (best of repeated passes)."""
    from mitmproxy.proxy import server_hooks
    from mitmproxy.test import tflow

    from addons.choke_point import ChokePoint
    from addons.verdicts import META_VERDICT, Verdict, Verdicts

    verdicts = Verdicts()
    point = ChokePoint(verdicts, lambda exchange, decision: None)
    flows = [tflow.tflow() for _ in range(32)]
    hooks = [server_hooks.ServerConnectionHookData(tflow.tserver_conn(), f.client_conn) for f in flows]
    for f in flows:
        f.response = None
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for f, data in zip(flows, hooks, strict=True):
            request = f.request
            f.metadata[META_VERDICT] = Verdict("allow", "r", request.host, request.port)
            verdicts.permit(f.client_conn, request.host, request.port)
            point.request(f)
            verdicts.connection(data.server, Verdict("allow", "r", request.host, request.port))
            point.server_connect(data)
        best = min(best, (time.perf_counter() - start) / len(flows))
    assert all(f.response is None for f in flows), "a judged request was refused"
    print(f"  choke point: verdict, permit and both checks per request {best * 1e6:6.2f} us", flush=True)


def start(config: str, upstream: int, work: Path, rules: int) -> Running:
    port = free_port()
    home = work / f"home-{config}-{time.monotonic_ns()}"
    home.mkdir()
    shutil.copytree(work / "confdir", home / "mitmproxy", dirs_exist_ok=True)
    args = [sys.executable, "-m", "flightlog", "proxy", "--workers", "1", "--listen", "127.0.0.1:0",
            "--no-ai-listeners", "--mode", f"reverse:http://127.0.0.1:{upstream}@{port}"]  # fmt: skip
    if config == "policy":
        policy = home / "egress.toml"
        policy.write_text(rules_toml(rules))
        args += ["--policy", str(policy)]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()} | {"FLIGHTLOG_HOME": str(home)}
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port, proc, "proxy")
    deadline = time.monotonic() + 30
    while not (home / STATE_FILE).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return Running(proc, port, None, [])


def proxies(opts: argparse.Namespace) -> None:
    need("wrk")
    sizes = [int(s) for s in opts.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="flightlog-bench-policy-"))
    upstream = start_upstream(sizes, opts.upstream)
    print(
        f"\nproxy: upstream {upstream.kind}, {opts.rules} rules, {opts.rounds} rounds of {opts.seconds:g} s"
    )
    print(probe_line("before"), flush=True)
    mitmdump = shutil.which("mitmdump", path=str(Path(sys.executable).parent)) or "mitmdump"
    warm = subprocess.Popen([mitmdump, "-q", "--set", f"confdir={work / 'confdir'}", "-p", str(free_port())])
    ca = work / "confdir" / "mitmproxy-ca.pem"
    deadline = time.monotonic() + 60  # the CA is made once, here, for every proxy of the run
    while not ca.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    warm.terminate()
    warm.wait()
    configs = ("none", "policy")
    results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
    try:
        for round_ in range(opts.rounds):
            for size in sizes:
                for config in configs:
                    run = start(config, upstream.port, work, opts.rules)
                    try:
                        wrk(run.port, size, 1.0)
                        before = cpu_seconds(run.proc.pid, writer=False)
                        rps, p99, total = wrk(run.port, size, opts.seconds)
                        cpu = (cpu_seconds(run.proc.pid, writer=False) - before) / total * 1000
                    finally:
                        stop(run)
                    results.setdefault((config, size), []).append((rps, p99, cpu))
                    print(f"round {round_ + 1} {config:7} {size:>7} B: {rps:7.0f} req/s p99 {p99:6.1f} ms "
                          f"cpu {cpu:.3f} ms/req", flush=True)  # fmt: skip
        print("\nconfig   size    req/s   p99ms  cpu-ms/req")
        for size in sizes:
            for config in configs:
                rows = results[(config, size)]
                rps, p99, cpu = (statistics.median(r[k] for r in rows) for k in range(3))
                print(f"{config:7} {size:>6} {rps:8.0f} {p99:7.1f} {cpu:10.3f}")
            pairs = zip(results[("policy", size)], results[("none", size)], strict=True)
            ratios = [(p[0] / n[0], p[2] / n[2]) for p, n in pairs if n[0] and n[2]]
            rps_r, cpu_r = [r[0] for r in ratios], [r[1] for r in ratios]
            print(f"  {opts.rules} rules / none, per round: req/s {statistics.median(rps_r):.3f} "
                  f"[{min(rps_r):.3f}-{max(rps_r):.3f}], cpu/req {statistics.median(cpu_r):.3f} "
                  f"[{min(cpu_r):.3f}-{max(cpu_r):.3f}]")  # fmt: skip
        print(probe_line("after"))
    finally:
        stop_upstream(upstream, work)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.policy", description=__doc__.splitlines()[0])
    add_load_options(parser, 8.0)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--sizes", default="1024")
    parser.add_argument("--engine-only", action="store_true", help="skip the proxy runs")
    opts = parser.parse_args()
    engine(sorted({0, 10, 100, opts.rules}))
    choke_point()
    if not opts.engine_only:
        proxies(opts)


if __name__ == "__main__":
    try:
        main()
    except Skip as e:
        sys.exit(f"bench.policy: {e}")
