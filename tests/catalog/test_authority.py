"""The Directory's half of authority: rows that run commands, the rights a token holds, the contract
it binds, and the policy flightlog mints its own tokens from."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from authority import caveats, tokens
from authority.gate import Ask, GateRefused, admit
from authority.lending import LendingError, Policy, load_policy, parse_policy, policy_caveats
from authority.targets import placed
from catalog.contracts import forms
from catalog.directory import open_directory
from catalog.local_rows import (
    LocalCommandRefused,
    contract_hash,
    frontmatter_runs_locally,
    text_runs_locally,
)
from catalog.tool import Tool
from storage.ledger import open_ledger
from storage.token_uses import TokenUses

ROOT = b"k" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def tool(name: str, upstream: object, cli: bool = False) -> Tool:
    return Tool.from_frontmatter({"name": name, "description": "d", "upstream": upstream, "cli": cli})


def doc(name: str, upstream: object, cli: bool = False) -> str:
    return tool(name, upstream, cli).to_document()


@pytest.mark.parametrize(
    "frontmatter",
    [
        {"upstream": {"method": "CLI", "command": ["sh", "-c", "id"]}},
        {"upstream": {"method": "cli", "command": "id"}},
        {"upstream": {"method": "CODE", "language": "python", "code": "print(1)"}},
        {"upstream": {"method": "MCP", "server": {"command": "evil"}, "tool": "x"}},
        {"upstream": [{"method": "GET", "url": "https://a.example"}, {"method": "CLI", "command": "id"}]},
        {"upstream": {"method": "GET", "url": "https://a.example"}, "cli": True},
    ],
)
def test_rows_that_run_something_here_are_recognised(frontmatter: dict[str, object]) -> None:
    """A command, code, an MCP server started as a command, an array hiding one, or `cli: true`."""
    assert frontmatter_runs_locally(frontmatter)


def test_remote_rows_run_nothing_here() -> None:
    """HTTP and MCP-over-HTTP rows, and documents without a contract, are not local commands."""
    assert not frontmatter_runs_locally({"upstream": {"method": "POST", "url": "https://a.example"}})
    assert not frontmatter_runs_locally({"upstream": {"method": "MCP", "server": {"url": "https://m"}}})
    assert not text_runs_locally("---\nname: note\ndescription: x\n---\nplain text\n")


def test_a_network_directory_refuses_command_rows_the_operator_may_write(tmp_path: Path) -> None:
    """Opened for a network door, writing, overwriting, deleting or transacting a command row is
    refused and nothing is committed; the operator's own open writes the same row."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    (tmp_path / "dir" / "tool").mkdir(parents=True)
    operator = open_directory(url, tmp_path / "dir")
    operator.write("tool", "local.md", doc("local", {"method": "CLI", "command": ["true"]}, cli=True))
    network = open_directory(url, tmp_path / "dir")
    network.network = True
    head = network.revision
    shell = doc("pwn", {"method": "CLI", "command": ["sh", "-c", "id"]}, cli=True)
    remote = doc("weather", {"method": "GET", "url": "https://w.example"})
    current = network.current_hash("tool", "local.md")
    attempts = [
        lambda: network.write("tool", "pwn.md", shell),
        lambda: network.write("tool", "local.md", remote, current),
        lambda: network.delete("tool", "local.md", current),
        lambda: network.transact(
            [{"operation": "write", "bundle": "tool", "path": "p.md", "content": shell}]
        ),
    ]
    for attempt in attempts:
        with pytest.raises(LocalCommandRefused):
            attempt()
    assert network.revision == head and network.current_hash("tool", "pwn.md") is None
    with_local = network.write("tool", "weather.md", remote).revision
    operator.delete("tool", "local.md", current)
    with pytest.raises(LocalCommandRefused):  # restoring would bring the command row back
        network.restore(with_local, network.revision)
    operator.close()
    network.close()


def test_grants_and_contract_caveats_only_narrow() -> None:
    """No `grants` caveat: every right; two caveats intersect; a contract caveat allows exactly the
    named rows with exactly those contracts."""
    full = caveats.fold([])
    assert full.grants_right("write") and full.binds("weather", "abc")
    narrowed = caveats.fold([caveats.parse("grants = call,ledger"), caveats.parse("grants = ledger")])
    assert narrowed.grants_right("ledger") and not narrowed.grants_right("call")
    bound = caveats.fold([caveats.parse("contract = weather:0123456789abcdef")])
    assert bound.binds("WEATHER", "0123456789abcdef") and not bound.binds("weather", "fedcba9876543210")
    assert not bound.binds("other", "0123456789abcdef")
    with pytest.raises(caveats.CaveatError):
        caveats.parse("grants = root")
    with pytest.raises(tokens.TokenError):
        tokens.attenuate(tokens.mint(ROOT, ["grants = call"]), ["grants = call,write"])


