"""The dispatch door as plain logic: one canonical call in, one upstream call made and recorded.

`Dispatcher.dispatch({"tool": NAME, "args": {...}}, door=..., token=..., dry_run=...)`:

1. reads the call and verifies its bearer token (no database needed). At a network door (`http`,
   `mcp`) a call without a valid token is refused (limit `token`) unless the proxy runs in its
   explicit open mode; the operator's own `flightlog call` (door `cli`) may go without one;
2. finds the row, checks the token's limits (uses counted in the Ledger), validates the arguments
   against the row's schema (the refusal names the bad argument);
3. renders the upstream contract with the arguments (secrets still `[NAME]`), refuses a refused host
   anywhere in it (URL, headers, nested bodies, shell commands, relay URLs, encoded or not), refuses a
   command unless the row opted in with `cli: true`, binds the secrets (an unbound name refuses);
   at a network door a row that runs a command or code here is refused unless the proxy was started
   with local commands enabled and the token names the tool (limit `local_command`), and a contract
   that calls flightlog's own routes needs the rights those routes need (`grants`: the door never
   lends its own Ledger token to a caller who could not read the Ledger);
4. makes the upstream call (HTTP, MCP over HTTP, CLI with a timeout) directly, not through the proxy,
   and records the call, each upstream request and answer, and the reply as events of one action
   (see `addons.door.dispatch_record`); the recorded request holds `[NAME]` where a secret went.

Every refusal is itself recorded: the call and a `dispatch.refused` event whose `error` starts with
the limit that refused it. A dry run goes through every check and answers with the exact request that
would be sent (secrets as names); nothing is sent and it is never counted as a use.

No mitmproxy object is involved: `addons.door.http_face` adapts HTTP requests to this, and `flightlog call`
uses it in-process; `addons.door.assembly` is the one place either is built.

`uses <= N` is exact within one process (the count and the call's first event are made under one
lock); two proxies sharing one Ledger could, at the same instant, each allow the last use once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from addons.door import dispatch_record as rec
from addons.door.checks import (
    NETWORK_DOORS,
    STATUS,
    Refused,
    check_local,
    check_rights,
    operator_token,
    prepare,
    read_call,
    verify_token,
)
from addons.door.live_config import LiveConfig
from addons.door.local_transport import local_mounts
from addons.door.upstream import Outcome, call_cli, call_http, call_mcp
from catalog import caveats, join, refused
from catalog.authority import contract_hash
from catalog.contracts import bind_secrets
from catalog.errors import CatalogError, UnboundSecret
from catalog.tool import Tool
from catalog.wire import body_bytes
from recording.identity import EMPTY, Identity
from recording.redact import Redactor
from storage.errors import StorageError
from storage.events import Batch, Event
from storage.ledger import Ledger


@dataclass(frozen=True, slots=True)
class DispatchResult:
    """The door's answer: HTTP status, the JSON reply, and the action it was recorded under."""

    status: int
    reply: dict[str, Any]
    action_id: str

    @property
    def body(self) -> bytes:
        return rec.reply_bytes(self.reply)


