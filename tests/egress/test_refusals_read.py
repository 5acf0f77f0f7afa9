"""Reading refusals back: plain words ("refused calls by rule"), counts by rule on both engines, the
command line, and the terminal browser listing them as exchanges."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from textual.widgets import DataTable

from storage.event_reads import counts
from storage.events import Batch, Event
from storage.filters import Filter
from storage.ledger import Ledger, open_ledger
from storage.questions.reading import ask
from tests.browse.tui_support import make_app, settle
from tests.support.proxy import live_proxy
from tests.support.upstream import upstream

T = datetime(2026, 12, 6, 10, 0, tzinfo=UTC)


def _event(i: int, kind: str, error: str | None = None, **more: Any) -> Event:
    return Event(
        event_id=f"e{i}", action_id=f"a{i}", kind=kind, direction="out", at=T + timedelta(seconds=i),
        collector="t", seq=i, error=error, head=b"", **more,
    )  # fmt: skip


def test_refusals_count_by_rule_on_both_engines(ledger_url: str, tmp_path: Path) -> None:
    """`refused` means the door's and the policy's refusals alike; counted `by rule` each is filed
    under the rule (or limit) its error names first; other events (even with an error) are not
    refusals; "by limit" reads the same."""
    ledger = open_ledger(ledger_url, (tmp_path / "blobs").as_uri())
    ledger.append(Batch("t", 1, (
        _event(1, "policy.refused", "no-evil: deny hosts=evil.example", status=403),
        _event(2, "policy.refused", "no-evil: deny hosts=evil.example", status=403),
        _event(3, "policy.refused", "alpha-tokens: 40 tokens a day (UTC) for agent alpha: 54 tokens"),
        _event(4, "dispatch.refused", "uses: the token's 1 use is spent", status=403),
        _event(5, "http.response", "upstream: connection refused", status=502),
        _event(6, "http.request"),
    )))  # fmt: skip
    try:
        question = ask("refused calls by rule", now=T + timedelta(hours=1))
        assert question.filter.kind == "refused" and question.group_by == "rule"
        groups = counts(ledger.engine, question.filter, "rule")
        assert [(g.key, g.events) for g in groups] == [("no-evil", 2), ("alpha-tokens", 1), ("uses", 1)]
        assert ask("refusals by limit", now=T).group_by == "rule"
        every = {g.key: g.events for g in counts(ledger.engine, Filter(), "rule")}
        assert every == {"no-evil": 2, "alpha-tokens": 1, "uses": 1, None: 2}
    finally:
        ledger.close()


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Ledger, Path]]:
    """A Ledger a live proxy wrote: two requests and a CONNECT refused, one request allowed."""
    tmp_path = tmp_path_factory.mktemp("refusals")
    policy = tmp_path / "egress.toml"
    policy.write_text(
        '[[rule]]\nname = "no-admin"\naction = "deny"\npaths = ["/admin*"]\n'
        '[[rule]]\nname = "no-gone-host"\naction = "deny"\nhosts = ["gone.example"]\n'
    )
    ledger_url = f"sqlite:///{tmp_path / 'ledger.db'}"
    home = tmp_path / "home"
    with upstream() as up, live_proxy(home, ledger_url, args=["--policy", str(policy)]) as proxy:
        client = httpx.Client(proxy=f"http://alpha:x@127.0.0.1:{proxy.port}")
        assert client.get(f"http://127.0.0.1:{up.port}/admin/1").status_code == 403
        assert client.get(f"http://127.0.0.1:{up.port}/admin/2").status_code == 403
        assert client.get(f"http://127.0.0.1:{up.port}/fixed").status_code == 200
        with pytest.raises(httpx.ProxyError):
            client.get("https://gone.example/")
        client.close()
    ledger = open_ledger(ledger_url, proxy.blobs_url)
    yield ledger, home
    ledger.close()


def test_the_command_line_answers_refused_calls_by_rule(refusals: tuple[Ledger, Path]) -> None:
    """`flightlog ledger ask refused calls by rule` and `ledger counts --by rule` count what the
    proxy refused under each rule's name."""
    ledger, home = refusals
    env = {"FLIGHTLOG_HOME": str(home), "FLIGHTLOG_LEDGER": ledger.url, "PATH": "/usr/bin:/bin"}

    def flightlog(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-m", "flightlog", *args], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    asked = flightlog("ledger", "ask", "refused", "calls", "by", "rule", "--json")
    assert {g["key"]: g["events"] for g in asked["groups"]} == {"no-admin": 2, "no-gone-host": 1}
    counted = flightlog("ledger", "counts", "--by", "rule", "--json")
    assert {g["key"]: g["events"] for g in counted["groups"] if g["key"]} == {
        "no-admin": 2,
        "no-gone-host": 1,
    }


@pytest.mark.anyio
async def test_the_browser_lists_refusals_as_exchanges(refusals: tuple[Ledger, Path]) -> None:
    """Each refused request is one exchange line with the 403 the client got; the refused CONNECT,
    which had no request of its own, is a line too; the refusal's rule shows on them."""
    ledger, _ = refusals
    app = make_app(ledger)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot)
        table = app.list_screen.query_one(DataTable)
        lines = [" ".join(str(c).strip() for c in table.get_row_at(i)) for i in range(table.row_count)]
    assert len(lines) == 4, lines
    admin = [x for x in lines if "/admin/" in x]
    assert len(admin) == 2 and all("403" in x for x in admin), admin
    (connect,) = [x for x in lines if "gone.example" in x]
    assert "CONNECT" in connect and "no-gone-host" in connect, connect


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"
