"""The resolver: anyone's words to ranked rows, each with the layer that matched and why.

Lexical only: no model, no embeddings. A score is an integer that names its layer:

    1000 name      the row's name is the query
     900 prefix    the query is the start of the name
     850 phrase    the name is exactly the query's words
     800 words     every query word is a word of the name
 750-772 alias     a query word is an alias meaning this row (+2 per other query word in the row)
     700 text      every query word is somewhere in the row
     600 lead      the name starts with the first word and the rest is in the row
     300 typo      a word is within its edit budget (Damerau-Levenshtein, with transpositions)
     200 sound     a word sounds like a word of the name (Soundex)

Question framing ("how do I", "where is my") is stripped first. The edit budget scales with the
word: none under 4 letters, 1 up to 7, 2 from 8. The two fuzzy layers only run when the exact
layers found fewer than `k` rows, since they can never outrank them. Nothing is ever invented:
no hit is an empty list, and `no_match(query)` says so plainly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import reduce
from typing import Final

import jellyfish
from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from catalog.aliases import Targets
from catalog.index import NAME, NORM, Index, Row, SectionIndex
from catalog.words import content_words, strip_framing, words

LAYERS: Final = {
    "name": 1000,
    "prefix": 900,
    "phrase": 850,
    "words": 800,
    "alias": 750,
    "text": 700,
    "lead": 600,
    "typo": 300,
    "sound": 200,
}
ALIAS_MAX: Final = 772


@dataclass(frozen=True, slots=True)
class Hit:
    """One resolved row: its score (which names its layer) and the words that matched."""

    row: Row
    score: int
    layer: str
    matched: tuple[str, ...]


def budget(word: str) -> int:
    """How many edits a word may be away and still match: scaled to its length."""
    n = len(word)
    return 0 if n < 4 else 1 if n < 8 else 2


def no_match(query: str) -> str:
    """The plain answer when no layer matches."""
    return f'Nothing in the Directory is called, or means, "{query.strip()}".'


Key = tuple[str, int]
Offer = Callable[[Key, int, str, Iterable[str]], None]


class Resolver:
    """Resolve queries against one loaded index and its aliases."""

    def __init__(self, index: Index, aliases: Targets | None = None) -> None:
        self.index = index
        self.aliases = aliases or {}
        self._soundex: dict[str, dict[str, list[str]]] = {}

    def find(self, query: str, k: int = 10, bundle: str | None = None) -> list[Hit]:
        """The best `k` rows for `query` (all bundles, or one), best first."""
        text = strip_framing(query)
        qwords = words(text)
        if not qwords or k <= 0:
            return []
        sections = [s for b, s in self.index.sections.items() if bundle is None or b == bundle]
        found: dict[Key, tuple[int, str, tuple[str, ...]]] = {}

        def offer(key: Key, score: int, layer: str, matched: Iterable[str]) -> None:
            old = found.get(key)
            if old is None or score > old[0]:
                found[key] = (score, layer, tuple(matched))

        meaning = content_words(qwords)
        for s in sections:
            self._exact_layers(s, text, qwords, meaning, offer)
        self._alias_layer(meaning, bundle, offer)
        if len(found) < k:
            for s in sections:
                self._typo_layer(s, meaning, offer)
        if len(found) < k:
            for s in sections:
                self._sound_layer(s, meaning, offer)
        ranked = sorted(
            found.items(),
            key=lambda kv: (-kv[1][0], -len(kv[1][2]), len(self._name(kv[0])), self._name(kv[0]), kv[0]),
        )
        return [
            Hit(self.index.row(*key), score, layer, matched) for key, (score, layer, matched) in ranked[:k]
        ]

    def _name(self, key: Key) -> str:
        return str(self.index.sections[key[0]].rows[key[1]][NAME])

    def _exact_layers(
        self, s: SectionIndex, text: str, qwords: list[str], meaning: list[str], offer: Offer
    ) -> None:
        b = s.bundle
        lower = text.lower()
        qnorm = " ".join(qwords)
        for i in s.exact.get(lower, ()):
            offer((b, i), LAYERS["name"], "name", qwords)
        for i in s.lower_prefixed(lower) + s.lower_prefixed("_".join(qwords)):
            if s.rows[i][NORM] != qnorm or s.rows[i][NAME].lower() == lower:
                offer((b, i), LAYERS["prefix"], "prefix", qwords)
        for i in s.norms.get(qnorm, ()):
            offer((b, i), LAYERS["phrase"], "phrase", qwords)
        for i in _all(s.name_words, meaning):
            offer((b, i), LAYERS["words"], "words", meaning)
        everywhere = reduce(lambda acc, w: acc & s.text_set(w), meaning[1:], s.text_set(meaning[0]))
        for i in everywhere:
            offer((b, i), LAYERS["text"], "text", meaning)
        if len(meaning) > 1:
            rest = reduce(lambda acc, w: acc & s.text_set(w), meaning[2:], s.text_set(meaning[1]))
            for i in s.norm_prefixed(meaning[0]):
                if i in rest:
                    offer((b, i), LAYERS["lead"], "lead", meaning)

    def _alias_layer(self, meaning: list[str], bundle: str | None, offer: Offer) -> None:
        if not self.aliases:
            return
        joined = f" {' '.join(meaning)} "
        for alias, targets in self.aliases.items():
            if f" {alias} " not in joined:
                continue
            others = [w for w in meaning if w not in alias.split()]
            for b, i in targets:
                if bundle is not None and b != bundle:
                    continue
                s = self.index.sections[b]
                present = [w for w in others if i in s.text_set(w)]
                score = min(ALIAS_MAX, LAYERS["alias"] + 2 * len(present))
                offer((b, i), score, "alias", [alias, *present])

    def _typo_layer(self, s: SectionIndex, meaning: list[str], offer: Offer) -> None:
        vocab = list(s.name_words)
        for word in meaning:
            limit = budget(word)
            if not limit:
                continue
            near = process.extract(
                word, vocab, scorer=DamerauLevenshtein.distance, score_cutoff=limit, limit=None
            )
            for other, distance, _ in near:
                if distance == 0:
                    continue
                for i in s.name_words[other]:
                    offer((s.bundle, i), LAYERS["typo"], "typo", [f"{word}~{other}"])

    def _sound_layer(self, s: SectionIndex, meaning: list[str], offer: Offer) -> None:
        codes = self._soundex.get(s.bundle)
        if codes is None:
            codes = {}
            for w in s.name_words:
                if w.isalpha():
                    codes.setdefault(jellyfish.soundex(w), []).append(w)
            self._soundex[s.bundle] = codes
        for word in meaning:
            if not word.isalpha() or len(word) < 2:
                continue
            for other in codes.get(jellyfish.soundex(word), ()):
                for i in s.name_words[other]:
                    offer((s.bundle, i), LAYERS["sound"], "sound", [f"{word}~{other}"])


def _all(postings: dict[str, list[int]], ws: list[str]) -> set[int]:
    """Rows present in the postings of every word."""
    lists = sorted((postings.get(w, []) for w in ws), key=len)
    if not lists or not lists[0]:
        return set()
    out = set(lists[0])
    for other in lists[1:]:
        out &= set(other)
    return out
