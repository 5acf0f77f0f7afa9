"""`ask`: a request held until an operator approves or refuses it, refused when nobody answers in time.

The queue is a folder, `FLIGHTLOG_HOME/asks/` (FLIGHTLOG_HOME is the operator's, mode 0700): the
proxy writes `ID.json` describing the held request and looks for `ID.answer` every `POLL` seconds;
`flightlog approve ID` (or the terminal browser) writes the answer by rename, so it appears whole.
No port is opened for approvals: whoever may answer is whoever may write FLIGHTLOG_HOME, the
operator. Each held request has its own id, so an approval lets exactly that request through; the
next one like it is asked about again. Either way the proxy removes both files.

What the file shows the operator: the method, host, path without its query (secrets often travel
there; the Ledger keeps the query, redacted), who asks, the rule, and for an MCP `tools/call` the
tool and its arguments (cut to `ARGS_SHOWN` characters), since those are what an approval is about.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from egress.errors import AskError
from egress.processes import alive
from egress.rules import Call, Decision

FOLDER: Final = "asks"
POLL: Final = 0.1
ARGS_SHOWN: Final = 500


@dataclass(frozen=True, slots=True)
class Pending:
    """One held request, as `ID.json` describes it."""

    id: str
    at: float
    expires: float
    rule: str
    target: str
    method: str
    host: str
    path: str
    agent: str | None
    session: str | None
    task: str | None
    tool: str | None
    arguments: str | None
    pid: int

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pending:
        values: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**values)

    def line(self, now: float | None = None) -> str:
        """One line for a list: id, time left, who, what, the rule."""
        left = max(0.0, self.expires - (now or time.time()))
        who = ",".join(f"{k}={v}" for k in ("agent", "session", "task") if (v := getattr(self, k)))
        args = f" {self.arguments}" if self.arguments else ""
        return f"{self.id}  {left:4.0f}s left  {who or '-'}  {self.target}{args}  (rule {self.rule})"


class AskBook:
    """The asks folder of one FLIGHTLOG_HOME."""

    def __init__(self, home: Path) -> None:
        self.folder = home / FOLDER

    def open(self, call: Call, decision: Decision, timeout: float) -> Pending:
        """Describe a held request in a new `ID.json`; the proxy then `wait`s for its answer."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        now = time.time()
        arguments = None
        if call.tool is not None and call.arguments is not None:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)[:ARGS_SHOWN]
        while True:
            ask_id = secrets.token_hex(4)
            if not (self.folder / f"{ask_id}.json").exists():
                break
        pending = Pending(
            id=ask_id,
            at=now,
            expires=now + timeout,
            rule=decision.rule,
            target=call.target.partition("?")[0],
            method=call.method,
            host=call.host,
            path=call.path.partition("?")[0],
            agent=call.agent,
            session=call.session,
            task=call.task,
            tool=call.tool,
            arguments=arguments,
            pid=os.getpid(),
        )
        _write_whole(self.folder / f"{ask_id}.json", json.dumps(asdict(pending)))
        return pending

    async def wait(self, pending: Pending, decision: Decision, poll: float = POLL) -> Decision:
        """The operator's answer as a decision, or a refusal once `pending` expires."""
        answer_file = self.folder / f"{pending.id}.answer"
        try:
            while True:
                answer = _read_answer(answer_file)
                if answer is not None:
                    how = "approved" if answer.get("approve") else "refused"
                    by = f" by {answer['by']}" if answer.get("by") else ""
                    limit = f"{how}{by} (ask {pending.id}: {decision.limit})"
                    return Decision("allow" if answer.get("approve") else "deny", decision.rule, limit)
                if time.time() >= pending.expires:
                    timeout = pending.expires - pending.at
                    limit = f"no answer within {timeout:g} s (ask {pending.id}: {decision.limit})"
                    return Decision("deny", decision.rule, limit)
                await asyncio.sleep(poll)
        finally:
            for name in (f"{pending.id}.json", f"{pending.id}.answer"):
                with contextlib.suppress(OSError):
                    (self.folder / name).unlink()

    def pending(self) -> list[Pending]:
        """The requests held now (not yet answered, not expired, their proxy alive), oldest first."""
        out = []
        now = time.time()
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else ():
            try:
                item = Pending.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, TypeError):
                continue
            answered = (self.folder / f"{item.id}.answer").exists()
            if not answered and item.expires > now and alive(item.pid):
                out.append(item)
        return sorted(out, key=lambda p: p.at)

    def answer(self, ask_id: str, approve: bool, by: str = "") -> Pending:
        """Approve (or refuse) the held request `ask_id`; an error when none such is waiting."""
        found = next((p for p in self.pending() if p.id == ask_id), None)
        if found is None:
            raise AskError(
                f"no request {ask_id!r} is waiting for an answer (it was answered, timed out, or its "
                "proxy stopped); `flightlog approve` lists those that are"
            )
        _write_whole(
            self.folder / f"{ask_id}.answer", json.dumps({"approve": approve, "by": by, "at": time.time()})
        )
        return found


def _write_whole(path: Path, text: str) -> None:
    """Write by rename, so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _read_answer(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
