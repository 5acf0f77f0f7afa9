"""What changed between a recorded answer and a new one: status, header fields and body, as unified diffs.

Bodies are compared decoded (content codings undone by `formats.codings`) and JSON bodies
pretty-printed with sorted keys, so a reordered or re-indented document shows only its real changes.
Binary bodies are named by size and hash rather than dumped.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from storage.heads import Fields


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer as compared: status (None when there was none), header fields, decoded body, error."""

    status: int | None
    reason: str
    fields: Fields
    body: bytes
    error: str | None = None


def status_line(answer: Answer) -> str:
    if answer.status is None:
        return f"no answer ({answer.error or 'nothing recorded'})"
    return f"{answer.status} {answer.reason}".rstrip()


def header_lines(fields: Fields) -> list[str]:
    return [f"{n.decode('latin-1')}: {v.decode('latin-1')}" for n, v in fields]


def body_lines(body: bytes) -> list[str]:
    """A body as lines to diff: pretty JSON, else UTF-8 text lines, else one line naming the bytes."""
    if not body:
        return []
    try:
        doc: Any = json.loads(body)
    except ValueError:
        pass
    else:
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    try:
        return body.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return [f"<{len(body)} bytes of binary, sha256 {hashlib.sha256(body).hexdigest()}>"]


@dataclass(frozen=True, slots=True)
class AnswerDiff:
    """The differences between two answers; `same` when there are none at all."""

    recorded: str
    replayed: str
    status: tuple[str, str]
    headers: tuple[str, ...]
    body: tuple[str, ...]

    @property
    def same(self) -> bool:
        return self.status[0] == self.status[1] and not self.headers and not self.body

    def render(self) -> str:
        """The diff as a person reads it on a terminal."""
        old, new = self.status
        lines = [f"status: {old}" if old == new else f"status: {old} -> {new}"]
        lines.append("headers: same" if not self.headers else "headers:")
        lines += self.headers
        lines.append("body: same" if not self.body else "body:")
        lines += self.body
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "recorded": self.recorded,
            "replayed": self.replayed,
            "same": self.same,
            "status": {"recorded": self.status[0], "replayed": self.status[1]},
            "headers_diff": list(self.headers),
            "body_diff": list(self.body),
        }


def _unified(old: list[str], new: list[str], recorded: str, replayed: str) -> tuple[str, ...]:
    return tuple(difflib.unified_diff(old, new, f"recorded {recorded}", f"replayed {replayed}", lineterm=""))


def diff_answers(old: Answer, new: Answer, recorded: str, replayed: str) -> AnswerDiff:
    """Compare a recorded answer with a replayed one, naming each side by its action id."""
    return AnswerDiff(
        recorded=recorded,
        replayed=replayed,
        status=(status_line(old), status_line(new)),
        headers=_unified(header_lines(old.fields), header_lines(new.fields), recorded, replayed),
        body=_unified(body_lines(old.body), body_lines(new.body), recorded, replayed),
    )
