"""Writes, deletes, transactions, history and restore, committed through storage on SQLite and PostgreSQL.

Refusal texts are part of the agent API: a refusal a retry fixes ends with `retry with replaces: "H"`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from catalog.agent_api import AgentApi
from catalog.directory import Directory, open_directory
from catalog.errors import BadAlias, BadPath, Indeterminate, Refused, RevisionConflict
from storage.documents import open_document_store, sha256_text
from storage.documents.model import Change
from tests.catalog.conftest import make_folder, row

NOTE = row("Idea", "A first idea.", "Body of the idea.")
RETRY = re.compile(r'retry with replaces: "([0-9a-f]{64})"$')


@pytest.fixture
def native(ledger_url: str) -> Iterator[Directory]:
    """The native Directory (seeded from the starter) in a fresh SQLite or PostgreSQL ledger."""
    d = open_directory(ledger_url)
    yield d
    d.close()


def test_starter_directory_describes_flightlog(native: Directory) -> None:
    """A fresh install is not empty: tool rows for the ledger routes, directory routes and dispatch."""
    names = {r.name for r in native.rows("tool")}
    assert {
        "LEDGER_ROW",
        "LEDGER_ACTION",
        "LEDGER_BLOB",
        "LEDGER_COUNTS",
        "LEDGER_GROUP",
        "LEDGER_QUERY",
    } <= names
    assert {"LEDGER_ASK", "DIRECTORY_MANIFEST", "DIRECTORY_GET", "DIRECTORY_SEARCH", "DISPATCH"} <= names
    dispatch = native.tool("dispatch").frontmatter
    assert dispatch["upstream"]["url"] == "http://flightlog.local/api/dispatch"
    assert dispatch["args"]["required"] == ["tool", "args"]
    assert all(
        native.tool(n).frontmatter["upstream"]["url"].startswith("http://flightlog.local/api/") for n in names
    )
    assert native.revision == 1 and native.history()[0].message == "starter directory"


def test_write_create_then_refusals_carry_the_hash(native: Directory) -> None:
    """Create by omitting replaces; an existing path or a stale hash is refused with the hash to retry."""
    api = AgentApi(native)
    created = api.write("inbox", "idea.md", NOTE)
    first = sha256_text(NOTE)
    assert created.startswith(f"wrote inbox/idea.md (hash {first}), snapshot ")
    assert created.endswith(f"{len(native.rows())} concepts")
    assert native.document("idea").text == NOTE

    with pytest.raises(Refused) as refused:
        api.write("inbox", "idea.md", NOTE + "more\n")
    assert str(refused.value).splitlines() == [
        "refused: inbox/idea.md: concept already exists: re-read the concept and retry with its new hash",
        f'retry with replaces: "{first}"',
    ]
    assert refused.value.retry_hash == first

    second = NOTE + "more\n"
    assert "wrote inbox/idea.md" in api.write("inbox", "idea.md", second, replaces=first)
    with pytest.raises(Refused) as stale:
        api.write("inbox", "idea.md", NOTE, replaces=first)
    assert "changed since it was read" in str(stale.value)
    match = RETRY.search(str(stale.value))
    assert match and match.group(1) == sha256_text(second)
    assert native.document("idea").text == second


def test_delete_needs_the_hash(native: Directory) -> None:
    """Delete without replaces is refused with the hash; a missing concept has no retry line."""
    api = AgentApi(native)
    api.write("inbox", "idea.md", NOTE)
    with pytest.raises(Refused) as refused:
        api.delete("inbox", "idea.md")
    match = RETRY.search(str(refused.value))
    assert match and match.group(1) == sha256_text(NOTE)
    done = api.delete("inbox", "idea.md", match.group(1))
    assert done.startswith("deleted inbox/idea.md, snapshot ")
    with pytest.raises(Refused) as missing:
        api.delete("inbox", "idea.md", match.group(1))
    assert str(missing.value) == "refused: inbox/idea.md: concept does not exist"
    assert "retry" not in str(missing.value)


def test_non_document_paths_are_refused_without_retry(native: Directory) -> None:
    """A path that is not a document of a bundle is refused plainly, with no hash to retry with."""
    for bundle, path in (("inbox", "idea.txt"), ("inbox", "../x.md"), ("", "notes.md"), ("in box", "a.md")):
        with pytest.raises(BadPath) as bad:
            AgentApi(native).write(bundle, path, NOTE)
        assert "retry" not in str(bad.value)


def test_transact_is_all_or_nothing(native: Directory) -> None:
    """One failed precondition commits none of the changes; a clean set commits as one revision."""
    native.write("inbox", "a.md", NOTE)
    head = native.revision
    changes = [
        {"operation": "write", "bundle": "inbox", "path": "b.md", "content": NOTE},
        {"operation": "write", "bundle": "inbox", "path": "a.md", "content": NOTE + "x"},  # no replaces
    ]
    with pytest.raises(Refused) as refused:
        native.transact(changes)
    assert str(refused.value).startswith("nothing committed: 1 precondition(s) failed")
    assert native.revision == head
    assert native.current_hash("inbox", "b.md") is None

    changes[1]["replaces"] = sha256_text(NOTE)
    done = native.transact(changes, expected_revision=head)
    assert (done.revision, done.written, done.deleted) == (head + 1, 2, 0)
    with pytest.raises(RevisionConflict):
        native.transact(
            [{"operation": "delete", "bundle": "inbox", "path": "b.md", "replaces": sha256_text(NOTE)}], head
        )
    with pytest.raises(BadPath, match="changed twice"):
        native.transact([changes[0], changes[0]])
    with pytest.raises(BadPath, match="1 to 1000"):
        native.transact([])


def test_history_and_restore(native: Directory) -> None:
    """History lists revisions newest first; restore makes a new revision equal to an older one."""
    before = native.snapshot()
    native.write("inbox", "a.md", NOTE)
    native.write("inbox", "b.md", NOTE)
    assert [r.revision for r in native.history()] == [3, 2, 1]
    assert [r.revision for r in native.history(before=3, limit=1)] == [2]
    with pytest.raises(RevisionConflict):
        native.restore(1, expected_revision=2)
    done = native.restore(1, expected_revision=3)
    assert done.revision == 4 and done.deleted == 2
    assert native.snapshot().digest == before.digest
    assert [r.revision for r in native.history()][:2] == [4, 3]  # never rewritten
    assert native.history()[0].parent == 3
    text = AgentApi(native).history(limit=2)
    assert text.splitlines()[-1] == "# next: r3"
    assert AgentApi(native).history(before="r3", limit=5).splitlines()[1].startswith("2\t1\t")


def test_snapshot_is_a_digest_of_content(native: Directory) -> None:
    """Identical content gives the same digest; any change moves it."""
    s1 = native.snapshot()
    assert re.fullmatch(r"[0-9a-f]{64}", s1.digest) and s1.concepts == len(native.rows())
    native.write("inbox", "a.md", NOTE)
    s2 = native.snapshot()
    native.delete("inbox", "a.md", sha256_text(NOTE))
    assert s2.digest != s1.digest and native.snapshot().digest == s1.digest
    assert AgentApi(native).snapshot() == f"snapshot {s1.digest}, {s1.concepts} concepts, revision 3"


def test_indeterminate_commit_offers_no_retry(
    native: Directory, ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When COMMIT's answer is lost (here it landed, then the driver reported the connection gone)
    the answer says it may have landed and carries no retry line."""
    import sqlite3

    import psycopg

    from storage.documents import writes as document_writes

    real = document_writes._commit
    lost = sqlite3.OperationalError if ledger_url.startswith("sqlite") else psycopg.OperationalError

    def answer_lost(conn: object) -> None:
        real(conn)
        raise lost("connection lost")

    monkeypatch.setattr(document_writes, "_commit", answer_lost)
    with pytest.raises(Indeterminate) as unknown:
        AgentApi(native).write("inbox", "a.md", NOTE)
    assert "may or may not have landed" in str(unknown.value)
    assert "retry with" not in str(unknown.value)


