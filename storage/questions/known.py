"""The values a question's words may name: what the Ledger holds for agent, tool, model, host, ...

A plain-words reader that took any word after `agent` as an agent's name read "what did the agent do"
as `agent=do`. So a value is taken only when the Ledger holds it (or it was quoted or `=`-given), and a
bare word ("tokens alpha used", "calls to slack") names a field only through the Ledger's values. The
reader stays pure: it asks a `Known`, which the Ledger answers (`storage.questions.known_values`) and a test
answers from a mapping (`KnownValues`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from storage.questions.vocabulary import FAMILIES


class Known(Protocol):
    """The Ledger's values of a field that a word names."""

    def matches(self, name: str, word: str) -> tuple[str, ...]:
        """Values of field `name` equal to `word` ignoring case; for `host`, else those having `word`
        as one of their dot-separated labels ("slack" names api.slack.com); for `model`, else those
        spelled alike or of the family the word names (`models_named`)."""
        ...


def host_labels(host: str) -> list[str]:
    """The dot-separated labels of a host without its port: `api.slack.com:443` -> api, slack, com."""
    return host.lower().rsplit(":", 1)[0].split(".") if host.count(":") <= 1 else [host.lower()]


def spelled(word: str) -> str:
    """A model's name as spelling does not change it: lower case, letters and digits only
    (`gpt4o`, `GPT-4o` and `gpt-4o` are one name)."""
    return re.sub(r"[^a-z0-9]", "", word.lower())


def pick(name: str, word: str, values: Collection[str]) -> tuple[str, ...]:
    """The values `word` names among `values` (the rule `Known.matches` states)."""
    low = word.lower()
    exact = tuple(sorted({v for v in values if v.lower() == low}))
    if exact or name not in ("host", "model"):
        return exact
    if name == "model":
        return models_named(word, values)
    return tuple(sorted({v for v in values if low in host_labels(v)}))


def models_named(word: str, values: Collection[str]) -> tuple[str, ...]:
    """The models a word names by spelling (`gpt4o` ~ `gpt-4o`), as their family or provider
    (`claude`, `anthropic`: every Anthropic model held), or by a word of their name of four
    letters or more (`haiku`, `sonnet`, `mini`)."""
    norm = spelled(word)
    same = tuple(sorted({v for v in values if spelled(v) == norm}))
    if same or not norm:
        return same
    prefixes = FAMILIES.get(norm.removesuffix("s"), ())
    if prefixes:
        return tuple(sorted({v for v in values if spelled(v).startswith(prefixes)}))
    if norm.isalpha() and len(norm) >= 4:  # a model's own word: haiku, sonnet, opus, mini
        return tuple(sorted({v for v in values if norm in re.split(r"[^a-z0-9]+", v.lower())}))
    return ()


@dataclass(frozen=True, slots=True)
class KnownValues:
    """Known values held in memory: field -> the values the Ledger holds."""

    values: Mapping[str, Collection[str]] = field(default_factory=dict)

    def matches(self, name: str, word: str) -> tuple[str, ...]:
        return pick(name, word, self.values.get(name, ()))