@dataclass
class Dispatcher:
    """The door's state: where rows come from, the Ledger, the secrets, the root key and the rules."""

    find_tool: Callable[[str], Tool | None]
    ledger: Ledger
    secrets: Mapping[str, str]
    root_key: bytes
    refused_hosts: refused.RefusedHosts | Sequence[str] = ()
    open_mode: bool = False
    local_commands: bool = False
    live: LiveConfig | None = None
    directory: Any = None
    """The Directory rows come from, served to the door's own calls to flightlog.local."""
    local_dispatch: Any = None
    """The door's HTTP face, answering its own calls to flightlog.local/api/dispatch."""
    cli_timeout: float = 30.0
    upstream_timeout: float = 60.0
    _uses_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _client_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _http: httpx.Client | None = field(default=None, repr=False)
    _lent: threading.local = field(default_factory=threading.local, repr=False)

    def __post_init__(self) -> None:
        self._redactors()

    def _redactors(self) -> None:
        self._names = Redactor(self.secrets, redact_auth_headers=False)
        self._all = Redactor(self.secrets, redact_auth_headers=True)

    def _refresh(self) -> None:
        """Take up edited refused hosts and secrets files (one stat each when nothing changed)."""
        if self.live is None:
            return
        hosts, secrets, changed = self.live.current()
        if changed:
            self.refused_hosts, self.secrets = hosts, secrets
            self._redactors()

    # -- the one entry point -----------------------------------------------------------------

    def dispatch(
        self,
        call: Any,
        *,
        door: str = "http",
        token: str | None = None,
        dry_run: bool = False,
        identity: Identity = EMPTY,
        head: bytes = b"",
        now: datetime | None = None,
        refusal: tuple[str, str] | None = None,
    ) -> DispatchResult:
        """Run one canonical call through every check and, unless refused or a dry run, upstream.

        `refusal` (limit, message): the door's HTTP face already refused the request (a browser
        from another origin, a text/plain body); it is recorded like every other refusal.
        """
        self._refresh()
        at = now or datetime.now(UTC)
        action_id = rec.new_action_id()
        tool_name = call.get("tool") if isinstance(call, dict) and isinstance(call.get("tool"), str) else None
        filing = rec.Filing(
            action_id, tool_name, at, identity.task, identity.session, identity.turn, identity.agent
        )
        token_id: str | None = None
        call_bytes = self._redact_all(body_bytes(call))[0]
        try:
            if refusal is not None:
                raise Refused(refusal[0], refusal[1], status=403)
            limits, token_id = verify_token(token, door, self.root_key, self.open_mode)
            if limits is not None:
                filing = filing.refiled(
                    limits.filed_task or identity.task, limits.filed_agent or identity.agent
                )
            name, args = read_call(call)
            try:
                tool = self.find_tool(name)
            except CatalogError as e:
                raise Refused("tool", f"the row {name!r} cannot be read: {e}") from e
            if tool is None:
                raise Refused("tool", f"no tool named {name!r} in the Directory")
            with self._uses_lock if limits is not None and limits.uses is not None else nullcontext():
                if limits is not None:
                    self._check_limits(limits, tool, door, identity, at, token_id)
                check_local(tool, door, limits, self.local_commands)
                named = prepare(tool, args, self.refused_hosts)
                check_rights(named, limits)
                bound = self._bind(named)
                call_event = self._call_event(filing, door, token_id, head, call_bytes, dry_run)
                if dry_run:
                    return self._dry_run(filing, call_event, named, bound)
                try:
                    self._append(call_event)
                except StorageError as e:
                    raise Refused(
                        "ledger", f"the Ledger cannot record this call, so it is not made: {e}"
                    ) from e
        except Refused as r:
            return self._refuse(filing, door, token_id, head, call_bytes, dry_run, r)
        # the caller's own authority, for the door's calls to its own routes: its token, or for the
        # operator's own door (cli, no token) a short-lived token of the operator's full authority
        self._lent.token = token or (
            None if door in NETWORK_DOORS else operator_token(self.root_key, at, self.upstream_timeout + 5)
        )
        try:
            return self._execute(filing, tool, bound)
        finally:
            self._lent.token = None

    # -- checks ---------------------------------------------------------------------------------

    def _check_limits(
        self, limits: caveats.Limits, tool: Tool, door: str, who: Identity, at: datetime, token_id: str | None
    ) -> None:
        uses = join.token_uses(self.ledger.engine, token_id) if limits.uses is not None and token_id else None
        context = caveats.CallContext(
            tool=tool.name,
            bundle=tool.bundle,
            door=door,
            at=at,
            agent=who.agent,
            contract=contract_hash(tool),
        )
        refusal = caveats.check(limits, context, uses_so_far=uses)
        if refusal is not None:
            status = 403 if refusal.limit == "contract" else None
            raise Refused(refusal.limit, refusal.message, status=status)

    def _bind(self, named: Any) -> Any:
        try:
            return bind_secrets(named, self.secrets)
        except UnboundSecret as e:
            raise Refused("secret", str(e), secret=e.name) from e

    # -- outcomes -------------------------------------------------------------------------------

    def _call_event(
        self, filing: rec.Filing, door: str, token_id: str | None, head: bytes, body: bytes, dry_run: bool
    ) -> Event:
        head, names = self._redact_all_head(head)
        return filing.event(
            "call",
            rec.DRY_RUN if dry_run else rec.CALL,
            "in",
            0,
            method="CALL",
            url=rec.door_url(door, filing.tool or "", token_id),
            head=head,
            payload=body,
            redacted=names,
        )

    def _refuse(
        self,
        filing: rec.Filing,
        door: str,
        token_id: str | None,
        head: bytes,
        call: bytes,
        dry_run: bool,
        r: Refused,
    ) -> DispatchResult:
        status = r.status or STATUS.get(r.limit, 403)
        refusal = {"limit": r.limit, "message": str(r), **r.detail}
        reply = {"ok": False, "refused": refusal, "action_id": filing.action_id}
        events = (
            self._call_event(filing, door, token_id, head, call, dry_run),
            filing.event(
                "refused",
                rec.REFUSED,
                "out",
                90,
                status=status,
                payload=rec.reply_bytes(reply),
                error=f"{r.limit}: {r}",
            ),
        )
        try:
            self._append(*events)
        except StorageError as e:
            reply["ledger"] = f"the refusal could not be recorded: {e}"
        return DispatchResult(status, reply, filing.action_id)

    def _dry_run(self, filing: rec.Filing, call_event: Event, named: Any, bound: Any) -> DispatchResult:
        parts = bound if isinstance(bound, list) else [bound]
        requests = [rec.shown(p, self._names) for p in parts]
        reply = {
            "ok": True,
            "dry_run": True,
            "request": named,
            "wire": [r for r in requests if r is not None],
            "action_id": filing.action_id,
        }
        reply_event = filing.event("reply", rec.REPLY, "out", 99, status=200, payload=rec.reply_bytes(reply))
        try:
            self._append(call_event, reply_event)
        except StorageError as e:
            raise Refused("ledger", f"the Ledger cannot record this call: {e}") from e
        return DispatchResult(200, reply, filing.action_id)

    def _execute(self, filing: rec.Filing, tool: Tool, bound: Any) -> DispatchResult:
        outcome = self._run(bound)
        events: list[Event] = []
        for i, exchange in enumerate(outcome.exchanges):
            events += rec.exchange_events(filing, i, *rec.as_recorded(exchange, self._names, self._all))
        result = json.loads(self._redact_all(rec.reply_bytes({"r": outcome.result}))[0])["r"]
        reply: dict[str, Any] = {"ok": outcome.ok, "result": result, "action_id": filing.action_id}
        if outcome.status is not None:
            reply["status"] = outcome.status
        if outcome.error:
            reply["error"] = self._redact_text(outcome.error)
        status = 200 if outcome.exchanges and outcome.exchanges[-1].error is None else 502
        events.append(
            filing.event("reply", rec.REPLY, "out", 99, status=status, payload=rec.reply_bytes(reply))
        )
        try:
            self._append(*events)
        except StorageError as e:
            reply["ledger"] = f"the call was made but could not be recorded: {e}"
        return DispatchResult(status, reply, filing.action_id)

    def _run(self, bound: Any) -> Outcome:
        parts = bound if isinstance(bound, list) else [bound]
        exchanges: list[Any] = []
        outcome: Outcome | None = None
        client = self._client()
        for part in parts:
            method = str(part.get("method", "")).upper()
            if method == "MCP":
                outcome = call_mcp(client, part)
            elif method == "CLI":
                outcome = call_cli(part, self.cli_timeout)
            else:
                outcome = call_http(client, part)
            exchanges += outcome.exchanges
            if not outcome.ok:
                break
        assert outcome is not None
        return Outcome(tuple(exchanges), outcome.ok, outcome.result, outcome.status, outcome.error)

    def _client(self) -> httpx.Client:
        """One httpx client for the door's life (thread-safe; its TLS context costs ~25 ms to make).

        `trust_env=False`: the door calls upstreams directly, never through a proxy named in the
        environment, so generic capture never sees (and never stores twice) the door's own calls.
        flightlog's own routes (`flightlog.local`) are answered in-process by the same registry.
        """
        with self._client_lock:
            if self._http is None:
                self._http = httpx.Client(
                    trust_env=False,
                    timeout=self.upstream_timeout,
                    follow_redirects=False,
                    mounts=local_mounts(
                        self.ledger,
                        self.secrets.get("FLIGHTLOG_LEDGER_TOKEN", ""),
                        self.directory,
                        self._own_dispatch if self.local_dispatch is not None else None,
                    ),
                )
            return self._http

    def _own_dispatch(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Mapping[str, str], bytes]:
        """The door reached through flightlog.local (the DISPATCH row): the inner call carries the
        outer caller's own token (never more authority than the caller brought) and is checked again."""
        token = getattr(self._lent, "token", None)
        if token and not any(k.lower() == "authorization" for k in headers):
            headers = {**headers, "authorization": f"Bearer {token}"}
        result: tuple[int, Mapping[str, str], bytes] = self.local_dispatch(method, path, query, headers, body)
        return result

    def close(self) -> None:
        """Close the door's HTTP client (the Ledger belongs to whoever opened it)."""
        with self._client_lock:
            if self._http is not None:
                self._http.close()
                self._http = None

    # -- recording ------------------------------------------------------------------------------

    def _append(self, *events: Event) -> None:
        self.ledger.append(Batch(rec.COLLECTOR, rec.position(), tuple(events)))

    def _redact_all(self, data: bytes) -> tuple[bytes, tuple[str, ...]]:
        out, names = self._all.redact_body(data, None)
        return out, tuple(sorted(names))

    def _redact_all_head(self, head: bytes) -> tuple[bytes, tuple[str, ...]]:
        out, names = self._all.redact_head(head)
        return out, tuple(sorted(names))

    def _redact_text(self, text: str | None) -> str | None:
        if text is None:
            return None
        return self._all.redact_body(text.encode("utf-8"), None)[0].decode("utf-8", "replace")
