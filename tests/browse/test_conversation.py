"""Model calls read as conversations, without a terminal: every API, streamed or not, and cut streams."""

from __future__ import annotations

import json

from formats.answers import read_answer
from formats.conversation import conversation, conversation_api
from tests.browse import conversations as c
from tui.conversation_text import answer_text, blocks, stopped


def test_api_is_read_from_the_path() -> None:
    """Any host speaking these paths is read (OpenAI-compatible servers too); other paths, and model
    APIs whose calls are no conversation (embeddings), are not."""
    assert conversation_api("https://api.openai.com/v1/chat/completions") == "openai.chat"
    assert conversation_api("http://127.0.0.1:8000/v1/chat/completions?x=1") == "openai.chat"
    assert conversation_api("https://api.openai.com/v1/responses") == "openai.responses"
    assert conversation_api("https://api.anthropic.com/v1/messages") == "anthropic.messages"
    assert conversation_api("https://api.openai.com/v1/embeddings") is None
    assert conversation("https://api.github.com/repos", b"{}", b"{}") is None
    assert conversation("https://api.openai.com/v1/chat/completions", b"not json", b"") is None


def test_streamed_answer_reads_as_the_whole_answer_openai_chat() -> None:
    """The conversation of a streamed OpenAI chat answer has the same text, stop and usage as the
    non-streamed answer of the same exchange."""
    url, request = "https://api.openai.com/v1/chat/completions", json.dumps(c.C2_REQUEST).encode()
    whole = conversation(url, request, json.dumps(c.OPENAI_WHOLE).encode())
    streamed = conversation(url, request, c.OPENAI_STREAM)
    assert whole is not None and streamed is not None
    assert answer_text(streamed.answer) == answer_text(whole.answer) == c.ANSWER_TEXT
    assert (streamed.answer.stop, streamed.answer.tokens_in, streamed.answer.tokens_out) == ("stop", 190, 12)
    assert streamed.answer.streamed and streamed.answer.complete and not whole.answer.streamed
    assert streamed.messages == whole.messages


def test_streamed_answer_reads_as_the_whole_answer_anthropic() -> None:
    """An Anthropic stream is put back together into the same text and tool call as the whole body."""
    whole = read_answer("anthropic.messages", json.dumps(c.ANTHROPIC_WHOLE).encode())
    streamed = read_answer("anthropic.messages", c.ANTHROPIC_STREAM)
    assert whole is not None and streamed is not None
    assert answer_text(streamed) == answer_text(whole)
    assert streamed.tool_calls[0].name == "get_weather" and json.loads(streamed.tool_calls[0].arguments) == {
        "city": "Paris"
    }
    assert (streamed.stop, streamed.tokens_in, streamed.tokens_out) == ("tool_use", 80, 30)
    assert stopped(streamed, partial=False) == ""


def test_streamed_answer_reads_as_the_whole_answer_openai_responses() -> None:
    """A responses stream reads as its completed response; without it, as the deltas it carried."""
    events: list[dict[str, object]] = [
        {"type": "response.output_text.delta", "delta": "Hi"},
        {"type": "response.output_text.delta", "delta": "."},
        {"type": "response.completed", "response": c.RESPONSES_ANSWER},
    ]
    stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
    whole = read_answer("openai.responses", json.dumps(c.RESPONSES_ANSWER).encode())
    streamed = read_answer("openai.responses", stream)
    assert whole is not None and streamed is not None
    assert answer_text(streamed) == answer_text(whole) == "Hi."
    cut = read_answer("openai.responses", b"\n\n".join(stream.split(b"\n\n")[:2]) + b"\n\n")
    assert cut is not None and cut.text == "Hi." and not cut.complete


def test_request_side_system_messages_tools_and_results() -> None:
    """The system prompt, each message by role, the tool calls made, their results and the tools offered."""
    conv = conversation(
        "https://api.openai.com/v1/chat/completions", json.dumps(c.C2_REQUEST).encode(), c.OPENAI_STREAM
    )
    assert conv is not None
    assert conv.system == "You are a terse assistant." and conv.model == "gpt-4o-mini"
    assert [m.role for m in conv.messages] == ["user", "assistant", "tool"]
    assert conv.messages[1].tool_calls[0].name == "get_weather"
    assert conv.messages[2].answers == "call_1" and "sunny" in conv.messages[2].text
    assert [name for name, _ in conv.tools] == ["get_weather", "github.get_repo"]
    anthropic = conversation(
        "https://api.anthropic.com/v1/messages", json.dumps(c.ANTHROPIC_REQUEST).encode(), c.ANTHROPIC_CUT
    )
    assert anthropic is not None and anthropic.system == "Answer with the weather tool."


def test_a_cut_stream_says_where_it_stopped() -> None:
    """A partial Anthropic stream keeps what arrived (text, the tool call begun) and says it stopped."""
    conv = conversation(
        "https://api.anthropic.com/v1/messages", json.dumps(c.ANTHROPIC_REQUEST).encode(), c.ANTHROPIC_CUT
    )
    assert conv is not None
    assert conv.answer.text == "Checking Paris." and not conv.answer.complete
    where = stopped(conv.answer, partial=True)
    assert "partial: the stream stopped after 7 server-sent events" in where
    assert "1 tool call" in where


def test_blocks_name_directory_rows_usage_and_cost() -> None:
    """The tab's blocks: tools offered with their Directory row where one matches, the answer with the
    Ledger's tokens and cost, written with significant digits."""
    conv = conversation(
        "https://api.openai.com/v1/chat/completions",
        json.dumps(c.C1_REQUEST).encode(),
        json.dumps(c.C1_ANSWER).encode(),
    )
    assert conv is not None
    out = blocks(
        conv,
        {"github.get_repo": "tool/github.get_repo", "get_weather": None},
        partial=False,
        cost=0.0000315,
        tokens=(150, 15),
    )
    by_title = {b.title.split(" (")[0]: b for b in out}
    tools = by_title["tools offered"].text
    assert "github.get_repo — Read a repository  [Directory: tool/github.get_repo]" in tools
    assert "get_weather — Weather for a city  [no Directory row]" in tools
    answer = next(b for b in out if b.kind == "answer")
    assert '→ get_weather({"city": "Paris"})  [call_1]' in answer.text
    assert "tokens 150→15" in answer.title and "$0.00003" in answer.title
    assert "stopped" not in by_title
    no_directory = blocks(conv, None, partial=False, cost=None)
    assert "Directory" not in next(b for b in no_directory if b.kind == "tools").text
