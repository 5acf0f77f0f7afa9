"""serve-replay: a hermetic proxy answers the openai SDK's streamed chat completion from the Ledger,
refuses what it has no answer for, never opens an upstream connection, and reports divergences."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from addons.serve_replay import Conceal, Matcher, ServeReplay, answer_fields, build_master
from readback.recorded import Selection, iter_exchanges, select_action_ids
from storage.ledger import Ledger
from tests.browse.recorded_exchanges import head, record
from tests.browse.upstream import Reply, Seen, upstream
from tests.support.serve_replay import serve_replay as serve_replay_command

OPENAI = "https://api.openai.com/v1"
WORDS = ["Hello", " from", " the", " Ledger", "."]


def sse_chunks() -> list[bytes]:
    """An OpenAI streamed chat completion with usage, one SSE event per chunk, as the API sends it."""

    def chunk(delta: dict[str, str], finish: str | None = None) -> dict[str, object]:
        return {
            "id": "chatcmpl-r1",
            "object": "chat.completion.chunk",
            "created": 1764460800,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    docs: list[dict[str, object]] = [chunk({"role": "assistant", "content": ""})]
    docs += [chunk({"content": w}) for w in WORDS]
    docs.append(chunk({}, "stop"))
    usage = {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}
    docs.append({**chunk({}), "choices": [], "usage": usage})
    return [b"data: " + json.dumps(d).encode() + b"\n\n" for d in docs] + [b"data: [DONE]\n\n"]


def ask(client: openai.OpenAI, content: str = "Say hello") -> openai.Stream:  # type: ignore[type-arg]
    return client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": content}],
        stream=True,
        stream_options={"include_usage": True},
    )


def recorded_chat(ledger: Ledger) -> str:
    """Run the SDK once against a real local server and record that exchange as capture would."""
    chunks = sse_chunks()
    fields = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
    with upstream(lambda _: Reply(200, fields, chunks=chunks)) as up:
        client = openai.OpenAI(api_key="sk-test", base_url=f"{up.url}/v1", max_retries=0)
        assert "".join(c.choices[0].delta.content or "" for c in ask(client) if c.choices) == "".join(WORDS)
        client.close()
    seen: Seen = up.seen[0]
    fields_seen = [(n, "api.openai.com" if n.lower() == "host" else v) for n, v in seen.fields]
    return record(
        ledger,
        method="POST",
        url=f"{OPENAI}/chat/completions",
        request_head=head(seen.request_line, fields_seen),
        request_body=seen.body,
        response_head=head("HTTP/1.1 200 OK", [*fields, ("Transfer-Encoding", "chunked")]),
        response_body=b"".join(chunks),
    )


@dataclass
class Running:
    addon: ServeReplay
    proxy: str
    ca: str


@contextmanager
def serve_replay(
    ledger: Ledger,
    confdir: Path,
    selection: Selection | None = None,
    chunk_delay: float = 0.0,
    modes: tuple[str, ...] = ("regular",),
    conceal: Conceal | None = None,
) -> Iterator[Running]:
    """Run the serve-replay proxy (mitmproxy's DumpMaster) on a thread until the block ends."""
    ids = select_action_ids(ledger.engine, selection or Selection())
    addon = ServeReplay(
        Matcher(list(iter_exchanges(ledger.engine, ledger.events, ids))), ledger.payload, conceal
    )
    holder: dict[str, object] = {}

    def run() -> None:
        async def main() -> None:
            master = build_master(addon, "127.0.0.1", 0, str(confdir), modes)
            master.options.update(serve_replay_chunk_delay=chunk_delay)
            holder["master"] = master
            await master.run()

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert addon.ready.wait(30), "serve-replay did not start"
    try:
        port = addon.listening[0][1]
        yield Running(addon, f"http://127.0.0.1:{port}", str(confdir / "mitmproxy-ca-cert.pem"))
    finally:
        holder["master"].shutdown()  # type: ignore[attr-defined]
        thread.join(10)


def test_openai_sdk_streams_the_recorded_answer_with_no_network(ledger: Ledger, tmp_path: Path) -> None:
    """The SDK's streamed chat completion over HTTPS gets every recorded chunk and the usage; a second,
    unrecorded call is refused with the refusal status; no upstream connection is ever opened."""
    action = recorded_chat(ledger)
    with serve_replay(ledger, tmp_path / "conf") as running:
        trust = ssl.create_default_context(cafile=running.ca)
        http_client = httpx.Client(proxy=running.proxy, verify=trust, trust_env=False)
        client = openai.OpenAI(api_key="sk-other", base_url=OPENAI, http_client=http_client, max_retries=0)
        chunks = list(ask(client))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "".join(WORDS)
        assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 14
        assert chunks[0].model == "gpt-4o-mini-2024-07-18"

        with pytest.raises(openai.NotFoundError, match="no recorded answer"):
            list(ask(client))  # the one recording was consumed by the first call
        with pytest.raises(openai.NotFoundError, match="nothing was sent to the network"):
            client.embeddings.create(model="text-embedding-3-small", input="x")
        client.close()
    report = running.addon.report
    assert report is not None
    assert report.by_body == [f"POST {OPENAI}/chat/completions"]
    assert report.refused == [f"POST {OPENAI}/chat/completions", f"POST {OPENAI}/embeddings"]
    assert report.unused == [] and report.upstream_blocked == 0
    assert report.to_json()["divergences"] == 2
    assert action


def test_reverse_mode_answers_an_sdk_pointed_at_it_by_base_url(ledger: Ledger, tmp_path: Path) -> None:
    """With `reverse:https://api.openai.com`, an SDK whose base URL is the listener gets the recording."""
    recorded_chat(ledger)
    with serve_replay(ledger, tmp_path / "conf", modes=("reverse:https://api.openai.com",)) as running:
        base = running.proxy + "/v1"  # the listener itself, not a proxy setting
        client = openai.OpenAI(api_key="sk-other", base_url=base, max_retries=0)
        text = "".join(c.choices[0].delta.content or "" for c in ask(client) if c.choices)
        client.close()
    assert text == "".join(WORDS)
    assert running.addon.report is not None
    assert running.addon.report.by_body == [f"POST {OPENAI}/chat/completions"]
    assert running.addon.report.upstream_blocked == 0


def test_recordings_answer_in_order_exact_body_first_then_by_url(ledger: Ledger, tmp_path: Path) -> None:
    """Two recordings of one URL answer two requests in recorded order; a request whose body matches
    neither still gets the next one by method and URL (reported as a divergence); leftovers are named."""
    url = "http://service.test/count"
    ids = []
    for n in (1, 2, 3):
        ids.append(
            record(
                ledger,
                method="POST",
                url=url,
                request_head=head("POST /count HTTP/1.1", [("Host", "service.test")]),
                request_body=b'{"n": %d}' % n,
                response_head=head(
                    "HTTP/1.1 200 OK", [("Content-Type", "text/plain"), ("Content-Length", "1")]
                ),
                response_body=b"%d" % n,
            )
        )
    with (
        serve_replay(ledger, tmp_path / "conf") as running,
        httpx.Client(proxy=running.proxy, trust_env=False) as client,
    ):
        assert client.post(url, content=b'{"n": 2}').text == "2"
        assert client.post(url, content=b'{"n": 9}').text == "1"
        refused = client.get("http://service.test/other")
        assert refused.status_code == 404 and refused.headers["X-Flightlog-Replay"] == "unmatched"
    report = running.addon.report
    assert report is not None
    assert report.by_body == [f"POST {url}"]
    assert report.by_url == [f"POST {url} (recorded action {ids[0]})"]
    assert report.unused == [f"POST {url} (action {ids[2]})"]


def test_streamed_answer_is_played_chunk_by_chunk_at_the_set_pace(ledger: Ledger, tmp_path: Path) -> None:
    """An SSE answer reaches the client event by event: with a 0.2 s pace, five events arrive as five
    pieces spread over at least 0.8 s, and together they are the recorded bytes."""
    events = [b'data: {"n": %d}\n\n' % n for n in range(5)]
    url = "http://stream.test/events"
    record(
        ledger,
        method="GET",
        url=url,
        request_head=head("GET /events HTTP/1.1", [("Host", "stream.test")]),
        response_head=head(
            "HTTP/1.1 200 OK", [("Content-Type", "text/event-stream"), ("Transfer-Encoding", "chunked")]
        ),
        response_body=b"".join(events),
    )
    arrivals: list[tuple[float, bytes]] = []
    with (
        serve_replay(ledger, tmp_path / "conf", chunk_delay=0.2) as running,
        httpx.Client(proxy=running.proxy, trust_env=False) as client,
        client.stream("GET", url) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        for piece in response.iter_raw():
            arrivals.append((time.monotonic(), piece))
    assert b"".join(p for _, p in arrivals) == b"".join(events)
    assert [p for _, p in arrivals] == events
    assert arrivals[-1][0] - arrivals[0][0] >= 0.7
    assert running.addon.report is not None and running.addon.report.upstream_blocked == 0


def test_answer_fields_fit_the_body_served() -> None:
    """Chunked stays chunked for HTTP/1; HTTP/2 clients get a Content-Length and no connection fields."""
    fields = (
        (b"Content-Type", b"text/event-stream"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Connection", b"x"),
    )
    assert answer_fields(fields, 10, http2=False) == (
        (b"Content-Type", b"text/event-stream"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Connection", b"x"),
    )
    assert answer_fields(fields, 10, http2=True) == (
        (b"Content-Type", b"text/event-stream"),
        (b"Content-Length", b"10"),
    )
    assert answer_fields(((b"Content-Length", b"99"),), 3, http2=False) == ((b"Content-Length", b"3"),)


def test_serve_replay_command_matches_secret_requests_and_reports_on_stop(
    sqlite_ledger: Ledger, home: Path, tmp_path: Path
) -> None:
    """`flightlog serve-replay --secrets FILE --json` prints where it listens, answers a request whose
    secret was recorded as [API_KEY] (matched exactly once the live value is spelled as its name),
    refuses the rest, and on SIGINT prints the report as JSON."""
    ledger = sqlite_ledger
    url = "http://api.secret.test/v1/me?key=[API_KEY]"
    action = record(
        ledger,
        method="POST",
        url=url,
        request_head=head("POST /v1/me?key=[API_KEY] HTTP/1.1", [("Host", "api.secret.test")]),
        request_body=b'{"token": "[API_KEY]"}',
        response_head=head("HTTP/1.1 200 OK", [("Content-Type", "application/json")]),
        response_body=b'{"me": "alice"}',
        redacted=("API_KEY",),
        session="s1",
    )
    record(
        ledger,
        method="GET",
        url="http://other.test/",
        request_head=head("GET / HTTP/1.1", [("Host", "other.test")]),
        response_head=head("HTTP/1.1 200 OK", []),
        session="s2",
    )
    secrets = tmp_path / "secrets.env"
    secrets.write_text("API_KEY=sk-live-0123456789\n")
    args = ("--session", "s1", "--secrets", str(secrets))
    with serve_replay_command(ledger.url, (tmp_path / "blobs").as_uri(), *args) as served:
        assert "answering from 1 recorded exchanges" in served.line
        with httpx.Client(proxy=served.proxy_url, trust_env=False) as client:
            live = "http://api.secret.test/v1/me?key=sk-live-0123456789"
            answered = client.post(live, content=b'{"token": "sk-live-0123456789"}')
            assert answered.status_code == 200 and answered.json() == {"me": "alice"}
            assert client.get("http://other.test/").status_code == 404  # session s2 was not selected
    report = served.report
    assert report["matched_exactly"] == 1 and report["refused"] == ["GET http://other.test/"]
    assert report["not_requested"] == [] and report["upstream_connections_blocked"] == 0
    assert action
