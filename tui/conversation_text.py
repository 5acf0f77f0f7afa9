"""A conversation as blocks of text to draw: the system prompt, each message by role, the tools offered
(with their Directory row where one matches), the answer with its usage and cost, and where a cut
stream stopped. Pure, so the conversation tab is tested without a terminal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from formats.answers import Answer, ToolCall
from formats.conversation import Conversation
from tui import figures


@dataclass(frozen=True, slots=True)
class Block:
    title: str
    text: str
    kind: str
    """system, user, assistant, tool, tools, answer, note: the block's style."""


def _pretty(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    short = json.dumps(value, ensure_ascii=False)
    return short if len(short) <= 80 else json.dumps(value, ensure_ascii=False, indent=2)


def calls_text(calls: tuple[ToolCall, ...]) -> str:
    return "\n".join(
        f"→ {c.name}({_pretty(c.arguments)})" + (f"  [{c.call_id}]" if c.call_id else "") for c in calls
    )


def answer_text(answer: Answer) -> str:
    """The answer's final text and its tool calls, as one piece (what both stream forms must equal)."""
    parts = [answer.text] if answer.text else []
    if answer.tool_calls:
        parts.append(calls_text(answer.tool_calls))
    return "\n\n".join(parts) or "(no text and no tool call)"


def stopped(answer: Answer, partial: bool) -> str:
    """Where a stream stopped, said plainly; empty for an answer that ended as it should."""
    if not (partial or not answer.complete):
        return ""
    said = f"{len(answer.text):,} characters of text" + (
        f" and {len(answer.tool_calls)} tool call(s)" if answer.tool_calls else ""
    )
    where = f"after {answer.events} server-sent events" if answer.streamed else "before the answer was whole"
    return f"partial: the stream stopped {where}, with {said} so far, before its closing event"


def blocks(
    conv: Conversation,
    directory: Mapping[str, str | None] | None,
    *,
    partial: bool,
    cost: float | None,
    tokens: tuple[int | None, int | None] = (None, None),
) -> list[Block]:
    """Everything the conversation tab shows, top to bottom.

    `directory` maps an offered tool's name to its Directory row's id (None: no row); no mapping at all
    means no Directory is connected, and nothing is said about rows.
    `tokens` and `cost` are the Ledger's figures for the exchange; the answer's own usage fills tokens in
    where the Ledger has none.
    """
    out = [Block("call", f"{conv.api} · model {conv.model or '(not named)'}", "note")]
    if conv.system:
        out.append(Block("system", conv.system, "system"))
    for n, m in enumerate(conv.messages, 1):
        text = m.text
        if m.tool_calls:
            text = "\n\n".join(x for x in (text, calls_text(m.tool_calls)) if x)
        title = f"{n} · {m.role}" + (f" (result of {m.answers})" if m.answers else "")
        out.append(
            Block(title, text or "(empty)", m.role if m.role in ("user", "assistant", "tool") else "user")
        )
    if conv.tools:
        lines = []
        for name, description in conv.tools:
            line = f"{name} — {description.splitlines()[0]}" if description else name
            if directory is not None:
                row = directory.get(name)
                line += f"  [Directory: {row}]" if row else "  [no Directory row]"
            lines.append(line)
        out.append(Block(f"tools offered ({len(conv.tools)})", "\n".join(lines), "tools"))
    a = conv.answer
    tin = tokens[0] if tokens[0] is not None else a.tokens_in
    tout = tokens[1] if tokens[1] is not None else a.tokens_out
    usage = " · ".join(
        x
        for x in (
            "streamed" if a.streamed else "",
            f"stop: {a.stop}" if a.stop else "",
            f"tokens {figures.tokens(tin, tout)}" if tin is not None or tout is not None else "",
            f"cost {figures.cost(cost)}" if cost is not None else "",
        )
        if x
    )
    out.append(Block("answer" + (f" ({usage})" if usage else ""), answer_text(a), "answer"))
    where = stopped(a, partial)
    if where:
        out.append(Block("stopped", where, "note"))
    return out
