"""Exact head bytes (start line and header fields) of a mitmproxy request or response. The head type
and its parser are `storage.heads` (one for every room).

mitmproxy keeps HTTP/1 header names with their case, order and duplicates; the head is assembled the
way mitmproxy puts it on the wire: start line, fields, empty line, CRLF-separated. Stated exceptions:
values are whitespace-stripped by mitmproxy's parser, a proxy request's absolute-form target is the
origin-form mitmproxy forwards, and HTTP/2 heads are the decoded field list (no wire bytes exist).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mitmproxy import http


def request_head(request: http.Request) -> bytes:
    """The request's start line and header fields as mitmproxy forwards them."""
    from mitmproxy.net.http.http1.assemble import assemble_request_head

    return bytes(assemble_request_head(request))


def response_head(response: http.Response) -> bytes:
    """The response's status line and header fields as received."""
    from mitmproxy.net.http.http1.assemble import assemble_response_head

    return bytes(assemble_response_head(response))


@lru_cache(maxsize=4096)
def _authority(value: str) -> tuple[str, int | None]:
    from mitmproxy.net.http import url

    return url.parse_authority(value, check=False)


def pretty_target(request: http.Request) -> tuple[str, str]:
    """`(request.pretty_url, request.pretty_host)`, computed as mitmproxy does but with one Host
    lookup and a cached authority parse: the properties read and validate the Host header three
    times, a fifth of what the capture hook cost per request (measured)."""
    from mitmproxy.net.http import url

    host_header = request.host_header
    if not host_header:
        return request.url, request.host
    host, port = _authority(host_header)
    if request.first_line_format == "authority":
        return request.authority, host
    scheme = request.scheme
    path = request.path
    return url.unparse(
        scheme, host, port or url.default_port(scheme) or 443, path if path != "*" else ""
    ), host


def real_target(request: http.Request) -> tuple[str, str]:
    """`pretty_target`, but naming where the request really goes: when its Host header claims
    another host than the destination mitmproxy connects to (a request to 127.0.0.1 with
    `Host: denied.test`, a TUN request claiming `flightlog.local`), the URL and host are the
    destination's, and the claim stays in the recorded head beside them."""
    url, host = pretty_target(request)
    real = request.data.host
    if not real:  # refused before it had a destination (a head mitmproxy could not parse)
        return url, host
    if real[0].isdigit() or ":" in real:  # an address, maybe spelled otherwise
        from mitmproxy.net.http import url as urls

        from formats.hosts import parse_address

        address = parse_address(real)
        if address is not None and str(address) != real:  # `2130706433`, `0x7f.1`, `::ffff:127.0.0.1`
            canonical = str(address)
            shown = f"[{canonical}]" if ":" in canonical else canonical
            return urls.unparse(request.scheme, shown, request.port, request.path), canonical
    if host == real or host.lower() == real.lower() or _same_name(host, real):
        return url, host
    return request.url, real


def _same_name(ascii_name: str, name: str) -> bool:
    """Whether `name` (as mitmproxy decodes it, in Unicode) is `ascii_name` in IDNA A-labels."""
    if name.isascii():
        return False
    try:
        return name.encode("idna").decode("ascii").lower() == ascii_name.lower()
    except UnicodeError:
        return False


def header_values(fields: Iterable[tuple[bytes, bytes]], names: tuple[bytes, ...]) -> list[str | None]:
    """For each lowercase name, what `headers.get(name)` gives (the values folded with ", ", decoded
    as mitmproxy does), or None where absent, in one pass over the fields: each mitmproxy lookup
    lower-cases every field name and builds a list (a quarter of the answer hook's cost, measured)."""
    found: list[list[bytes] | None] = [None] * len(names)
    for key, value in fields:
        lkey = key.lower()
        if lkey in names:
            at = names.index(lkey)
            seen = found[at]
            if seen is None:
                found[at] = [value]
            else:
                seen.append(value)
    return [
        None if values is None else ", ".join(v.decode("utf-8", "surrogateescape") for v in values)
        for values in found
    ]
