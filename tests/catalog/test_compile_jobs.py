"""Sections compiled at once: in forked children where that is safe and pays, the same data as one
by one; a child that fails costs its share's time, never its sections."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from catalog.compile_jobs import FORK_MIN, Job, can_fork, compile_all, shares
from catalog.directory import open_directory
from catalog.section_compile import compile_section
from storage.documents.reads import open_sqlite_reads
from tests.catalog.conftest import make_folder, row

ROOT = Path(__file__).resolve().parents[2]


def jobs(bundles: int, each: int) -> list[Job]:
    return [
        (f"b{k}", [(f"r{i}.md", f"h{k}-{i}", row(f"B{k}_ROW_{i}", f"Row {i} of {k}.")) for i in range(each)])
        for k in range(bundles)
    ]


def test_shares_deal_the_documents_about_evenly() -> None:
    """Largest first, each to the lightest share: 9,000/8,500/4,000/1,750/1,750 over two cores
    is 12,500 against 12,500; more parts than jobs leaves no empty share."""
    sized = [
        (b, [("", "", "")] * n) for b, n in (("a", 9000), ("t", 8500), ("f", 4000), ("c", 1750), ("k", 1750))
    ]
    two = shares(sized, 2)
    assert sorted(sum(len(d) for _, d in share) for share in two) == [12500, 12500]
    assert len(shares(sized[:2], 4)) == 2 and shares([], 2) == []


def test_in_a_process_with_another_thread_the_sections_compile_here() -> None:
    """Beside another thread a child could inherit a held lock: no fork, the same data."""
    work = jobs(3, FORK_MIN // 2)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not can_fork(work, 4)
        done, forked = compile_all(work, 4)
    finally:
        stop.set()
        other.join()
    assert forked == 0
    assert done == {bundle: compile_section(bundle, documents) for bundle, documents in work}


def run_python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_single_threaded_process_compiles_in_children_and_gets_the_same_data() -> None:
    """In a process of one thread on more than one core, all but one share are compiled by forked
    children: the data equals compiling each section here, and the parent kept its stdout."""
    cores = len(os.sched_getaffinity(0))
    code = f"""
import hashlib, json
from tests.catalog.test_compile_jobs import jobs
from catalog.compile_jobs import compile_all
from catalog.section_compile import compile_section
work = jobs(3, {FORK_MIN // 2})
done, forked = compile_all(work, {cores})
same = done == {{b: compile_section(b, d) for b, d in work}}
print(json.dumps({{"forked": forked, "same": same}}))
"""
    got = json.loads(run_python(code).strip().splitlines()[-1])
    assert got == {"forked": min(cores, 3) - 1, "same": True}


def test_a_thread_python_does_not_count_still_prevents_the_fork() -> None:
    """faulthandler's watchdog is a native thread `threading` never sees: no fork beside it either
    (and so no warning from Python that a multi-threaded process forked)."""
    code = f"""
import faulthandler, json, warnings
warnings.simplefilter("error")
from tests.catalog.test_compile_jobs import jobs
from catalog.compile_jobs import compile_all
faulthandler.dump_traceback_later(600)
done, forked = compile_all(jobs(3, {FORK_MIN // 2}), 4)
print(json.dumps({{"forked": forked}}))
"""
    assert json.loads(run_python(code).strip().splitlines()[-1]) == {"forked": 0}


def test_a_child_that_dies_costs_time_not_sections() -> None:
    """A child killed mid-way (its compile raises): the parent compiles that share itself."""
    code = f"""
import json, os
import catalog.compile_jobs as jobs_module
from tests.catalog.test_compile_jobs import jobs
from catalog.section_compile import compile_section
parent = os.getpid()
real = jobs_module.compile_section
def dying(bundle, documents):
    if os.getpid() != parent:
        raise SystemExit("a child that dies")
    return real(bundle, documents)
jobs_module.compile_section = dying
work = jobs(2, {FORK_MIN})
done, forked = jobs_module.compile_all(work, 2)
print(json.dumps({{"forked": forked, "same": done == {{b: real(b, d) for b, d in work}}}}))
"""
    got = json.loads(run_python(code).strip().splitlines()[-1])
    assert got == {"forked": 0, "same": True}


def test_a_first_open_from_the_command_line_files_every_section_as_compiled_here(
    tmp_path: Path, home: Path
) -> None:
    """`flightlog find` over a new folder of two large sections (compiled in a child on this
    machine): every stored index equals compiling that section in this process."""
    rows = {
        f"{b}/{b[0]}_{i:04d}.md": row(f"{b.upper()}_{i}", f"Row {i} of {b}.")
        for b in ("tool", "article")
        for i in range(1200)
    }
    folder = make_folder(tmp_path / "d", rows, aliases=None)
    env = {**os.environ, "FLIGHTLOG_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "flightlog", "find", "--json", "--directory", str(folder), "TOOL_17"],
        env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["hits"][0]["id"] == "t_0017"
    d = open_directory(f"sqlite:///{home / 'ledger.db'}", folder)
    try:
        assert d.rebuilt == ()  # what the command line filed is what this open serves
    finally:
        d.close()
    reads = open_sqlite_reads(f"sqlite:///{home / 'ledger.db'}", f"folder:{folder}")
    assert reads is not None
    try:
        stored = reads.index_data(["tool", "article"])
        for bundle in ("tool", "article"):
            assert stored[bundle][1] == compile_section(bundle, reads.bundle_documents(bundle))[0]
    finally:
        reads.close()
