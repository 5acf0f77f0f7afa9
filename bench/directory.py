"""The Directory at the seed's scale: a generated 25,000-row folder, opened, resolved and served.

Figures (goals from issue 4 in brackets):
  resolver p50 / p99 over a mix of exact, prefix, word, alias, typo, sound-alike, framed and
  no-match queries  [p50 <= 5 ms, p99 <= 20 ms]
  index rebuild (every section) and one section after a write; no-change load  [<= 100 ms]
  names-only manifest against the full one (bytes, tokens at bytes/4, and real o200k_base tokens
  when `bpe-openai` is installed: `pip install bpe-openai`, its tables ship in the wheel)
  MCP server start to first tools/list answer  [<= 1 s]
  tokens of the MCP tool definitions  [four read verbs below 1,122]

    python -m bench.directory [--rows 25000] [--ledger URL] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from catalog.agent_api import AgentApi
from catalog.directory import Directory, open_directory
from catalog.folder import scan
from storage.documents import open_document_store
from storage.engine import make_engine

SERVICES = (
    "imsg imessage slack gmail calendar stripe github jira notion linear figma drive dropbox zoom twilio "
    "shopify hubspot salesforce zendesk asana trello airtable sentry datadog pagerduty openai anthropic "
    "weather maps spotify youtube reddit discord telegram whatsapp mailchimp sendgrid quickbooks xero"
).split()
VERBS = (
    "get list send create update delete search read sync export import archive fetch post run check".split()
)
OBJECTS = (
    "message contact invoice customer order event issue page file folder meeting report payment "
    "subscription ticket channel thread user team project task comment label note summary"
).split()
FILLER = (
    "the agent calls this when it needs to with a scoped token and records the exchange in the ledger "
    "arguments are validated against the schema secrets are named never written answers are json"
).split()
BUNDLES = {"tool": 0.34, "article": 0.36, "flow": 0.16, "credential": 0.07, "task": 0.07}
QUERIES = {
    "name": ["SLACK_SEND_MESSAGE_17", "stripe_list_invoice_3", "GITHUB_CREATE_ISSUE_8"],
    "prefix": ["SLACK_SEND", "stripe_li", "github_create_iss"],
    "words": ["send message slack", "invoice stripe list", "create issue github"],
    "alias": ["imessage", "text my team", "payments"],
    "text": ["scoped token ledger", "customer subscription report"],
    "framed": ["how do I send a slack message", "where is my stripe invoice", "what is the weather"],
    "typo": ["slakc send mesage", "stirpe invoce", "githbu isue"],
    "sound": ["tiktok", "slaq"],
    "none": ["zzqxv", "quantum entanglement sandwich"],
}


def generate(root: Path, rows: int, seed: int = 11) -> int:
    """A Directory folder of `rows` documents across five bundles, with an alias table."""
    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    counts = {b: int(rows * share) for b, share in BUNDLES.items()}
    counts["tool"] += rows - sum(counts.values())
    written = 0
    for bundle, n in counts.items():
        (root / bundle).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            service, verb, obj = rng.choice(SERVICES), rng.choice(VERBS), rng.choice(OBJECTS)
            name = (
                f"{service}_{verb}_{obj}_{i}".upper() if bundle == "tool" else f"{service} {obj} {bundle} {i}"
            )
            sentence = " ".join(rng.choice(FILLER) for _ in range(rng.randint(8, 20)))
            desc = f"{verb.capitalize()} a {service} {obj}: {sentence}."
            body = "\n\n".join(
                " ".join(rng.choice(FILLER + OBJECTS) for _ in range(rng.randint(30, 90))) for _ in range(3)
            )
            links = (
                f"[[{rng.choice(SERVICES)}_{rng.choice(VERBS)}_{rng.choice(OBJECTS)}_{rng.randint(0, 50)}]]"
            )
            front = f"---\nname: {name}\ndescription: {json.dumps(desc)}\nstatus: live\n---\n"
            text = f"{front}# {name}\n\n{body}\n\n## Usage\n\nSee {links}.\n"
            (root / bundle / f"{name.lower().replace(' ', '_')}.md").write_text(text)
            written += 1
    aliases = {s: [f"{s.upper()}_*"] for s in SERVICES}
    aliases.update({"text": ["IMSG_SEND_*", "TWILIO_SEND_*"], "payments": ["STRIPE_*", "QUICKBOOKS_*"]})
    (root / "aliases.toml").write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in aliases.items()))
    return written


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def drop_index(url: str) -> None:
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM directory_index"))
    engine.dispose()


def store_open(url: str, folder: Path) -> None:
    """Open the folder's Directory from the store alone (no folder check): the server's path."""
    d = Directory(open_document_store(url, f"folder:{folder.resolve()}"), owns_engine=True)
    d.refresh()
    d.close()


def resolver_figures(d: Directory, rounds: int) -> dict[str, Any]:
    first_ms, _ = timed(lambda: d.find("warm up the lazy lookups", k=10))
    samples: list[float] = []
    per_layer: dict[str, list[float]] = {}
    for _ in range(rounds):
        for layer, queries in QUERIES.items():
            for q in queries:
                ms, _ = timed(lambda q=q: d.find(q, k=10))
                samples.append(ms)
                per_layer.setdefault(layer, []).append(ms)
    return {
        "first_query_ms": first_ms,
        "p50_ms": statistics.median(samples),
        "p99_ms": pct(samples, 99),
        "by_kind_p50_ms": {k: round(statistics.median(v), 2) for k, v in per_layer.items()},
        "queries": len(samples),
    }


def mcp_figures(folder: Path, home: Path, runs: int) -> dict[str, Any]:
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}

    async def once(extra: list[str]) -> tuple[float, list[dict[str, Any]]]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "flightlog", "mcp", "--directory", str(folder), *extra],
            env=env,
        )
        start = time.perf_counter()
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            listed = await s.list_tools()
            elapsed = (time.perf_counter() - start) * 1000
        return elapsed, [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]

    starts = []
    tools: list[dict[str, Any]] = []
    for _ in range(runs):
        ms, tools = anyio.run(once, [])
        starts.append(ms)
    _, nine = anyio.run(once, ["--database-tools"])

    def cost(defs: list[dict[str, Any]]) -> dict[str, int]:
        size = len(json.dumps(defs).encode())
        return {"bytes": size, "tokens": size // 4}

    return {
        "start_to_tools_list_ms": statistics.median(starts),
        "runs_ms": [round(x) for x in starts],
        "four_read_verbs": cost(tools[:4]),
        "six_default": cost(tools),
        "nine_with_database_tools": cost(nine),
    }


def measured_tokens(full: str, names: str) -> str:
    """Both projections in real tokens (o200k_base, from the `bpe-openai` package, whose BPE tables
    ship inside the wheel: no download), or a line saying they were not measured."""
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        return "not measured (pip install bpe-openai; the figures above are bytes/4)"
    enc = bpe_openai.get_encoding("o200k_base")

    def count(text: str) -> int:  # the package refuses very long inputs: encode 500 lines at a time,
        lines = text.splitlines(keepends=True)  # cut after a newline (pre-tokenization splits there too)
        return sum(len(enc.encode("".join(lines[i : i + 500]))) for i in range(0, len(lines), 500))

    f, n = count(full), count(names)
    return f"{f:,} / {n:,} o200k_base tokens: names-only smaller by {f / n:.1f}x in tokens"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.directory", description=__doc__)
    parser.add_argument("--rows", type=int, default=25_000)
    parser.add_argument("--ledger", help="a ledger URL (default: a fresh SQLite file)")
    parser.add_argument("--rounds", type=int, default=20, help="passes over the query mix")
    parser.add_argument("--mcp-runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep the generated folder and ledger here")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="flightlog-bench-directory-"))
    work.mkdir(parents=True, exist_ok=True)
    folder, home = work / "directory", work / "home"
    shutil.rmtree(home, ignore_errors=True)
    url = args.ledger or f"sqlite:///{home / 'ledger.db'}"
    try:
        gen_ms, n = timed(lambda: generate(folder, args.rows))
        print(f"generated {n:,} rows in {gen_ms / 1000:.1f} s ({folder})", flush=True)
        import_ms, d = timed(lambda: open_directory(url, folder))
        d.close()
        drop_index(url)
        rebuild_ms, d = timed(lambda: open_directory(url, folder))
        assert set(d.rebuilt) == set(BUNDLES), d.rebuilt
        d.close()
        loads = []
        for _ in range(5):
            ms, d = timed(lambda: open_directory(url, folder))
            assert d.rebuilt == ()
            loads.append(ms)
            d.close()
        scan_ms = statistics.median(timed(lambda: scan(folder))[0] for _ in range(3))
        store_ms = statistics.median(timed(lambda: store_open(url, folder))[0] for _ in range(5))
        d = open_directory(url, folder)
        refresh_ms = statistics.median(timed(d.refresh)[0] for _ in range(20))
        write_ms, _ = timed(
            lambda: d.write("task", "bench_probe.md", "---\nname: probe\ndescription: p\n---\n")
        )
        assert d.rebuilt == ("task",), d.rebuilt
        resolver = resolver_figures(d, args.rounds)
        api = AgentApi(d)
        manifest_ms, full = timed(api.manifest)
        names = api.manifest(names=True)
        full_b, names_b = len(full.encode()), len(names.encode())
        d.close()
        mcp = mcp_figures(folder, home, args.mcp_runs)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    load = statistics.median(loads)
    reads, six, nine = mcp["four_read_verbs"], mcp["six_default"], mcp["nine_with_database_tools"]
    start_ms = mcp["start_to_tools_list_ms"]
    p50, p99 = resolver["p50_ms"], resolver["p99_ms"]
    lines = [
        ("rows", f"{n:,} in {len(BUNDLES)} bundles"),
        ("first open (import+index)", f"{import_ms / 1000:.1f} s"),
        ("index rebuild, all", f"{rebuild_ms:.0f} ms"),
        ("write + rebuild 1 section", f"{write_ms:.0f} ms (rebuilt: task only)"),
        ("no-change load (store)", f"{store_ms:.0f} ms (goal <= 100, ratio {store_ms / 100:.2f})"),
        (
            "no-change load (+folder)",
            f"{load:.0f} ms (ratio {load / 100:.2f}; stat of every file: {scan_ms:.0f} ms)",
        ),
        ("no-change refresh", f"{refresh_ms:.2f} ms (one small read)"),
        (
            "resolver p50 / p99",
            f"{p50:.2f} / {p99:.2f} ms (goals 5 / 20, ratios {p50 / 5:.2f} / {p99 / 20:.2f})",
        ),
        ("resolver first query", f"{resolver['first_query_ms']:.0f} ms (decodes the lookups it needs)"),
        ("resolver p50 by kind", str(resolver["by_kind_p50_ms"])),
        (
            "manifest full / names",
            f"{full_b:,} / {names_b:,} B (~{full_b // 4:,} / ~{names_b // 4:,} tokens)",
        ),
        (
            "names-only smaller by",
            f"{full_b / names_b:.1f}x (full manifest rendered in {manifest_ms:.0f} ms)",
        ),
        ("manifest full / names, tokens", measured_tokens(full, names)),
        (
            "MCP start to tools/list",
            f"{start_ms:.0f} ms (goal <= 1000, ratio {start_ms / 1000:.2f}) {mcp['runs_ms']}",
        ),
        (
            "MCP 4 read verbs",
            f"{reads['bytes']:,} B ~{reads['tokens']:,} tokens (goal < 1,122, ratio "
            f"{reads['tokens'] / 1122:.2f})",
        ),
        ("MCP 6 default / 9 tools", f"~{six['tokens']:,} / ~{nine['tokens']:,} tokens"),
    ]
    for label, value in lines:
        print(f"{label:<27}{value}")


if __name__ == "__main__":
    main(sys.argv[1:])
