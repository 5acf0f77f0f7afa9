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

import heapq
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
Found = tuple[int, str, tuple[str, ...]]
Best = Callable[[SectionIndex, Iterable[int]], Iterable[int]]


class Resolver:
    """Resolve queries against one loaded index and its aliases."""

    def __init__(self, index: Index, aliases: Targets | Callable[[], Targets] | None = None) -> None:
        self.index = index
        self._aliases = aliases or {}
        self._soundex: dict[str, dict[str, list[str]]] = {}

    @property
    def aliases(self) -> Targets:
        """Each alias's rows (resolved on first use when given as a function)."""
        if callable(self._aliases):
            self._aliases = self._aliases()
        return self._aliases

    def find(self, query: str, k: int = 10, bundle: str | None = None) -> list[Hit]:
        """The best `k` rows for `query` (all bundles, or one), best first.

        Layers run from the highest score down and stop once `k` rows are found: a lower layer
        can never outrank a higher one. Within a layer only the best rows still needed are kept.
        """
        text = strip_framing(query)
        qwords = words(text)
        if not qwords or k <= 0:
            return []
        sections = [s for b, s in self.index.sections.items() if bundle is None or b == bundle]
        meaning = content_words(qwords)
        found: dict[Key, Found] = {}

        def best(s: SectionIndex, rows: Iterable[int]) -> Iterable[int]:
            """Of many rows of one layer, only the first `need` in tie order can make the cut."""
            rows = rows if isinstance(rows, set | frozenset) else set(rows)
            if len(rows) <= 4 * need:
                return rows
            return _first(need, (i for i in s.by_rank if i in rows and (s.bundle, i) not in found))

        per_section: list[Callable[[SectionIndex, Offer], None]] = [
            lambda s, offer: self._name_layer(s, text, qwords, offer),
            lambda s, offer: self._prefix_layer(s, text, qwords, offer, best),
            lambda s, offer: self._phrase_layer(s, qwords, offer),
            lambda s, offer: self._words_layer(s, meaning, offer, best),
            lambda s, offer: None,  # the alias layer runs once, over every section (below)
            lambda s, offer: self._text_layer(s, meaning, offer, best),
            lambda s, offer: self._lead_layer(s, meaning, offer, best),
            lambda s, offer: self._typo_layer(s, meaning, offer),
            lambda s, offer: self._sound_layer(s, meaning, offer),
        ]
        need = k
        for n, step in enumerate(per_section):
            need = k - len(found)
            layer: dict[Key, Found] = {}

            def offer(
                key: Key, score: int, name: str, matched: Iterable[str], layer: dict[Key, Found] = layer
            ) -> None:
                if key in found:
                    return
                old = layer.get(key)
                if old is None or score > old[0]:
                    layer[key] = (score, name, tuple(matched))

            if n == 4:
                self._alias_layer(meaning, bundle, offer)
            for s in sections:
                step(s, offer)
            need = k - len(found)
            chosen = (
                heapq.nsmallest(need, layer.items(), key=self._rank) if len(layer) > need else layer.items()
            )
            found.update(chosen)
            if len(found) >= k:
                break
        ranked = sorted(found.items(), key=self._rank)
        return [Hit(self.index.row(*key), score, name, matched) for key, (score, name, matched) in ranked[:k]]

    def _rank(self, item: tuple[Key, Found]) -> tuple[int, int, int, str, Key]:
        key, (score, _, matched) = item
        name = self._name(key)
        return (-score, -len(matched), len(name), name, key)

    def _name(self, key: Key) -> str:
        return str(self.index.sections[key[0]].rows[key[1]][NAME])

    def _name_layer(self, s: SectionIndex, text: str, qwords: list[str], offer: Offer) -> None:
        for i in s.exact.get(text.lower(), ()):
            offer((s.bundle, i), LAYERS["name"], "name", qwords)

    def _prefix_layer(self, s: SectionIndex, text: str, qwords: list[str], offer: Offer, best: Best) -> None:
        lower, qnorm = text.lower(), " ".join(qwords)
        for i in best(s, s.lower_prefixed(lower) + s.lower_prefixed("_".join(qwords))):
            if s.rows[i][NORM] != qnorm or s.rows[i][NAME].lower() == lower:
                offer((s.bundle, i), LAYERS["prefix"], "prefix", qwords)

    def _phrase_layer(self, s: SectionIndex, qwords: list[str], offer: Offer) -> None:
        for i in s.norms.get(" ".join(qwords), ()):
            offer((s.bundle, i), LAYERS["phrase"], "phrase", qwords)

    def _words_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        for i in best(s, _all(s.name_words, meaning)):
            offer((s.bundle, i), LAYERS["words"], "words", meaning)

    def _text_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        everywhere = reduce(lambda acc, w: acc & s.text_set(w), meaning[1:], s.text_set(meaning[0]))
        for i in best(s, everywhere):
            offer((s.bundle, i), LAYERS["text"], "text", meaning)

    def _lead_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        if len(meaning) < 2:
            return
        rest = reduce(lambda acc, w: acc & s.text_set(w), meaning[2:], s.text_set(meaning[1]))
        if not rest:
            return
        for i in best(s, {i for i in s.norm_prefixed(meaning[0]) if i in rest}):
            offer((s.bundle, i), LAYERS["lead"], "lead", meaning)

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
        vocab = s.spelled_words
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


def _first(n: int, items: Iterable[int]) -> list[int]:
    out: list[int] = []
    for i in items:
        if len(out) >= n:
            break
        out.append(i)
    return out


def _all(postings: dict[str, list[int]], ws: list[str]) -> set[int]:
    """Rows present in the postings of every word."""
    lists = sorted((postings.get(w, []) for w in ws), key=len)
    if not lists or not lists[0]:
        return set()
    out = set(lists[0])
    for other in lists[1:]:
        out &= set(other)
    return out
