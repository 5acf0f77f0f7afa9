"""Replay: a recorded request sent again to a real local server, secrets filled for the wire only,
the new exchange recorded with its parent, and the answers' status, headers and body diffed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from readback.errors import ReplayError
from readback.replay import fill_body, replay, retarget
from storage.ledger import Ledger
from tests.browse.recorded_exchanges import head, record
from tests.browse.upstream import Reply, Seen, upstream
from tests.support.terminal import obeyable

CANARY = "sk-canary-7f3a9c21e5"
RECORDED_BODY = b'{"q": 1, "token": "[API_KEY]"}'


def answer(seen: Seen) -> Reply:
    """Echo what arrived, so the test sees the filled values, and differ from the recording a little."""
    auth = dict(seen.fields).get("Authorization", "")
    doc = {"count": 2, "ok": True, "echo": json.loads(seen.body), "auth": auth}
    return Reply(201, [("Content-Type", "application/json"), ("X-Version", "2")], json.dumps(doc).encode())


def recorded(ledger: Ledger) -> str:
    """A request recorded to a host that is gone, its API key replaced by [API_KEY] everywhere."""
    return record(
        ledger,
        method="POST",
        url="http://api.gone.test/v1/things?key=[API_KEY]&page=2",
        request_head=head(
            "POST /v1/things?key=[API_KEY]&page=2 HTTP/1.1",
            [
                ("Host", "api.gone.test"),
                ("Authorization", "Bearer [API_KEY]"),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(RECORDED_BODY))),
                ("X-Trace", "a"),
                ("X-Trace", "b"),
                ("X-Flightlog-Session", "s9"),
            ],
        ),
        request_body=RECORDED_BODY,
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "application/json"), ("X-Version", "1")]),
        response_body=b'{"ok": true, "count": 1, "echo": {"q": 1, "token": "[API_KEY]"}, "auth": "x"}',
        redacted=("API_KEY",),
    )


def test_replay_fills_secrets_records_the_new_exchange_and_diffs_the_answers(ledger: Ledger) -> None:
    """The server gets the secret values; the Ledger gets only names; the diff shows status, headers, body."""
    original = recorded(ledger)
    with upstream(answer) as up:
        result = replay(ledger, original, {"API_KEY": CANARY}, to=up.url)
    seen = up.seen[0]
    assert seen.request_line == f"POST /v1/things?key={CANARY}&page=2 HTTP/1.1"
    assert ("Authorization", f"Bearer {CANARY}") in seen.fields
    assert [v for n, v in seen.fields if n == "X-Trace"] == ["a", "b"]
    assert "User-Agent" not in dict(seen.fields)  # nothing added that the recording did not have
    assert "X-Flightlog-Session" not in dict(seen.fields)  # the proxy strips these; so does replay
    assert json.loads(seen.body) == {"q": 1, "token": CANARY}

    diff = result.diff
    assert diff.status == ("200 OK", "201 Created")
    assert "-X-Version: 1" in diff.headers and "+X-Version: 2" in diff.headers
    assert '-  "count": 1,' in diff.body and '+  "count": 2,' in diff.body
    assert not any(CANARY in line for line in diff.body)  # the echoed secret is a name in the diff too
    assert not diff.same

    events = {e.kind: e for e in ledger.action(result.action_id)}
    assert set(events) == {"http.request", "http.response"}
    assert all(e.parent == original for e in events.values())
    request, response = events["http.request"], events["http.response"]
    assert request.url == f"{up.url}/v1/things?key=[API_KEY]&page=2" and request.redacted == ("API_KEY",)
    assert b"Authorization: Bearer [API_KEY]" in request.head
    assert response.status == 201 and b"X-Version: 2" in response.head
    assert request.payload_sha256 and ledger.payload(request.payload_sha256) == RECORDED_BODY
    assert response.payload_sha256
    stored = ledger.payload(response.payload_sha256)
    assert CANARY.encode() not in stored + request.head + response.head
    assert "API_KEY" in response.redacted


def test_replay_of_identical_answer_is_the_same(ledger: Ledger) -> None:
    """A server answering exactly what was recorded gives an empty diff."""
    body = b'{"b": 1, "a": [1, 2]}'
    original = record(
        ledger,
        method="GET",
        url="http://old.test/same",
        request_head=head("GET /same HTTP/1.1", [("Host", "old.test")]),
        response_head=head(
            "HTTP/1.0 200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        ),
        response_body=body,
    )
    with upstream(lambda _: Reply(200, [("Content-Type", "application/json")], b'{"a":[1,2],"b":1}')) as up:
        result = replay(ledger, original, {}, to=up.url)
    assert result.diff.status == ("200 OK", "200 OK")
    assert result.diff.body == ()  # JSON compared pretty-printed: key order and spacing do not count


def test_browser_replay_hook_replays_in_process(ledger: Ledger) -> None:
    """The replay `flightlog browse` hands the browser sends the recorded request again in this
    process, records the new exchange in the Ledger the browser reads, and returns what
    `flightlog replay` prints."""
    from flightlog.commands.browse import replayer

    with upstream(lambda _: Reply(200, [("Content-Type", "text/plain")], b"again")) as up:
        host = up.url.split("//", 1)[1]
        original = record(
            ledger,
            method="GET",
            url=f"{up.url}/again",
            request_head=head("GET /again HTTP/1.1", [("Host", host)]),
            response_head=head("HTTP/1.1 200 OK", [("Content-Type", "text/plain")]),
            response_body=b"again",
        )
        text = replayer(ledger)(original)
    assert len(up.seen) == 1
    first = text.splitlines()[0]
    assert first.startswith(f"replayed {original} as ") and first.endswith(f"{up.url}/again")
    new_action = first.split(" as ", 1)[1].split(":", 1)[0]
    kept = ledger.action(new_action)
    assert [e.kind for e in kept] == ["http.request", "http.response"]
    assert all(e.parent == original for e in kept)
    assert uuid.UUID(hex=new_action).version == 7, "a replay's action id is time-ordered, as a flow's is"


def test_replay_refuses_when_a_recorded_secret_has_no_value(ledger: Ledger) -> None:
    """Without the secret's value, nothing is sent and the error names the missing [NAME]."""
    original = recorded(ledger)
    with upstream(answer) as up, pytest.raises(ReplayError, match=r"\[API_KEY\]"):
        replay(ledger, original, {}, to=up.url)
    assert up.seen == []


