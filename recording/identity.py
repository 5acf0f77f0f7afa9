"""Who is calling: agent, session, task and turn from proxy credentials and `X-Flightlog-*` headers.

The proxy URL's user part carries the identity, e.g. `http://agent=alpha;session=s1;task=t9@127.0.0.1:8080`
(the password is ignored; a bare user name such as `alpha` is the agent). Clients send it as
`Proxy-Authorization: Basic base64(user:password)` on each plain-HTTP request and on the CONNECT of an
HTTPS tunnel. A request's `X-Flightlog-Agent`, `-Session`, `-Task` and `-Turn` headers override it.
Both are removed before the request is forwarded upstream.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final
from urllib.parse import quote, unquote

FIELDS: Final = ("agent", "session", "task", "turn")
HEADER_PREFIX: Final = "x-flightlog-"
PROXY_AUTHORIZATION: Final = "proxy-authorization"
PATH_PREFIX: Final = "/_flightlog/"
"""A reverse listener's path may start `/_flightlog/agent=alpha;session=s1/`: clients that ignore proxy
variables (Node's fetch) are pointed at a base URL carrying their identity this way."""


@dataclass(frozen=True, slots=True)
class Identity:
    """The four names an event is filed under; any may be unknown."""

    agent: str | None = None
    session: str | None = None
    task: str | None = None
    turn: str | None = None

    def over(self, base: Identity) -> Identity:
        """This identity where it says something, `base` elsewhere."""
        return replace(
            base,
            **{name: getattr(self, name) for name in FIELDS if getattr(self, name) is not None},
        )

    def userinfo(self) -> str:
        """The proxy URL user part that carries this identity (percent-encoded where needed)."""
        parts = [f"{n}={quote(v, safe='')}" for n in FIELDS if (v := getattr(self, n)) is not None]
        return ";".join(parts)


EMPTY: Final = Identity()


def parse_user(user: str) -> Identity:
    """`agent=alpha;session=s1` (`;` or `,` between pairs) or a bare name meaning the agent."""
    values: dict[str, str] = {}
    for part in user.replace(",", ";").split(";"):
        key, sep, value = part.partition("=")
        key = unquote(key).strip().lower()
        if not sep:
            if key:
                values.setdefault("agent", unquote(part).strip())
            continue
        if key in FIELDS and value:
            values[key] = unquote(value).strip()
    return Identity(**values)


def from_path(path: str) -> tuple[Identity, str]:
    """The identity in a `/_flightlog/USER/` path prefix and the path without it (unchanged if none)."""
    if not path.startswith(PATH_PREFIX):
        return EMPTY, path
    user, _, rest = path[len(PATH_PREFIX) :].partition("/")
    return parse_user(user), "/" + rest


def from_proxy_authorization(value: str | None) -> Identity:
    """The identity in a `Proxy-Authorization: Basic ...` value; nothing for any other scheme."""
    if not value:
        return EMPTY
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic":
        return EMPTY
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return EMPTY
    user = decoded.partition(":")[0]
    return parse_user(user)


def from_headers(fields: Iterable[tuple[str, str]]) -> Identity:
    """The identity in `X-Flightlog-Agent/-Session/-Task/-Turn` header fields (the last one wins)."""
    values: dict[str, str] = {}
    for name, value in fields:
        lname = name.lower()
        if lname.startswith(HEADER_PREFIX):
            key = lname[len(HEADER_PREFIX) :]
            if key in FIELDS and value.strip():
                values[key] = value.strip()
    return Identity(**values)


def is_identity_header(name: str) -> bool:
    """Whether a request header is ours to read and strip before forwarding."""
    lname = name.lower()
    return lname == PROXY_AUTHORIZATION or lname.startswith(HEADER_PREFIX)
