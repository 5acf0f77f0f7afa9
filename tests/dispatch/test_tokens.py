"""Scoped tokens: chained-HMAC caveats that verify without a database and can only narrow."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from authority import tokens
from authority.caveats import CaveatError, parse
from authority.gate import Ask, GateRefused, Row, admit
from authority.tokens import TokenError, TokenRefused
from storage.ledger import open_ledger
from storage.token_uses import TokenUses

KEY = b"k" * 32
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def call(tool: str = "weather", door: str = "http", agent: str | None = "alice") -> Ask:
    row = Row("tool", f"{tool}.md", frozenset({tool}), ((tool, "0" * 16),))
    return Ask("call", door, NOW, (row,), agent)


def test_mint_verify_round_trip_through_text() -> None:
    """A minted token survives its text form and verifies to the limits it was minted with."""
    t = tokens.mint(
        KEY, ["tools = weather,search", "uses <= 3", "expires < 2026-12-01T00:00:00Z", "task = T1"]
    )
    back = tokens.decode(t.encode())
    assert back == t
    limits = tokens.verify(back, KEY)
    assert limits.tools == {"weather", "search"}
    assert limits.uses == 3
    assert limits.expires == datetime(2026, 12, 1, tzinfo=UTC)
    assert limits.filed_task == "T1"


def test_token_is_link_sized() -> None:
    """A token with the usual limits fits comfortably in a link (measured, not assumed)."""
    t = tokens.mint(KEY, ["tools = weather", "uses <= 3", "expires < 2026-12-01T00:00:00Z", "task = T1"])
    text = t.encode()
    assert len(text) <= 160, len(text)
    assert all(c.isalnum() or c in "-_" for c in text)


def test_signature_is_the_macaroon_chain() -> None:
    """sig0 = HMAC(root, id), sig_i = HMAC(sig_{i-1}, caveat_i): checkable by anyone with the key."""
    import hashlib
    import hmac

    t = tokens.mint(KEY, ["uses <= 2"], identifier="abc")
    sig0 = hmac.new(KEY, b"abc", hashlib.sha256).digest()
    assert t.signature == hmac.new(sig0, b"uses<=2", hashlib.sha256).digest()


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: tokens.Token(t.identifier, ("uses<=300",), t.signature),  # changed caveat
        lambda t: tokens.Token(t.identifier, (), t.signature),  # dropped caveat
        lambda t: tokens.Token("other", t.caveats, t.signature),  # changed identifier
        lambda t: tokens.Token(t.identifier, t.caveats, bytes(32)),  # forged signature
    ],
)
def test_tampered_token_is_refused(tamper: object) -> None:
    """Any change to identifier, caveats or signature breaks the chain: refused, limit 'signature'."""
    t = tokens.mint(KEY, ["uses <= 3"])
    bad = tamper(t)  # type: ignore[operator]
    with pytest.raises(TokenRefused) as e:
        tokens.verify(tokens.decode(bad.encode()), KEY)
    assert e.value.limit == "signature"


def test_flipped_byte_in_text_form_is_refused() -> None:
    """Flipping one bit of the transmitted token never yields a token that verifies."""
    text = tokens.mint(KEY, ["tools = weather", "uses <= 3"]).encode()
    raw = bytearray(base64.urlsafe_b64decode(text[4:] + "=" * (-len(text[4:]) % 4)))
    for i in range(len(raw)):
        flipped = bytearray(raw)
        flipped[i] ^= 1
        forged = "flt_" + base64.urlsafe_b64encode(bytes(flipped)).rstrip(b"=").decode()
        with pytest.raises(TokenError):
            tokens.verify(tokens.decode(forged), KEY)


def test_other_root_key_is_refused() -> None:
    """A token minted under another root key does not verify here."""
    with pytest.raises(TokenRefused):
        tokens.verify(tokens.mint(b"x" * 32, []), KEY)


def test_unknown_caveat_is_refused_never_ignored() -> None:
    """A correctly signed token with a caveat no verifier knows is refused (ignoring it would widen it)."""
    ident = "id1"
    sig = tokens.signature(KEY, ident, ["colour=blue"])
    t = tokens.Token(ident, ("colour=blue",), sig)
    with pytest.raises(TokenRefused) as e:
        tokens.verify(t, KEY)
    assert e.value.limit == "caveat"
    assert "colour" in str(e.value)
    with pytest.raises(TokenError):
        tokens.mint(KEY, ["colour = blue"])


def test_attenuated_token_verifies_without_root_key_and_cannot_widen(book: TokenUses) -> None:
    """A holder narrows a token without the root key; adding a wider caveat leaves the parent's limit."""
    parent = tokens.mint(KEY, ["tools = weather", "uses <= 3"])
    child = tokens.attenuate(parent, ["doors = cli"])
    limits = tokens.verify(child, KEY)
    assert limits.tools == {"weather"} and limits.doors == {"cli"} and limits.uses == 3
    # the strict default refuses a caveat that cannot narrow ...
    with pytest.raises(TokenError, match="would not narrow"):
        tokens.attenuate(parent, ["tools = weather,search"])
    # ... and even forced in, it widens nothing: the parent's caveat still holds
    forced = tokens.attenuate(parent, ["tools = weather,search", "uses <= 10"], strict=False)
    wide = tokens.verify(forced, KEY)
    assert wide.tools == {"weather"} and wide.uses == 3
    with pytest.raises(GateRefused, match="the token does not allow the tool 'search'"):
        admit(forced.encode(), call("search"), KEY, book)
    assert forced.identifier == parent.identifier


