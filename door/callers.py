"""Who may use flightlog's own routes: the checks every `flightlog.local` request passes first.

Anything that reaches the proxy's port is untrusted, a browser page rendered through the proxy
included. A browser can be made to send requests it was never asked to (CSRF) and can be pointed
at the proxy under a name of the attacker's (DNS rebinding), but it cannot forge three things, so
the routes refuse on each, whatever token comes along:

- `Host` other than flightlog.local (with any port): a rebinding page's requests carry its own name;
- `Origin` other than flightlog.local's, or `Sec-Fetch-Site: cross-site|same-site`: a page from
  another origin;
- a body that is not `application/json` on a request that changes or runs anything: `text/plain`,
  forms and multipart are what a page can send without a preflight.

What a request needs beyond that is the gate's to judge (`authority.gate`, over the verb and rows
each route declares: `door.declarations`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from door.routes import HOST

ALLOWED_ORIGINS: Final = frozenset({f"http://{HOST}", f"https://{HOST}"})
OWN_SECRET: Final = "FLIGHTLOG_LEDGER_TOKEN"
"""flightlog's own credential: a contract that spends it reads the Ledger."""


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def _host_name(value: str) -> str:
    value = value.strip().lower()
    if value.startswith("["):
        return value.partition("]")[0] + "]"
    return value.rpartition(":")[0] if value.count(":") == 1 else value


def browser_refusal(method: str, headers: Mapping[str, str], body: bytes) -> tuple[str, str] | None:
    """(limit, message) when a request is browser-shaped from elsewhere; None when it may go on."""
    host = _header(headers, "host")
    if host is not None and _host_name(host) != HOST:
        return "host", f"flightlog's routes answer only Host: {HOST} (this request names {host!r})"
    origin = _header(headers, "origin")
    if origin is not None:
        parts = urlsplit(origin.strip().lower())
        if f"{parts.scheme}://{parts.hostname}" not in ALLOWED_ORIGINS:
            return "origin", f"requests from another origin ({origin}) are refused"
    site = (_header(headers, "sec-fetch-site") or "").strip().lower()
    if site in ("cross-site", "same-site"):
        return "origin", f"requests a browser marks Sec-Fetch-Site: {site} are refused"
    if body or method.upper() in ("POST", "PUT", "PATCH", "DELETE"):
        kind = (_header(headers, "content-type") or "").partition(";")[0].strip().lower()
        if (body and kind != "application/json") or (not body and kind not in ("", "application/json")):
            return "content_type", f"a request body must be application/json, not {kind or 'untyped'}"
    return None


def bearer(headers: Mapping[str, str], query: Mapping[str, list[str]] | None = None) -> str | None:
    """The bearer token a request carries: `Authorization: Bearer X`, else `?token=X`."""
    auth = _header(headers, "authorization") or ""
    scheme, _, given = auth.partition(" ")
    if scheme.lower() == "bearer" and given.strip():
        return given.strip()
    values = (query or {}).get("token") or []
    return values[-1] if values and values[-1] else None