def test_alias_cannot_lose_its_last_row(tmp_path: Path) -> None:
    """Deleting the only row an alias names is refused, naming the alias; aliases.toml may change with it."""
    folder = make_folder(tmp_path / "d")
    d = open_directory(f"sqlite:///{tmp_path / 'l.db'}", folder)
    try:
        text = (folder / "tool" / "ledger_row.md").read_text()
        with pytest.raises(BadAlias, match='alias "log"'):
            d.delete("tool", "ledger_row.md", sha256_text(text))
        aliases = (folder / "aliases.toml").read_text()
        d.transact(
            [
                {
                    "operation": "delete",
                    "bundle": "tool",
                    "path": "ledger_row.md",
                    "replaces": sha256_text(text),
                },
                {
                    "operation": "write",
                    "bundle": "",
                    "path": "aliases.toml",
                    "content": 'imessage = ["IMSG_*"]\n',
                    "replaces": sha256_text(aliases),
                },
            ]
        )
        assert not (folder / "tool" / "ledger_row.md").exists()
        assert d.aliases == {"imessage": ("IMSG_*",)}
    finally:
        d.close()


def test_concurrent_writers_never_lose_an_update(ledger_url: str) -> None:
    """Eight writers replace the same version at once: exactly one commits, the others are refused
    with the winner's hash, on SQLite and PostgreSQL alike."""
    from concurrent.futures import ThreadPoolExecutor

    first = open_directory(ledger_url)
    try:
        first.write("inbox", "race.md", NOTE)
        base = sha256_text(NOTE)

        def attempt(n: int) -> str:
            d = open_directory(ledger_url)
            try:
                d.write("inbox", "race.md", NOTE + f"writer {n}\n", replaces=base)
                return "ok"
            except Refused as e:
                return e.retry_hash or "no hash"
            finally:
                d.close()

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(attempt, range(8)))
        winner = first.current_hash("inbox", "race.md")
        assert outcomes.count("ok") == 1
        assert sorted(o for o in outcomes if o != "ok") == [winner] * 7
    finally:
        first.close()


