"""Matching strategies and the volatile-part rules, as pure functions (no proxy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from readback.matching import (
    MatchingError,
    Request,
    default_rules,
    differences,
    key,
    load_rules,
    miss_line,
    parse_strategies,
)

URL = "http://127.0.0.1:9/v1/chat/completions"


def chat(content: str, call_id: str = "call_AbCdEf123456", **extra: object) -> Request:
    doc = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": content},
            {"role": "assistant", "tool_calls": [{"id": call_id, "type": "function"}]},
            {"role": "tool", "tool_call_id": call_id, "content": "18C"},
        ],
        **extra,
    }
    return Request("POST", URL, ((b"Content-Type", b"application/json"),), json.dumps(doc).encode())


def test_exact_is_bytes_and_normalized_ignores_tool_call_ids_and_stream_options() -> None:
    """Two runs differing only in the tool-call id and `stream_options` share the normalized key, not
    the exact one; a changed prompt changes both."""
    rules = default_rules()
    a = chat("weather?", "call_AAAAAAAAAAAA")
    b = chat("weather?", "call_BBBBBBBBBBBB", stream_options={"include_usage": True})
    assert key("exact", a, rules) != key("exact", b, rules)
    assert key("normalized", a, rules) == key("normalized", b, rules)
    assert key("normalized", a, rules) != key("normalized", chat("weather in Rome?"), rules)


def test_placeholders_keep_which_id_is_which() -> None:
    """Ids are numbered by first appearance: swapping which message carries which id is a difference."""
    rules = default_rules()
    one = {"a": "call_111111111", "b": "call_222222222"}
    two = {"a": "call_222222222", "b": "call_111111111"}
    swapped = {"a": "call_111111111", "b": "call_111111111"}
    req = lambda d: Request("POST", URL, (), json.dumps(d).encode())  # noqa: E731
    assert key("normalized", req(one), rules) == key("normalized", req(two), rules)
    assert key("normalized", req(one), rules) != key("normalized", req(swapped), rules)


def test_header_order_never_matters_and_listed_headers_must_agree(tmp_path: Path) -> None:
    """With `headers = ["x-team"]`, the header's value counts, the fields' order does not."""
    path = tmp_path / "rules.toml"
    path.write_text('headers = ["X-Team"]\n')
    rules = load_rules(path)
    assert "stream_options" in rules.drop_keys  # a key left out keeps the shipped default
    a = Request("GET", URL, ((b"X-Team", b"red"), (b"Accept", b"*/*")))
    b = Request("GET", URL, ((b"accept", b"*/*"), (b"x-team", b"red")))
    c = Request("GET", URL, ((b"x-team", b"blue"),))
    assert key("normalized", a, rules) == key("normalized", b, rules)
    assert key("normalized", a, rules) != key("normalized", c, rules)


def test_miss_line_names_the_closest_request_and_the_difference() -> None:
    """A changed prompt: the line names the recorded request and the body path that changed, both values."""
    rules = default_rules()
    recorded = [Request("GET", "http://127.0.0.1:9/health"), chat("weather in Paris?")]
    line = miss_line(chat("weather in Rome?"), recorded, ["health (action h)", "chat (action c)"], rules)
    assert "closest recorded: chat (action c)" in line
    assert 'body messages[0].content is "weather in Paris?" there, "weather in Rome?" here' in line
    assert differences(recorded[1], chat("weather in Paris?", "call_ZZZZZZZZZZZZ"), rules) == []


def test_bad_strategies_and_rules_are_one_clear_error(tmp_path: Path) -> None:
    """An unknown strategy, an unknown rule key and a broken regex are refused with a message."""
    assert parse_strategies("exact,sequence") == ("exact", "sequence")
    with pytest.raises(MatchingError, match="unknown matching strategy 'fuzzy'"):
        parse_strategies("exact,fuzzy")
    with pytest.raises(MatchingError, match="no strategy"):
        parse_strategies("sequence")
    (tmp_path / "a.toml").write_text('drop_keyz = ["x"]\n')
    with pytest.raises(MatchingError, match="unknown match rule 'drop_keyz'"):
        load_rules(tmp_path / "a.toml")
    (tmp_path / "b.toml").write_text("[patterns]\nbad = '(unclosed'\n")
    with pytest.raises(MatchingError, match="pattern bad"):
        load_rules(tmp_path / "b.toml")
