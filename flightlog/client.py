"""A small client of flightlog's dispatch door, for code that calls Directory rows (the `sdk` form).

    from flightlog.client import Flightlog

    client = Flightlog(proxy="http://127.0.0.1:8080")     # token: FLIGHTLOG_TOKEN unless given
    reply = client.tools.weather(city="Bern")              # {"ok": true, "result": ..., "action_id": ...}
    reply = client.call("weather", {"city": "Bern"})       # the same call

Every call is `POST http://flightlog.local/api/dispatch` with the canonical call's canonical JSON,
through the proxy, exactly what the other HTTP forms send; the answer is the door's reply, a refusal
included (`reply["refused"]` names the limit). Only a failure to reach the door raises, as
`DoorUnreachable`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from catalog.forms.upstream import canonical_json
from formats.errors import FlightlogError

DEFAULT_BASE: Final = "http://flightlog.local"
DOOR_PATH: Final = "/api/dispatch"


class DoorUnreachable(FlightlogError, RuntimeError):
    """The door could not be reached, or did not answer JSON (the message says which).

    In flightlog's tree, and still the `RuntimeError` it was first published as: code that calls rows
    through this client may catch either."""


class _Tools:
    """`client.tools.NAME(**args)`: each attribute a method calling the row of that name."""

    def __init__(self, client: Flightlog) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda **args: self._client.call(name, args)


class Flightlog:
    """The door at `base`, reached through `proxy`, with a scoped `token` (FLIGHTLOG_TOKEN by default)."""

    def __init__(
        self,
        proxy: str | None = None,
        *,
        token: str | None = None,
        base: str = DEFAULT_BASE,
        timeout: float = 60.0,
    ) -> None:
        self.proxy = proxy
        self.token = token if token is not None else os.environ.get("FLIGHTLOG_TOKEN")
        self.url = base.rstrip("/") + DOOR_PATH
        self.timeout = timeout
        self.tools = _Tools(self)

    def call(self, tool: str, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Run one canonical call `{"tool": tool, "args": args}` through the door; its reply."""
        import httpx  # deferred: importing the client costs nothing until it calls

        body = canonical_json({"tool": tool, "args": dict(args or {})})
        headers = {"content-type": "application/json"}
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        try:
            answer = httpx.post(
                self.url, content=body.encode(), headers=headers, proxy=self.proxy, timeout=self.timeout
            )
            reply = answer.json()
        except httpx.HTTPError as e:
            raise DoorUnreachable(f"cannot reach the door at {self.url}: {e}") from e
        except ValueError as e:
            raise DoorUnreachable(f"the door at {self.url} answered {answer.status_code}, not JSON") from e
        if not isinstance(reply, dict):
            raise DoorUnreachable(f"the door at {self.url} answered {reply!r}, not a reply object")
        return reply