def test_a_commits_statements_do_not_grow_with_its_changes(ledger_url: str) -> None:
    """A revision of many documents writes its tree entries as one delete and one insert (an
    executemany each), not a statement per document: committing a 25k-row folder one statement at
    a time held SQLite's write lock for ~3 s, and every proxy recording into the same Ledger
    waited that long to commit. Checked by counting the statements sent for commits of 10 and of
    400 new documents, then of 400 replaced and 400 deleted ones: the counts do not depend on how
    many, and every document is committed as asked."""
    store = open_document_store(ledger_url, "space:statements")
    sent: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *args: sent.append(args[2]))

    def commit(changes: list[Change]) -> int:
        sent.clear()
        store.commit(changes)
        return len(sent)

    def writes(bundle: str, n: int, text: str) -> list[Change]:
        return [Change(bundle, f"d{i}.md", f"{text} {i}", check=False) for i in range(n)]

    small, large = commit(writes("few", 10, "a")), commit(writes("many", 400, "a"))
    replaced = commit(writes("many", 400, "b"))
    assert store.tree("many") == {("many", f"d{i}.md"): sha256_text(f"b {i}") for i in range(400)}
    deleted = commit([Change("many", f"d{i}.md", None, check=False) for i in range(400)])
    assert store.tree("many") == {}
    assert store.tree("few") == {("few", f"d{i}.md"): sha256_text(f"a {i}") for i in range(10)}
    assert large <= small + 2, (small, large)  # the documents' lookups come 500 to a query
    assert replaced <= small + 2 and deleted <= small + 2, (small, replaced, deleted)
    store.close()


@pytest.mark.parametrize(
    ("path", "content"),
    [("a\ud800.md", NOTE), ("a.md", NOTE + "\ud83d"), ("a.md", NOTE + "\x00")],
    ids=["surrogate-path", "surrogate-content", "nul-content"],
)
def test_a_write_of_what_no_store_keeps_as_text_is_refused_in_one_line(
    native: Directory, path: str, content: str
) -> None:
    """A lone surrogate (valid in JSON, `"\\ud800"`, from any agent) or a NUL is refused before
    anything is written, the same on both engines, in one ASCII line; it was an uncaught
    UnicodeEncodeError (SQLite) or a driver error (PostgreSQL)."""
    head = native.history(limit=1)[0].revision
    with pytest.raises(BadPath) as refused:
        AgentApi(native).write("inbox", path, content)
    said = str(refused.value)
    assert said.startswith("refused:") and said.isascii() and "\n" not in said
    assert native.history(limit=1)[0].revision == head