def test_dropping_an_attenuation_is_refused() -> None:
    """A holder of a narrowed token cannot recover its parent by cutting caveats off the end."""
    parent = tokens.mint(KEY, ["tools = weather"])
    child = tokens.attenuate(parent, ["uses <= 1"])
    cut = tokens.Token(child.identifier, child.caveats[:1], child.signature)
    with pytest.raises(TokenRefused):
        tokens.verify(cut, KEY)


@pytest.fixture
def book(tmp_path: Path) -> Iterator[TokenUses]:
    """The Ledger's use book, on a real SQLite Ledger."""
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.db'}", (tmp_path / "b").as_uri())
    yield TokenUses(ledger.engine)
    ledger.close()


@pytest.mark.parametrize(
    ("caveat", "the_call", "limit"),
    [
        ("tools = weather", call("search"), "tools"),
        ("doors = cli", call(door="http"), "doors"),
        ("expires < 2026-11-30T11:59:59Z", call(), "expires"),
        ("bundles = flow", call(), "bundles"),
        ("for = alice", call(agent="bob"), "for"),
        ("folders = tool/public", call(), "folders"),
    ],
)
def test_each_limit_refuses_by_name(caveat: str, the_call: Ask, limit: str, book: TokenUses) -> None:
    """Each caveat refuses a call outside it, and the refusal names that limit."""
    with pytest.raises(GateRefused) as refused:
        admit(tokens.mint(KEY, [caveat]).encode(), the_call, KEY, book)
    assert refused.value.limit == limit


def test_uses_limit_counts_what_the_ledger_says(book: TokenUses) -> None:
    """`uses <= 2` allows 2 calls: the third is refused, the Ledger counting 2."""
    token = tokens.mint(KEY, ["uses <= 2"])
    for _ in range(2):
        assert admit(token.encode(), call(), KEY, book).use is not None
    with pytest.raises(GateRefused, match="spent") as refused:
        admit(token.encode(), call(), KEY, book)
    assert refused.value.limit == "uses" and book.used(token.identifier) == 2


def test_contradictory_task_caveats_allow_nothing(book: TokenUses) -> None:
    """Two different task bindings intersect to nothing: every call is refused by 'task'."""
    with pytest.raises(GateRefused) as refused:
        admit(tokens.mint(KEY, ["task = A", "task = B"]).encode(), call(), KEY, book)
    assert refused.value.limit == "task"


@pytest.mark.parametrize(
    "line",
    [
        "uses <= many",
        "uses = 3",
        "expires < tomorrow",
        "expires < 2026-12-01T00:00:00",
        "doors = fax",
        "tools =",
    ],
)
def test_malformed_caveats_are_refused(line: str) -> None:
    """Malformed caveats are errors that say what is wrong, never silently accepted."""
    with pytest.raises(CaveatError):
        parse(line)


def test_caveats_read_the_same_spaced_or_compact() -> None:
    """`uses <= 3` and `uses<=3` are one caveat; str() gives the readable form back."""
    assert parse("uses<=3") == parse(" uses  <=  3 ")
    assert str(parse("expires<2026-12-01T01:00:00+01:00")) == "expires < 2026-12-01T00:00:00Z"
    assert (NOW + timedelta(0)).tzinfo is UTC


def test_root_key_created_once_with_mode_0600(tmp_path: Path) -> None:
    """The root key is made on first use, private to its owner, and stable afterwards."""
    home = tmp_path / "home"
    key = tokens.root_key(home)
    assert len(key) == 32
    assert os.stat(home / "token.key").st_mode & 0o777 == 0o600
    assert tokens.root_key(home) == key
    os.chmod(home / "token.key", 0o644)
    with pytest.raises(TokenError, match="chmod 600"):
        tokens.root_key(home)


@pytest.mark.parametrize("text", ["", "flt_", "flt_!!!", "abc", "flt_" + "A" * 10])
def test_garbage_is_not_a_token(text: str) -> None:
    """Anything that is not a token is one clear TokenError, never a traceback."""
    with pytest.raises(TokenError):
        tokens.decode(text)
