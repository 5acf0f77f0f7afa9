"""`make bench` on a fresh machine: a benchmark that lacks a tool is skipped with one line, the rest run."""

from __future__ import annotations

import os
import shutil

import pytest

import bench._needs as needs
from bench.__main__ import main


def test_a_missing_tool_skips_that_benchmark_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No wrk and no apt-get: bench.capture says why in one line and the runner goes on to the next."""
    real = shutil.which
    monkeypatch.setattr(
        needs.shutil, "which", lambda tool, **kw: None if tool in ("wrk", "apt-get") else real(tool, **kw)
    )
    ran: list[str] = []
    monkeypatch.setattr("bench.redact.main", lambda: ran.append("redact"))
    main(["capture", "redact"])
    out = capsys.readouterr().out.splitlines()
    assert "bench.capture: skipped: needs wrk (apt-get install wrk), which is not on this machine" in out
    assert ran == ["redact"]
    assert out[-1] == "skipped: capture"


def test_a_tool_on_the_path_is_found() -> None:
    """`need` answers the tool's path when it is there (python is, wherever the tests run)."""
    assert needs.need("python3") == shutil.which("python3")


def test_the_readme_names_every_benchmark() -> None:
    """README's Benchmarks section lists every benchmark module in bench/ (a new one cannot go unlisted)."""
    import pkgutil
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    section = (root / "README.md").read_text().split("## Benchmarks", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(\w+)`", section))
    found = {m.name for m in pkgutil.iter_modules([str(root / "bench")]) if not m.name.startswith("_")}
    assert found - listed == set(), f"benchmarks missing from the README: {sorted(found - listed)}"


def test_the_fallback_upstream_answers_the_bytes_nginx_would_serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no nginx to be had, `auto` says so in one line and the asyncio server answers `GET /SIZE`
    with `body(SIZE)`, the same bytes nginx serves from its files, over one kept-alive connection."""
    import http.client

    from bench import _upstream

    real = shutil.which
    monkeypatch.setattr(
        needs.shutil, "which", lambda tool, **kw: None if tool in ("nginx", "apt-get") else real(tool, **kw)
    )
    upstream = _upstream.start_upstream([1024, 100], "auto")
    try:
        assert upstream.kind == "asyncio"
        assert "bench: upstream is the asyncio server (needs nginx" in capsys.readouterr().out
        connection = http.client.HTTPConnection("127.0.0.1", upstream.port, timeout=10)
        for size in (1024, 100, 0):
            connection.request("GET", f"/{size}")
            answer = connection.getresponse()
            assert (answer.status, answer.read()) == (200, _upstream.body(size))
        connection.close()
    finally:
        upstream.stop()
    assert len(_upstream.body(1000)) == 1000


def test_stopping_a_run_deletes_only_its_own_scratch_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """`stop_upstream` deletes the run's `flightlog-*` folder in the system's temporary folder and
    refuses any other path (a checkout passed by mistake), before stopping anything or deleting a file."""
    import tempfile
    from pathlib import Path

    from bench import _upstream

    keep = tmp_path_factory.mktemp("checkout")
    (keep / "README.md").write_text("kept")
    upstream = _upstream.start_upstream([100], "asyncio")
    try:
        for wrong in (keep, Path("."), Path(tempfile.gettempdir())):
            with pytest.raises(ValueError, match="not a bench scratch folder"):
                _upstream.stop_upstream(upstream, wrong)
        assert (keep / "README.md").read_text() == "kept"
        assert upstream.proc.poll() is None  # refused before the upstream was stopped
        work = Path(tempfile.mkdtemp(prefix="flightlog-bench-"))
        (work / "ledger.db").write_bytes(b"x")
        _upstream.stop_upstream(upstream, work)
        assert not work.exists()
        assert upstream.proc.poll() is not None
    finally:
        upstream.stop()


def test_the_ledger_bench_prints_the_machine_speed_before_and_after_its_figures(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A run's absolute figures carry the CPU probe taken before and after them (a shared machine's
    speed drifts between runs), and the probe is a positive number of milliseconds."""
    import re

    from bench import ledger

    ledger.main(["--batches", "1", "--engines", "sqlite"])
    lines = capsys.readouterr().out.splitlines()
    probe = re.compile(r"cpu probe \((before|after)\): (\d+) ms for the fixed loop")
    first, last = probe.match(lines[0]), probe.match(lines[-1])
    assert first is not None and first.group(1) == "before" and int(first.group(2)) > 0
    assert last is not None and last.group(1) == "after" and int(last.group(2)) > 0
    assert any(line.startswith("sqlite      rows") for line in lines[1:-1])


def test_the_writer_bench_figure_is_of_every_event_stored(capsys: pytest.CaptureFixture[str]) -> None:
    """`bench.writer` prints a CPU figure per engine, ids and batch size only when the Ledger holds
    every event of the requests it fed, those put in before included (two per request, none
    unrecordable): it raises otherwise."""
    from bench import writer

    home = os.environ.get("FLIGHTLOG_HOME")
    writer.main(
        [
            "--requests",
            "200",
            "--rounds",
            "1",
            "--engines",
            "sqlite",
            "--batches",
            "50,100",
            "--before",
            "300",
        ]
    )
    assert os.environ.get("FLIGHTLOG_HOME") == home  # its scratch home is not left to later tests
    lines = capsys.readouterr().out.splitlines()
    assert "requests already in each Ledger: 300" in lines
    rows = [line.split() for line in lines if line.startswith("sqlite ")]
    assert [(r[1], r[2], float(r[3]) > 0) for r in rows] == [
        ("ordered", "50", True), ("ordered", "100", True), ("uuid4", "50", True), ("uuid4", "100", True),
    ]  # fmt: skip
    assert rows[0][4] == "1.00"


def test_the_trickle_bench_prints_cpu_a_second_beside_plain_mitmdump(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`bench.trickle` paces requests through plain mitmdump and flightlog and prints, per rate, each
    one's CPU a second with flightlog's writer apart and its ratio to plain (a flightlog figure is
    refused unless every request sent is in its Ledger)."""
    import re

    from bench import trickle

    trickle.main(["--rates", "10", "--seconds", "1", "--rounds", "1", "--upstream", "asyncio"])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines if re.match(r"(plain|fl-sqlite) +10 ", line)}
    assert set(rows) == {"plain", "fl-sqlite"}, lines
    assert rows["plain"][5] == "1.00" and rows["plain"][3] == "0.0"  # plain mitmdump has no writer
    assert float(rows["fl-sqlite"][4]) > 0 and rows["fl-sqlite"][-1] == "ms"


def test_help_names_the_benchmarks_and_an_unknown_name_is_one_line() -> None:
    """`python -m bench --help` prints its usage and every benchmark (it tried to import `bench.--help`);
    a name that is no benchmark exits non-zero with one line naming it, no traceback."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    helped = subprocess.run(
        [sys.executable, "-m", "bench", "--help"], cwd=root, capture_output=True, text=True, timeout=120
    )
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith("usage: python -m bench"), helped.stdout
    assert "faults" in helped.stdout and "ledger" in helped.stdout, helped.stdout
    wrong = subprocess.run(
        [sys.executable, "-m", "bench", "--workers", "2"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr, wrong.stderr
    assert wrong.stderr.strip().splitlines() == [wrong.stderr.strip()], wrong.stderr
    assert "no benchmark named '--workers'" in wrong.stderr, wrong.stderr
