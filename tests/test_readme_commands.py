"""The README, run as a newcomer would: its first commands (`make run PORT=…` records, `make install`
links) and every example block, read from README.md itself.

The first block (`sh setup`) promises two commands that work on a fresh machine; the tests run them
from this checkout (its .venv already exists, so make only checks the stamp) against a local upstream.
The README's convention for the rest (said at its top): a block fenced `sh` runs as written, top to
bottom, in a fresh HOME (so `~/.flightlog` is the default FLIGHTLOG_HOME) with a proxy running and a
local upstream standing in for the model APIs (`--ai-upstream`); a line whose comment says
`(until Ctrl-C)` gets SIGINT after a few seconds and passes if it was still running or ended cleanly.
A `sh synopsis` block's commands must exist and take every `--option` they show (their `--help`); `toml`
blocks must parse; `markdown` blocks are row files that must read as a callable tool. The files the
examples name (`my_agent.py`, `agent.py`, `api.yaml`) are made here: small agents that call the chat API
through the proxy.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_block
from tests.support.proxy import LiveProxy, start_proxy
from tests.support.upstream import Upstream, upstream

pytestmark = pytest.mark.slow  # run first on the xdist workers (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def test_readme_starts_with_exactly_the_two_commands() -> None:
    """The first code block of README.md is `make run` and `make test`, nothing else."""
    block = re.search(r"```sh setup\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["make run", "make test"]


def test_make_run_on_a_chosen_port_records_a_request(home: Path) -> None:
    """`make run PORT=N` listens on N, records a request through it, and drains on SIGINT."""
    port = free_block(3)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["FLIGHTLOG_HOME"] = str(home)
    proc = subprocess.Popen(
        ["make", "-s", "run", f"PORT={port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        state = home / "proxy.json"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if state.exists() and any(x["port"] == port for x in json.loads(state.read_text())["listeners"]):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"make run did not listen on {port}: {proc.stdout and proc.stdout.read()!r}")
        with upstream() as up:
            answer = httpx.get(
                f"{up.base}/bytes/17?from=make-run", proxy=f"http://127.0.0.1:{port}", timeout=10
            )
        assert answer.status_code == 200
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    with sqlite3.connect(home / "ledger.db") as db:
        urls = [row[0] for row in db.execute("SELECT url FROM events WHERE kind = 'http.request'")]
    assert any(url.endswith("/bytes/17?from=make-run") for url in urls), urls


def test_make_install_puts_flightlog_on_path(tmp_path: Path) -> None:
    """`make install PREFIX=P` links P/bin/flightlog to this checkout's command, which runs."""
    done = subprocess.run(
        ["make", "-s", "install", f"PREFIX={tmp_path}"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    link = tmp_path / "bin" / "flightlog"
    assert link.resolve() == (ROOT / ".venv" / "bin" / "flightlog").resolve()
    assert subprocess.run([str(link), "--help"], capture_output=True, check=False).returncode == 0


BIN = Path(sys.executable).parent
FENCE = re.compile(r"^( *)```([^\n]*)\n(.*?)^\1```", re.S | re.M)
UNTIL_CTRL_C = "(until Ctrl-C)"

MY_AGENT = """\
import openai  # configured by nothing but the variables `flightlog run` sets (OPENAI_BASE_URL)

answer = openai.OpenAI(max_retries=0).chat.completions.create(
    model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
)
print(answer.choices[0].message.content)
"""
AGENT = """\
import json, os, urllib.request  # through HTTP_PROXY, to the chat API the test stands up

body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()
request = urllib.request.Request(os.environ["README_CHAT_URL"], data=body,
                                 headers={"content-type": "application/json"})
print(json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"])
"""


@dataclass(frozen=True)
class Block:
    heading: str
    info: str
    text: str

    @property
    def id(self) -> str:
        return re.sub(r"\W+", "-", self.heading.lower()).strip("-") or "top"


def readme_blocks() -> list[Block]:
    """Each fenced block of README.md with its info string and the heading it sits under."""
    readme = (ROOT / "README.md").read_text()
    out = []
    for match in FENCE.finditer(readme):
        headings = re.findall(r"^#+ (.+)$", readme[: match.start()], re.M)
        out.append(
            Block(headings[-1] if headings else "", match.group(2).strip(), textwrap.dedent(match.group(3)))
        )
    return out


def commands(block: Block) -> list[str]:
    """The block's command lines (comment-only and blank lines dropped), as written."""
    return [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def as_script(block: Block) -> str:
    """The block as a bash script that stops at the first failing line; an `(until Ctrl-C)` line
    gets SIGINT after 6 s (exit 124 from `timeout` means it was still running: it passes)."""
    lines = ["set -euo pipefail"]
    for line in commands(block):
        if UNTIL_CTRL_C in line:
            command = line.split(" #", 1)[0].strip()
            line = f"timeout -k 10 -s INT 6 {command} </dev/null || [ $? -eq 124 ]"
        lines.append(line)
    return "\n".join(lines) + "\n"


RUNNABLE = [b for b in readme_blocks() if b.info == "sh"]
SYNOPSES = [b for b in readme_blocks() if b.info == "sh synopsis"]


@dataclass
class World:
    home: Path
    workdir: Path
    env: dict[str, str]
    proxy: LiveProxy
    up: Upstream


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A fresh HOME, a local chat API, a proxy for `~/.flightlog` whose model API listeners forward
    there, and a working folder with the files the examples name."""
    home = tmp_path_factory.mktemp("readme-home")
    workdir = home / "work"
    workdir.mkdir()
    (workdir / "my_agent.py").write_text(MY_AGENT)
    (workdir / "agent.py").write_text(AGENT)
    shutil.copy(ROOT / "tests" / "catalog" / "fixtures" / "petstore.yaml", workdir / "api.yaml")
    flightlog_home = home / ".flightlog"
    with upstream() as up:
        keep = ("LANG", "LC_ALL", "TERM", "TMPDIR", "FLIGHTLOG_TEST_PG")
        env = {k: v for k, v in os.environ.items() if k in keep}
        env |= {
            "HOME": str(home),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "OPENAI_API_KEY": "sk-readme-not-a-key",
            "README_CHAT_URL": f"{up.base}/v1/chat/completions",
        }
        ai = ["--ai-upstream", f"openai={up.base}", "--ai-upstream", f"anthropic={up.base}"]
        proxy = start_proxy(flightlog_home, f"sqlite:///{flightlog_home / 'ledger.db'}", args=ai, env=env)
        try:
            yield World(flightlog_home, workdir, env, proxy, up)
        finally:
            proxy.stop()


def test_the_convention_covers_every_block() -> None:
    """Each block is `sh setup` (the first: make run, make test), `sh`, `sh synopsis`, `toml` or
    `markdown` (a row file), and the README has runnable blocks at all."""
    infos = [b.info for b in readme_blocks()]
    assert infos[0] == "sh setup"
    assert set(infos[1:]) <= {"sh", "sh synopsis", "toml", "markdown"}, infos
    assert len(RUNNABLE) >= 4


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_runnable_block_runs_as_written(world: World, block: Block) -> None:
    """Every line of the block exits 0 (or, marked `(until Ctrl-C)`, runs until interrupted)."""
    done = subprocess.run(
        ["bash", "-c", as_script(block)],
        cwd=world.workdir,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block.heading}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if "--agent alpha --session s1" in block.text:
        with sqlite3.connect(world.home / "ledger.db") as db:
            rows = db.execute(
                "SELECT kind, model FROM events WHERE agent = 'alpha' AND session = 's1'"
            ).fetchall()
        assert ("http.response", "gpt-4o-mini") in rows, rows  # my_agent.py's call, zero configuration


def _shapes(block: Block) -> Iterator[list[str]]:
    """Each command of a synopsis block as words: two-column lines split, comments and the child
    command after `--` dropped."""
    for line in commands(block):
        for part in re.split(r"\s{3,}(?=flightlog )", line.split(" #", 1)[0].strip()):
            words = shlex.split(part)
            yield words[: words.index("--")] if "--" in words else words


@pytest.mark.parametrize("block", SYNOPSES, ids=[b.id for b in SYNOPSES])
def test_synopsis_block_names_real_commands_and_options(block: Block) -> None:
    """Each command of the block exists (`--help` exits 0) and its help lists every option shown."""
    for words in _shapes(block):
        assert words[0] == "flightlog", words
        path = [w for w in words[1:3] if re.fullmatch(r"[a-z][a-z-]*", w)]
        shown = {m for w in words for m in re.findall(r"--[a-z][a-z-]*", w)}
        done = subprocess.run(
            [str(BIN / "flightlog"), *path, "--help"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, (words, done.stderr)
        missing = {o for o in shown if o not in done.stdout}
        assert not missing, f"{' '.join(words)}: {missing} not in `flightlog {' '.join(path)} --help`"


def test_markdown_blocks_are_callable_rows() -> None:
    """The row file the README shows reads without warnings as a tool with a contract."""
    from catalog.document import parse
    from catalog.tool import Tool

    blocks = [b for b in readme_blocks() if b.info == "markdown"]
    assert blocks
    for block in blocks:
        front, body, warnings = parse(block.text)
        assert warnings == [], warnings
        tool = Tool.from_frontmatter(front, body, bundle="tool")
        assert tool.name and tool.upstream is not None


def test_toml_blocks_parse() -> None:
    """The configuration files the README shows (aliases.toml, policy.toml) are valid TOML."""
    blocks = [b for b in readme_blocks() if b.info == "toml"]
    assert blocks
    for block in blocks:
        tomllib.loads(block.text)
