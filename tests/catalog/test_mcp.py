"""`flightlog mcp` over stdio, driven by the official MCP client as an agent would."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.catalog.conftest import make_folder, row


def session(folder: Path, home: Path, *extra: str, token: str | None = None) -> StdioServerParameters:
    env = {**os.environ, "FLIGHTLOG_HOME": str(home), "FLIGHTLOG_DIRECTORY": str(folder)}
    if token is not None:
        env["FLIGHTLOG_TOKEN"] = token
    return StdioServerParameters(command=sys.executable, args=["-m", "flightlog", "mcp", *extra], env=env)


def run(params: StdioServerParameters, script: Any) -> Any:
    async def main() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await script(s)

    return anyio.run(main)


def test_tools_in_order_with_annotations_and_advice(tmp_path: Path, home: Path) -> None:
    """The six verbs and `call` in order, reads hinted read-only, the manifest advising; definitions small."""
    folder = make_folder(tmp_path / "d")

    async def script(s: ClientSession) -> Any:
        return await s.list_tools()

    listed = run(session(folder, home), script)
    assert [t.name for t in listed.tools] == [
        "manifest", "search", "get", "snapshot", "write", "delete", "call",
    ]  # fmt: skip
    hints = {t.name: t.annotations for t in listed.tools}
    assert all(hints[n].read_only_hint for n in ("manifest", "search", "get", "snapshot"))
    assert hints["write"].read_only_hint is False and hints["delete"].destructive_hint is True
    manifest = listed.tools[0]
    assert manifest.description.startswith("Call this before anything else.")
    assert "reading it whole is cheaper than searching" in manifest.description
    assert "Pass every id you need in one call" in listed.tools[2].description
    assert listed.tools[2].input_schema["required"] == ["ids"]
    reads = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools[:4]]
    assert len(json.dumps(reads)) / 4 < 1122  # seed 002's four read verbs, bytes/4


def test_database_tools_are_opt_in(tmp_path: Path, home: Path) -> None:
    """--database-tools adds transact, history and restore after the defaults."""

    async def script(s: ClientSession) -> Any:
        return await s.list_tools()

    more = run(session(make_folder(tmp_path / "d"), home, "--database-tools"), script)
    assert [t.name for t in more.tools][7:] == ["transact", "history", "restore"]


def test_a_session_reads_writes_and_is_refused_as_a_result(tmp_path: Path, home: Path) -> None:
    """Calls answer one text block; a refusal is an isError result with the retry hash; reads are
    capped. The session writes with the token it was lent (FLIGHTLOG_TOKEN granting `write`)."""
    folder = make_folder(tmp_path / "d")
    make_folder(folder, {"article/long.md": row("Long", "long", "w" * 20_000)}, aliases=None)

    async def script(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["long"] = await s.call_tool("get", {"ids": ["long"]})
        out["search"] = await s.call_tool("search", {"query": "weather for a city", "k": 2})
        out["nothing"] = await s.call_tool("search", {"query": "zzqx"})
        out["get"] = await s.call_tool("get", {"ids": ["get_weather", "nope"]})
        out["resource"] = await s.read_resource("flightlog://manifest")
        out["manifest"] = await s.call_tool("manifest", {})
        out["create"] = await s.call_tool(
            "write", {"bundle": "inbox", "path": "i.md", "content": row("I", "i")}
        )
        out["again"] = await s.call_tool("write", {"bundle": "inbox", "path": "i.md", "content": "x"})
        retry = out["again"].content[0].text.splitlines()[-1].split('"')[1]
        out["retry"] = await s.call_tool(
            "write", {"bundle": "inbox", "path": "i.md", "content": "x", "replaces": retry}
        )
        out["snapshot"] = await s.call_tool("snapshot", {})
        return out

    out = run(session(folder, home, token=mint(home, "grants = call,write")), script)
    assert out["search"].content[0].text.splitlines()[6].startswith("get_weather\t")
    said = 'Nothing in the Directory is called, or means, "zzqx".'
    assert any(line.startswith(f"# {said}") for line in out["nothing"].content[0].text.splitlines())
    assert out["get"].content[0].text.startswith("@@ get_weather\n---\n")
    assert out["get"].content[0].text.endswith("@@ missing\nnope")
    resource = out["resource"].contents[0]
    assert resource.mime_type == "text/tab-separated-values"
    assert resource.text == out["manifest"].content[0].text
    assert out["create"].is_error is False and out["create"].content[0].text.startswith(
        "wrote inbox/i.md (hash "
    )
    refused = out["again"]
    assert refused.is_error is True
    assert refused.content[0].text.startswith("refused: inbox/i.md: concept already exists")
    assert out["retry"].is_error is False
    assert (folder / "inbox" / "i.md").read_text() == "x"
    assert out["snapshot"].content[0].text.startswith("snapshot ")
    total = len(row("Long", "long", "w" * 20_000))
    assert out["long"].content[0].text.splitlines()[0] == f"@@ long [0..15000 of {total}]"  # the MCP cap


def test_a_session_writes_only_what_its_token_grants(tmp_path: Path, home: Path) -> None:
    """Without FLIGHTLOG_TOKEN the session holds the policy's token (by default: `call` only): a write
    is an isError result naming `grants` and nothing is written; a token for the bundle `inbox`
    writes there and nowhere else (`bundles`); every refusal is filed in the Ledger."""
    folder = make_folder(tmp_path / "d")

    async def script(s: ClientSession) -> list[Any]:
        made = row("I", "i")
        return [
            await s.call_tool("write", {"bundle": "inbox", "path": "i.md", "content": made}),
            await s.call_tool("write", {"bundle": "tool", "path": "i.md", "content": made}),
        ]

    policy = run(session(folder, home), script)
    assert [r.is_error for r in policy] == [True, True]
    assert all(r.content[0].text.startswith("refused by grants:") for r in policy), policy
    inbox = run(session(folder, home, token=mint(home, "grants = write", "bundles = inbox")), script)
    assert [r.is_error for r in inbox] == [False, True]
    assert inbox[1].content[0].text.startswith("refused by bundles:")
    assert (folder / "inbox" / "i.md").exists() and not (folder / "tool" / "i.md").exists()

    from storage.ledger import open_ledger

    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    with ledger.engine.connect() as conn:
        errors = [
            r[0] for r in conn.exec_driver_sql("SELECT error FROM events WHERE kind = 'dispatch.refused'")
        ]
    ledger.close()
    assert sorted(e.partition(":")[0] for e in errors) == ["bundles", "grants", "grants"]


def mint(home: Path, *caveats: str) -> str:
    from authority import tokens

    return tokens.mint(tokens.root_key(home), list(caveats)).encode()


def test_call_runs_a_row_through_the_door_and_records_it(home: Path) -> None:
    """The `call` tool (what the contracts' MCP forms name) dispatches a starter row; a refusal is isError."""
    env = {k: v for k, v in os.environ.items() if k != "FLIGHTLOG_DIRECTORY"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "flightlog", "mcp"], env={**env, "FLIGHTLOG_HOME": str(home)}
    )

    async def script(s: ClientSession) -> Any:
        ok = await s.call_tool("call", {"tool": "DIRECTORY_SNAPSHOT", "args": {}})
        refused = await s.call_tool("call", {"tool": "NO_SUCH_TOOL", "args": {}})
        return ok, refused

    ok, refused = run(params, script)
    reply = json.loads(ok.content[0].text)
    assert ok.is_error is False and reply["ok"] is True and reply["action_id"]
    assert refused.is_error is True and json.loads(refused.content[0].text)["ok"] is False

    from storage.ledger import open_ledger

    ledger = open_ledger(f"sqlite:///{home / 'ledger.db'}", (home / "blobs").as_uri())
    events = ledger.action(reply["action_id"])
    assert {e.kind for e in events} >= {"dispatch.call", "dispatch.reply"}
    assert all(e.tool == "DIRECTORY_SNAPSHOT" for e in events)


def test_a_session_outlives_its_policy_token(tmp_path: Path, home: Path, monkeypatch: Any) -> None:
    """`flightlog mcp` without FLIGHTLOG_TOKEN acts with a token minted from the policy; when that
    token lapses the session mints another instead of refusing every verb with `expires`."""
    import time

    from flightlog.commands.agent_api import StdioDoor

    monkeypatch.delenv("FLIGHTLOG_TOKEN", raising=False)
    monkeypatch.setenv("FLIGHTLOG_DIRECTORY", str(make_folder(tmp_path / "d")))
    home.mkdir(parents=True, exist_ok=True)
    (home / "policy.toml").write_text('expires = "1s"\n')
    door = StdioDoor(None, None, None)
    first = door._door()[1]
    door.authorize("read", "manifest", {})
    time.sleep(1.2)
    door.authorize("read", "manifest", {})  # refused by `expires` before the token was minted again
    assert door._door()[1] != first
