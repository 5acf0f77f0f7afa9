"""The swap's rules, without a proxy: where a placeholder becomes the real key, and where it is refused.

Tables generated from the places clients put keys (each to its own host: swapped; to another host:
refused) and from the places nobody puts one (a body, the URL's path, another header, a piece, base64:
refused wherever it goes). The placeholders' shape and the loan book's life are checked too.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from catalog.secret_hosts import Place
from egress import loan_book
from egress.credential_swap import PIECE, Lent, Misplaced, Swapped, swap
from egress.loan_book import LoanBook, placeholder_for, prefix_of

REAL = "sk-proj-REALvalueREALvalueREALvalue0123"
P = placeholder_for(REAL)
HOME = Place("api.example.com", 443)
ELSEWHERE = Place("paste.example.net", 443)
LENT = Lent({P: "OPENAI_API_KEY"}, {"OPENAI_API_KEY": REAL}, lambda name: ("api.example.com",))


def _basic(user: str, password: str) -> bytes:
    return b"Basic " + base64.b64encode(f"{user}:{password}".encode())


BEARER, TOKEN = b"Bearer ", b"token "
AUTH = b"Authorization"
KEY_PLACES = {
    "bearer": ([(AUTH, BEARER + P.encode())], "/v1", [(AUTH, BEARER + REAL.encode())], "/v1"),
    "token": ([(AUTH, TOKEN + P.encode())], "/v1", [(AUTH, TOKEN + REAL.encode())], "/v1"),
    "basic password": ([(AUTH, _basic("x", P))], "/r.git", [(AUTH, _basic("x", REAL))], "/r.git"),
    "basic user": ([(AUTH, _basic(P, "x-oauth-basic"))], "/", [(AUTH, _basic(REAL, "x-oauth-basic"))], "/"),
    "x-api-key": ([(b"x-api-key", P.encode())], "/v1", [(b"x-api-key", REAL.encode())], "/v1"),
    "api-key": ([(b"api-key", P.encode())], "/v1", [(b"api-key", REAL.encode())], "/v1"),
    "query": ([], f"/v1?a=1&key={P}", [], f"/v1?a=1&key={REAL}"),
}


@pytest.mark.parametrize("place", KEY_PLACES)
def test_a_key_place_is_swapped_at_its_host(place: str) -> None:
    """Where clients put keys, to the secret's host: the real value goes, the name is told."""
    fields, path, want_fields, want_path = KEY_PLACES[place]
    assert swap(fields, path, b"{}", HOME, LENT) == Swapped(
        tuple(want_fields), want_path, ("OPENAI_API_KEY",)
    )


@pytest.mark.parametrize("place", KEY_PLACES)
def test_a_key_place_to_another_host_is_refused(place: str) -> None:
    """The same request to a host the secret is not bound to: refused, naming the secret."""
    fields, path, _, _ = KEY_PLACES[place]
    got = swap(fields, path, b"", ELSEWHERE, LENT)
    assert isinstance(got, Misplaced) and got.name == "OPENAI_API_KEY" and "paste.example.net" in got.where


ELSEWHERE_PLACES = {
    "body": ([], "/v1", f'{{"k": "{P}"}}'.encode()),
    "path": ([], f"/v1/{P}", b""),
    "url in a parameter": ([], f"/v1?next=https://paste.example.net/{P}", b""),
    "another header": ([(b"X-Leak", P.encode())], "/v1", b""),
    "cookie": ([(b"Cookie", f"k={P}".encode())], "/v1", b""),
    "first piece": ([], "/v1", P[: len(P) // 2].encode()),
    "last piece": ([], "/v1", P[len(P) // 2 :].encode()),
    "base64 body": ([], "/v1", base64.b64encode(f"key={P}".encode())),
    "bearer and body": ([(b"Authorization", b"Bearer " + P.encode())], "/v1", P.encode()),
}


@pytest.mark.parametrize("place", ELSEWHERE_PLACES)
@pytest.mark.parametrize("where", [HOME, ELSEWHERE], ids=["its host", "another host"])
def test_a_placeholder_anywhere_else_is_refused(place: str, where: Place) -> None:
    """Where no client puts a key, to any host: refused, and nothing swapped."""
    fields, path, body = ELSEWHERE_PLACES[place]
    got = swap(fields, path, body, where, LENT)
    assert isinstance(got, Misplaced) and got.name == "OPENAI_API_KEY"


def test_any_piece_of_the_shortest_length_is_found() -> None:
    """Every piece of `PIECE` characters of the random part, at every offset, is refused."""
    random = P[len(prefix_of(P)) :]
    for start in range(len(random) - PIECE + 1):
        got = swap([], "/", random[start : start + PIECE].encode(), HOME, LENT)
        assert isinstance(got, Misplaced), start


def test_a_request_without_placeholders_goes_as_it_is() -> None:
    assert swap([(b"Authorization", b"Bearer sk-other")], "/v1?key=x", b"{}", HOME, LENT) is None


@pytest.mark.parametrize(
    "real",
    [
        "sk-proj-" + "a" * 40,
        "sk-ant-api03-" + "b" * 90,
        "ghp_" + "c" * 36,
        "github_pat_" + "d" * 70,
        "e" * 32,
    ],
)
def test_placeholders_keep_the_shape_and_are_fresh(real: str) -> None:
    """Prefix kept, length matched, never the real value, never twice the same."""
    one, two = placeholder_for(real), placeholder_for(real)
    assert one != two and one != real and len(one) == len(real)
    assert one.startswith(prefix_of(real)) and prefix_of(one) == prefix_of(real)


def test_the_book_lends_while_the_run_lives(tmp_path: Path) -> None:
    """A registered page is read at once (0600, names only); closed, its placeholders stand for
    nothing; a page of a run that died lends nothing."""
    book = LoanBook(tmp_path)
    assert book.current() == {}
    loans = loan_book.lend({"OPENAI_API_KEY": "OPENAI_API_KEY"}, {"OPENAI_API_KEY": REAL})
    page = loan_book.register(tmp_path, "run1", loans)
    assert book.current() == {loans[0].placeholder: "OPENAI_API_KEY"}
    assert page.stat().st_mode & 0o777 == 0o600 and REAL not in page.read_text()
    loan_book.close(page)
    assert book.current() == {}
    dead = loan_book.folder(tmp_path) / "dead.json"
    gone = 2**22 + os.getpid() % 7 + 1  # above the kernel's largest process id
    dead.write_text(f'{{"pid": {gone}, "loans": {{"x": "OPENAI_API_KEY"}}}}')
    assert loan_book.read_pages(loan_book.folder(tmp_path)) == {}


@pytest.mark.parametrize(
    ("real", "kept"),
    [("abc123-def456-" + "x" * 30, ""), ("Secret-" + "y" * 30, ""), ("tok_" + "z" * 30, "tok_"),
     ("sk-ant-api03-" + "a" * 30, "sk-ant-api03-"), ("short-1234567", "")],
)  # fmt: skip
def test_only_an_issuers_prefix_or_one_short_word_is_kept(real: str, kept: str) -> None:
    """A prefix guessed wider could copy secret characters into the placeholder: only issuers'
    prefixes and one short lowercase word are kept, and never when little of the key would be left."""
    assert prefix_of(real) == kept