def test_replay_of_an_unknown_action_says_so(ledger: Ledger) -> None:
    with pytest.raises(ReplayError, match="no recorded HTTP request"):
        replay(ledger, "nope", {})


def test_unreachable_target_is_recorded_as_an_error_answer(ledger: Ledger) -> None:
    """A refused connection becomes the new exchange's answer event with its error, and the diff says so."""
    original = recorded(ledger)
    result = replay(ledger, original, {"API_KEY": CANARY}, to="http://127.0.0.1:9")
    assert result.diff.status[1].startswith("no answer (ConnectError")
    response = next(e for e in ledger.action(result.action_id) if e.kind == "http.response")
    assert response.status is None and response.error and response.parent == original


def test_retarget_and_fill_body() -> None:
    """--to keeps path and query; names inside a gzip body are filled and the body re-encoded."""
    import gzip

    assert retarget("https://a.test/v1/x?y=1", "http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1/x?y=1"
    assert retarget("https://a.test/x", "http://h:1/prefix/") == "http://h:1/prefix/x"
    zipped = gzip.compress(b'{"k": "[K]"}')
    assert gzip.decompress(fill_body(zipped, "gzip", {"K": "value"})) == b'{"k": "value"}'
    assert fill_body(b"[OTHER] stays", None, {"K": "v"}) == b"[OTHER] stays"


def test_fill_body_inside_stacked_codings() -> None:
    """A body recorded under stacked codings (`gzip, br`) gets its secrets back inside both, re-encoded
    in the same order; one whose coding cannot be undone is sent as recorded."""
    import gzip

    import brotli

    stacked = brotli.compress(gzip.compress(b'{"k": "[K]"}'))
    filled = fill_body(stacked, "gzip, br", {"K": "value"})
    assert gzip.decompress(brotli.decompress(filled)) == b'{"k": "value"}'
    assert fill_body(b"\x00[K] opaque", "compress", {"K": "v"}) == b"\x00v opaque"  # plain text filled
    unknown = gzip.compress(b"[K]")
    assert fill_body(unknown, "compress", {"K": "v"}) == unknown


def test_replay_command_prints_the_diff_and_json(sqlite_ledger: Ledger, home: Path, tmp_path: Path) -> None:
    """`flightlog replay ACTION --to URL --secrets FILE` prints the diff; --json is machine-readable."""
    ledger = sqlite_ledger
    original = recorded(ledger)
    secrets = tmp_path / "secrets.env"
    secrets.write_text(f"API_KEY={CANARY}\n")
    env = {**os.environ, "FLIGHTLOG_LEDGER": ledger.url, "FLIGHTLOG_BLOBS": (tmp_path / "blobs").as_uri()}
    base = [sys.executable, "-m", "flightlog", "replay", original, "--secrets", str(secrets)]
    with upstream(answer) as up:
        text = subprocess.run([*base, "--to", up.url], capture_output=True, text=True, env=env, timeout=60)
        data = subprocess.run(
            [*base, "--to", up.url, "--json"], capture_output=True, text=True, env=env, timeout=60
        )
        from_env = subprocess.run(
            [
                sys.executable,
                "-m",
                "flightlog",
                "replay",
                original,
                "--secret-env",
                "API_KEY",
                "--to",
                up.url,
            ],
            capture_output=True,
            text=True,
            env={**env, "API_KEY": CANARY},
            timeout=60,
        )
    assert from_env.returncode == 0, from_env.stderr
    assert json.loads(up.seen[2].body) == {"q": 1, "token": CANARY}
    assert text.returncode == 0, text.stderr
    assert "status: 200 OK -> 201 Created" in text.stdout and "+X-Version: 2" in text.stdout
    assert data.returncode == 0, data.stderr
    doc = json.loads(data.stdout)
    assert doc["original"] == original and doc["status"] == {"recorded": "200 OK", "replayed": "201 Created"}
    assert not doc["same"] and doc["replay"] != original

    missing = subprocess.run(
        [sys.executable, "-m", "flightlog", "replay", original, "--to", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith("flightlog: the recorded request has [API_KEY]")
    no_proxy = subprocess.run([*base, "--via-proxy"], capture_output=True, text=True, env=env, timeout=60)
    assert no_proxy.returncode == 1
    assert no_proxy.stderr.startswith("flightlog: no flightlog proxy with a forward listener is running")


def test_replay_shows_what_a_hostile_upstream_answered_without_obeying_it(
    sqlite_ledger: Ledger, tmp_path: Path
) -> None:
    """The replayed answer comes from whatever now serves that URL. Its body lines went into the
    printed diff as they were, escape sequences and all (a title set, a line rewritten on the
    operator's terminal); they are shown as `\\xHH` now, and `--json` still gives them exactly."""
    hostile = b"plain \x1b]0;PWNED\x07 text\n\x1b[2K\rfine"
    original = record(
        sqlite_ledger,
        method="GET",
        url="http://api.gone.test/page",
        request_head=head("GET /page HTTP/1.1", [("Host", "api.gone.test")]),
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "text/plain")]),
        response_body=b"plain text\n",
    )
    env = {
        **os.environ,
        "FLIGHTLOG_LEDGER": sqlite_ledger.url,
        "FLIGHTLOG_BLOBS": (tmp_path / "blobs").as_uri(),
    }
    base = [sys.executable, "-m", "flightlog", "replay", original]
    with upstream(lambda seen: Reply(200, [("Content-Type", "text/plain")], hostile)) as up:
        text = subprocess.run([*base, "--to", up.url], capture_output=True, text=True, env=env, timeout=60)
        data = subprocess.run(
            [*base, "--to", up.url, "--json"], capture_output=True, text=True, env=env, timeout=60
        )
    assert text.returncode == 0, text.stderr
    assert "+plain \\x1b]0;PWNED\\x07 text" in text.stdout and "+\\x1b[2K\n+fine" in text.stdout
    assert not obeyable(text.stdout)
    assert "+plain \x1b]0;PWNED\x07 text" in json.loads(data.stdout)["body_diff"]


def test_a_replayed_model_call_is_recorded_with_its_model_tokens_cost_and_identity(ledger: Ledger) -> None:
    """A recorded OpenAI chat call replayed against a local stand-in: the new answer event carries
    the model, tokens and cost read from the new answer (priced by the shipped table, as capture
    would), and both new events the original's session and task."""
    from tests.support.upstream import upstream as model_api

    asked = b'{"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}'
    original = record(
        ledger,
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_head=head(
            "POST /v1/chat/completions HTTP/1.1",
            [
                ("Host", "api.openai.com"),
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(asked))),
            ],
        ),
        request_body=asked,
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "application/json")]),
        response_body=b'{"choices": []}',
        session="s-replay",
        task="t-7",
    )
    with model_api() as up:
        result = replay(ledger, original, {}, to=up.base)
    events = {e.kind: e for e in ledger.action(result.action_id)}
    request, response = events["http.request"], events["http.response"]
    assert (response.model, response.tokens_in, response.tokens_out) == ("gpt-4o-mini", 11, 7)
    assert response.cost_usd is not None and response.cost_usd > 0
    assert {(e.session, e.task) for e in (request, response)} == {("s-replay", "t-7")}
