"""What an agent costs, recorded right: real clients under `flightlog run` against a local stand-in
for the model APIs that answers with prompt-cache and reasoning usage (`cached_apis`).

- Claude Code (npm `@anthropic-ai/claude-code`, pinned): the cost flightlog records equals Claude
  Code's own `total_cost_usd` within 1% (before: cache reads and writes priced as full input, 3.1x).
- The openai Python SDK, chat completions and the responses API, streamed and not: each call's cost
  equals the provider's formula by hand (cached input at its rate, reasoning as output) within 1%,
  and the cache and reasoning counts are columns.
- A 429 names no model: it is filed under the model its request named, so counts by model count it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from storage.event_reads import counts
from storage.filters import Filter
from storage.ledger import open_ledger
from tests.capture.cached_apis import ANTHROPIC_USAGE, BUSY, CHAT_USAGE, RESPONSES_USAGE, cached_apis
from tests.capture.test_node_clients import _npm_install

pytestmark = pytest.mark.slow

CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"
SONNET = "claude-sonnet-4-5-20250929"
COLUMNS = "kind, status, agent, model, tokens_in, tokens_out, cache_read_tokens, cache_write_tokens, "
COLUMNS += "reasoning_tokens, cost_usd, url"

OPENAI_CLIENT = f"""
import json
import openai
client = openai.OpenAI(api_key="sk-test", max_retries=0)
ask = [{{"role": "user", "content": "hi"}}]
client.chat.completions.create(model="gpt-5", messages=ask)
for _ in client.chat.completions.create(model="gpt-5", messages=ask, stream=True,
                                        stream_options={{"include_usage": True}}):
    pass
client.responses.create(model="gpt-5", input="hi")
for _ in client.responses.create(model="gpt-5", input="hi", stream=True):
    pass
try:
    client.chat.completions.create(model="{BUSY}", messages=ask)
except openai.RateLimitError:
    print(json.dumps({{"rate_limited": True}}))
"""


def _run(tmp_path: Path, api_base: str, agent: str, command: list[str]) -> tuple[str, list[Any]]:
    """`flightlog run --agent AGENT -- COMMAND` with both model listeners sent to the stand-in: its
    output and the Ledger's answer rows."""
    home, ledger_url = tmp_path / "home", f"sqlite:///{tmp_path / 'ledger.db'}"
    user_home = tmp_path / "user"
    user_home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env |= {
        "FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger_url, "HOME": str(user_home),
        "ANTHROPIC_API_KEY": "sk-ant-test-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }  # fmt: skip
    argv = [sys.executable, "-m", "flightlog", "run", "--agent", agent]
    argv += ["--ai-upstream", f"anthropic={api_base}", "--ai-upstream", f"openai={api_base}", "--", *command]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ledger = open_ledger(ledger_url, (home / "blobs").as_uri())
    try:
        with ledger.engine.connect() as c:
            rows = c.execute(text(f"SELECT {COLUMNS} FROM events WHERE kind = 'http.response'")).all()
        by_model = {g.key: g for g in counts(ledger.engine, Filter(), "model")}
    finally:
        ledger.close()
    return done.stdout, [*rows, by_model]


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `claude` command, installed with npm into the test session's temporary folder."""
    modules = _npm_install(tmp_path_factory.mktemp("npm-claude-code"), CLAUDE_CODE)
    return modules / ".bin" / "claude"


def test_claude_code_cost_equals_its_own_total_cost(claude: Path, tmp_path: Path) -> None:
    """Claude Code answers through the stand-in, whose answers read 20,000 tokens from the prompt
    cache and write 3,000 to it; flightlog's recorded cost for the run equals Claude Code's own
    `total_cost_usd` within 1%, and every call's cache counts are in their columns."""
    with cached_apis() as api:
        command = [str(claude), "-p", "say hi", "--output-format", "json", "--model", SONNET]
        out, found = _run(tmp_path, api.base, "claude-code", command)
    *rows, _ = found
    answer = json.loads(out.strip().splitlines()[-1])
    assert answer["is_error"] is False, answer
    calls = [r for r in rows if "/v1/messages" in r.url and r.status == 200]
    assert calls, rows
    for r in calls:
        assert (r.cache_read_tokens, r.cache_write_tokens) == (20000, 3000), r
        assert r.tokens_in == 12 + 20000 + 3000 and r.tokens_out == ANTHROPIC_USAGE["output_tokens"]
        assert r.cost_usd is not None, r
    recorded = sum(r.cost_usd for r in calls)
    assert recorded == pytest.approx(answer["total_cost_usd"], rel=0.01), (recorded, answer)


def _openai_formula(uncached: int, cached: int, output: int) -> float:
    """gpt-5 as OpenAI prices it: $1.25 input, $0.125 cached input, $10 output (reasoning
    included) per million tokens."""
    return (uncached * 1.25 + cached * 0.125 + output * 10.0) / 1e6


def test_openai_sdk_cost_is_the_providers_formula_and_a_429_counts_under_its_model(tmp_path: Path) -> None:
    """Chat completions and responses, streamed and not: cached and reasoning tokens are columns
    and each call costs what OpenAI's formula says; the rate-limited call is filed under the model
    its request named, with no tokens and no cost, and counted under that model."""
    with cached_apis() as api:
        out, found = _run(tmp_path, api.base, "sdk", [sys.executable, "-c", OPENAI_CLIENT])
    *rows, by_model = found
    assert json.loads(out.strip().splitlines()[-1]) == {"rate_limited": True}
    chat = [r for r in rows if r.url.endswith("/chat/completions") and r.status == 200]
    responses = [r for r in rows if r.url.endswith("/responses")]
    assert len(chat) == 2 and len(responses) == 2, rows
    details = CHAT_USAGE["prompt_tokens_details"], CHAT_USAGE["completion_tokens_details"]
    for r in chat:
        assert (r.tokens_in, r.tokens_out) == (2000, 300)
        assert (r.cache_read_tokens, r.cache_write_tokens, r.reasoning_tokens) == (1536, None, 256), details
        assert r.cost_usd == pytest.approx(_openai_formula(2000 - 1536, 1536, 300), rel=0.01)
    for r in responses:
        assert (r.tokens_in, r.tokens_out) == (
            RESPONSES_USAGE["input_tokens"],
            RESPONSES_USAGE["output_tokens"],
        )
        assert (r.cache_read_tokens, r.reasoning_tokens) == (4096, 640)
        assert r.cost_usd == pytest.approx(_openai_formula(5000 - 4096, 4096, 700), rel=0.01)
    (busy,) = [r for r in rows if r.status == 429]
    assert (busy.model, busy.agent, busy.tokens_in, busy.cost_usd) == (BUSY, "sdk", None, None)
    assert by_model[BUSY].events >= 1 and by_model[BUSY].unpriced == 0
    assert by_model["gpt-5"].unpriced == 0 and by_model["gpt-5"].cost_usd > 0