def test_a_rewritten_row_refuses_a_token_bound_to_its_old_contract(tmp_path: Path) -> None:
    """The gate names the limit `contract` when the row's hash moved."""
    old = tool("weather", {"method": "GET", "url": "https://w.example/v1"})
    new = tool("weather", {"method": "GET", "url": "https://w.example/v2"})
    assert contract_hash(old) != contract_hash(new)
    token = tokens.mint(ROOT, [f"contract = weather:{contract_hash(old)}"]).encode()
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "b").as_uri())
    book = TokenUses(ledger.engine)

    def ask(t: Tool) -> Ask:
        return Ask("call", "http", NOW, (placed(t).row,))

    assert admit(token, ask(old), ROOT, book).identifier
    with pytest.raises(GateRefused, match="rewritten") as refused:
        admit(token, ask(new), ROOT, book)
    assert refused.value.limit == "contract"
    ledger.close()


def test_the_gate_names_the_limit(tmp_path: Path) -> None:
    """No token, a bad one, a forged one, one without the right, an expired or spent one: each named;
    a verb needing no right passes without a token."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "b").as_uri())
    book = TokenUses(ledger.engine)
    read_ledger = Ask("ledger", "http", NOW)

    def limit(token: str | None, ask: Ask = read_ledger) -> str | None:
        try:
            admit(token, ask, ROOT, book)
        except GateRefused as e:
            return e.limit
        return None

    good = tokens.mint(ROOT, ["grants = ledger"]).encode()
    assert limit(good) is None
    assert limit(None) == "token" and limit("hello") == "token"
    assert limit(tokens.mint(b"x" * 32, ["grants = ledger"]).encode()) == "signature"
    assert limit(good, Ask("write", "http", NOW)) == "grants"
    spent = tokens.mint(ROOT, ["uses <= 0"]).encode()
    assert limit(spent) == "uses"
    assert limit(tokens.mint(ROOT, ["expires < 2020-01-01T00:00:00Z"]).encode()) == "expires"
    assert limit(None, Ask("read", "http", NOW)) is None
    assert limit(None, Ask("call", "cli", NOW, trusted=True)) is None
    ledger.close()


def test_the_default_policy_lends_remote_rows_only(tmp_path: Path) -> None:
    """By default a minted token may call every row that runs nothing here (each contract bound),
    holds only `call`, and expires; a row that runs a command is lent only when the policy names it."""
    rows = [
        tool("weather", {"method": "GET", "url": "https://w.example"}),
        tool("local", {"method": "CLI", "command": ["true"]}, cli=True),
    ]
    made = policy_caveats(load_policy(tmp_path), rows, now=NOW, task="T1")
    limits = tokens.mint(ROOT, made).limits()
    assert limits.grants == frozenset({"call"}) and limits.tools == frozenset({"weather"})
    assert limits.binds("weather", contract_hash(rows[0])) and limits.task == frozenset({"T1"})
    assert limits.expires == datetime(2026, 12, 2, tzinfo=UTC)
    widened = policy_caveats(Policy(grants=("call", "ledger"), tools=("local",)), rows, now=NOW)
    wide = tokens.mint(ROOT, widened).limits()
    assert wide.tools == frozenset({"weather", "local"}) and wide.grants_right("ledger")


def test_a_bad_policy_is_one_clear_error(tmp_path: Path) -> None:
    """An unknown key or right in policy.toml is refused, naming it."""
    with pytest.raises(LendingError, match="unknown key 'admin'"):
        parse_policy({"admin": True})
    with pytest.raises(LendingError, match="grants"):
        parse_policy({"grants": ["root"]})
    (tmp_path / "policy.toml").write_text('grants = ["call", "ledger"]\nexpires = "2h"\n')
    assert load_policy(tmp_path).grants == ("call", "ledger")


def test_forms_without_a_token_read_flightlog_token_where_they_run() -> None:
    """Rendered without a token, the HTTP forms take it from FLIGHTLOG_TOKEN (what `flightlog run`
    sets): `${FLIGHTLOG_TOKEN}` in JSON forms, `$FLIGHTLOG_TOKEN` expanded by the shell in curl, the
    environment in the snippets; the link carries none."""
    out = forms(tool("weather", {"method": "GET", "url": "https://w.example"}), {})
    assert out["dispatch"]["headers"]["authorization"] == "Bearer ${FLIGHTLOG_TOKEN}"
    assert out["mcp_http"]["headers"] == {"authorization": "Bearer ${FLIGHTLOG_TOKEN}"}
    assert '-H "authorization: Bearer $FLIGHTLOG_TOKEN"' in out["curl"]["command"]
    assert 'os.environ["FLIGHTLOG_TOKEN"]' in out["python"]["code"]
    assert "process.env.FLIGHTLOG_TOKEN" in out["javascript"]["code"]
    assert "token=" not in out["url"]["url"] and "env" not in out["mcp_stdio"]["server"]
