"""The dispatch door as plain logic: one canonical call in, one upstream call made and recorded.

`Dispatcher.dispatch({"tool": NAME, "args": {...}}, door=..., token=..., dry_run=...)`:

1. asks the gate (`authority.gate`) about the token for a call through this door, before anything it
   names is looked at; a caller without one passes only at the operator's door (`cli`) or in the
   proxy's explicit open mode;
2. finds the row and asks the gate again with it (tools, bundles, folders, contract);
3. at a network door refuses a row that runs a command here unless local commands are on and the
   token names the tool; validates the arguments; renders the contract (secrets still `[NAME]`),
   refusing a refused host anywhere in it and a command that did not opt in; binds the secrets (an
   unbound name refuses) and refuses one its hosts do not allow (`catalog.secret_hosts`); asks the
   gate for what the contract asks of flightlog's own routes, for the caller (no confused deputy);
4. spends a use (atomically in the Ledger's database), makes the upstream call (`door.reach`)
   and records the call, each upstream exchange and the reply as one action
   (`door.dispatch_record`); the recorded request holds `[NAME]` where a secret went.

Every refusal is recorded too: the call and a `dispatch.refused` whose `error` starts with the limit.
A dry run passes every check and answers the exact request (secrets as names); it spends no use.
No mitmproxy object is involved: `door.http_face` adapts HTTP requests to this, `flightlog
call` and `flightlog mcp` use it in-process; `door.assembly` is the one place it is built.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from authority.gate import Admitted, Ask, GateRefused, admit, spend_use
from authority.targets import Located, placed
from catalog import retired_hosts as refused
from catalog.contracts import bind_secrets
from catalog.errors import CatalogError, NotCallable, UnboundSecret
from catalog.secret_hosts import SecretHostRefused, SecretHosts
from catalog.tool import Tool
from catalog.wire import body_bytes
from door import dispatch_record as rec
from door.checks import (
    NETWORK_DOORS,
    STATUS,
    Refused,
    check_local,
    inner_asks,
    operator_token,
    prepare,
    read_call,
)
from door.gatekeeper import Lent, call_head
from door.live_config import LiveConfig
from door.reach import Reach
from door.routes import Declared
from door.upstream_judge import Judge, judge_upstreams
from recording.identity import EMPTY, Identity
from recording.redaction.redact import Redactor
from storage.errors import StorageError
from storage.events import Batch, Event
from storage.ledger import Ledger
from storage.token_uses import TokenUses


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
    secret_hosts: SecretHosts = field(default_factory=lambda: SecretHosts({}))
    """Where each secret may be sent (`catalog.secret_hosts`); re-read with the secrets file."""
    open_mode: bool = False
    local_commands: bool = False
    live: LiveConfig | None = None
    directory: Any = None
    """The Directory rows come from, served to the door's own calls to flightlog.local."""
    local_dispatch: Any = None
    """The door's HTTP face, answering its own calls to flightlog.local/api/dispatch."""
    locate: Callable[[str], Located | None] | None = None
    """Where a tool row lives and which version was found (else `find_tool`, placed by its name)."""
    collector: str = rec.COLLECTOR  # its batches' chain: one per FLIGHTLOG_HOME (`door_collector`)
    cli_timeout: float = 30.0
    upstream_timeout: float = 60.0
    egress: Judge | None = None
    """The egress judge the proxy runs (its policy in force): every upstream a call would reach is
    judged before it is made (`door.upstream_judge`); None outside a proxy."""
    _client_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _lent: threading.local = field(default_factory=threading.local, repr=False)

    def __post_init__(self) -> None:
        self._redactors()
        self.book = TokenUses(self.ledger.engine)
        self._way: Reach | None = None

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
        self.secret_hosts = self.live.secret_hosts

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
        row_hash: str | None = None
        call_bytes = self._redact_all(body_bytes(call))[0]
        ask = Ask("call", door, at, (), identity.agent, identity.task, trusted=self._trusted(door))
        try:
            if refusal is not None:
                raise Refused(refusal[0], refusal[1], status=403)
            admitted = self._admit(token, ask)  # the token, before anything it names is looked at
            token_id = admitted.identifier
            filing = filing.refiled(admitted.task or identity.task, admitted.agent or identity.agent)
            name, args = read_call(call)
            found = self._find(name)
            row_hash = found.hash
            ask = replace(ask, rows=(found.row,))
            self._admit(token, ask)  # the row: tools, bundles, folders, contract
            check_local(found.tool, door, admitted.limits, self.local_commands)
            named = prepare(found.tool, args, self.refused_hosts)
            bound = self._bind(named)  # unbound secrets, then secrets off their hosts
            judge_upstreams(self.egress, bound, identity)  # the proxy's egress judge, on every upstream
            for inner in inner_asks(named, self._reach().routes):
                self._admit(token, replace(ask, verb=inner.verb, rows=inner.rows), inner=inner)
            call_event = self._call_event(filing, door, token_id, head, call_bytes, dry_run, row_hash)
            if dry_run:
                return self._dry_run(filing, call_event, named, bound)
            self._spend(admitted, ask)
            try:
                self._append(call_event)
            except StorageError as e:
                raise Refused("ledger", f"the Ledger cannot record this call, so it is not made: {e}") from e
        except Refused as r:
            return self._refuse(filing, door, token_id, head, call_bytes, dry_run, r, row_hash)
        # the caller's own authority, for the door's calls to its own routes: its token and identity,
        # or for the operator's own door (cli, no token) a short-lived token of the operator's authority
        self._lent.caller = Lent(
            token
            or (
                None
                if door in NETWORK_DOORS
                else operator_token(self.root_key, at, self.upstream_timeout + 5)
            ),
            identity,
            door,
            trusted=not token and self._trusted(door),
        )
        try:
            return self._execute(filing, found.tool, bound)
        finally:
            self._lent.caller = None

    # -- checks ---------------------------------------------------------------------------------

    def _trusted(self, door: str) -> bool:
        """A caller without a token is the operator at the cli door, anyone in open mode."""
        return door not in NETWORK_DOORS or self.open_mode

    def _admit(self, token: str | None, ask: Ask, inner: Declared | None = None) -> Admitted:
        """The gate, judging without spending (a use is spent once every check passed)."""
        try:
            return admit(token, ask, self.root_key, self.book, spend=False)
        except GateRefused as e:
            where = f" (the contract calls flightlog.local to {inner.verb})" if inner is not None else ""
            status = STATUS.get(e.limit, 403) if e.limit in ("token", "signature", "caveat") else 403
            raise Refused(e.limit, f"{e}{where}", status=status) from e

    def _spend(self, admitted: Admitted, ask: Ask) -> None:
        try:
            spend_use(admitted, ask, self.book)
        except GateRefused as e:
            raise Refused(e.limit, str(e), status=403) from e
        except StorageError as e:
            raise Refused(
                "ledger", f"the Ledger cannot count this token's uses, so the call is not made: {e}"
            ) from e

    def _find(self, name: str) -> Located:
        try:
            found = self.locate(name) if self.locate is not None else None
            if found is None and self.locate is None:
                tool = self.find_tool(name)
                found = placed(tool) if tool is not None else None
        except NotCallable as e:
            raise Refused("tool", str(e)) from e
        except CatalogError as e:
            raise Refused("tool", f"the row {name!r} cannot be read: {e}") from e
        if found is None:
            raise Refused("tool", f"no tool named {name!r} in the Directory")
        return found

    def _bind(self, named: Any) -> Any:
        try:
            bound = bind_secrets(named, self.secrets)
            self.secret_hosts.check(named)
        except UnboundSecret as e:
            raise Refused("secret", str(e), secret=e.name) from e
        except SecretHostRefused as e:
            raise Refused("secret_host", str(e), status=403, secret=e.name, host=e.host) from e
        return bound

    # -- outcomes -------------------------------------------------------------------------------

    def _call_event(
        self,
        filing: rec.Filing,
        door: str,
        token_id: str | None,
        head: bytes,
        body: bytes,
        dry_run: bool,
        row_hash: str | None = None,
    ) -> Event:
        head, names = self._redact_all_head(head)
        return filing.event(
            rec.CALL_ROLE,
            rec.DRY_RUN if dry_run else rec.CALL,
            "in",
            0,
            moment=filing.started,  # when the call came to the door, not when the checks were done
            method="CALL",
            url=rec.door_url(door, filing.tool or "", token_id, row_hash),
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
        row_hash: str | None = None,
    ) -> DispatchResult:
        status = r.status or STATUS.get(r.limit, 403)
        refusal = {"limit": r.limit, "message": str(r), **r.detail}
        reply = {"ok": False, "refused": refusal, "action_id": filing.action_id}
        events = (
            self._call_event(filing, door, token_id, head, call, dry_run, row_hash),
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
        outcome = self._reach().run(bound)
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

    def _reach(self) -> Reach:
        """flightlog.local and the upstreams as the door reaches them (built once)."""
        with self._client_lock:
            if self._way is None:
                own = self.secrets.get("FLIGHTLOG_LEDGER_TOKEN", "")
                dispatch = self._own_dispatch if self.local_dispatch is not None else None
                gate = (
                    self.root_key,
                    self.book,
                    lambda door, method, path, query, headers, refusal: self.file_refusal(
                        door, call_head(method, path, query, headers), refusal, self._caller().identity
                    ),
                )
                timeouts = (self.upstream_timeout, self.cli_timeout)
                self._way = Reach(self.ledger, own, self.directory, dispatch, gate, self._caller, timeouts)
            return self._way

    def _caller(self) -> Lent:
        caller: Lent | None = getattr(self._lent, "caller", None)
        return caller if caller is not None else Lent(None, EMPTY, "http")

    def _own_dispatch(
        self, method: str, path: str, query: Mapping[str, list[str]], headers: Mapping[str, str], body: bytes
    ) -> tuple[int, Mapping[str, str], bytes]:
        """The door reached through flightlog.local (the DISPATCH row): the inner call carries the
        outer caller's own token (never more authority than the caller brought) and is checked again."""
        token = self._caller().token
        if token and not any(k.lower() == "authorization" for k in headers):
            headers = {**headers, "authorization": f"Bearer {token}"}
        result: tuple[int, Mapping[str, str], bytes] = self.local_dispatch(method, path, query, headers, body)
        return result

    def file_refusal(
        self, door: str, head: bytes, refusal: tuple[str, str], identity: Identity = EMPTY
    ) -> None:
        """A refusal of one of flightlog's own routes, filed as the door files its own (a call event
        with the request's head and a `dispatch.refused` naming the limit)."""
        self.dispatch(None, door=door, refusal=refusal, head=head, identity=identity)

    def close(self) -> None:
        """Close the door's HTTP client (the Ledger belongs to whoever opened it)."""
        with self._client_lock:
            way, self._way = self._way, None
        if way is not None:
            way.close()

    # -- recording ------------------------------------------------------------------------------

    def _append(self, *events: Event) -> None:
        self.ledger.append(Batch(self.collector, rec.position(), tuple(events)))

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
