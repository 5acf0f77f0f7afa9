"""The resolver: anyone's words to ranked rows, each with the layer that matched and why.

Lexical only: no model, no embeddings. A score is an integer that names its layer:

    1000 name      the row's name is the query
     900 prefix    the query is the start of the name
     850 phrase    the name is exactly the query's words, in any order ("create github issue" is
                   GITHUB_ISSUE_CREATE), each as often as the name holds it
     800 words     every query word is a word of the name (plurals and -ing/-ed forms fold together)
 750-772 alias     a query word, spelled right or corrected, is an alias meaning this row; each other
                   query word adds 14 when it is a word of the name, 2 when it is elsewhere in the row
     700 text      every query word is somewhere in the row (folded as in `words`)
     600 lead      the name starts with the first word and the rest is in the row (folded)
     300 typo      a word is within its edit budget (Damerau-Levenshtein, with transpositions)
     200 sound     a word sounds like a word of the name (Soundex)

The layers from 700 down look only at the words that carry meaning: a stop word ("the", "a", "my",
`words.STOPWORDS`) is somewhere in nearly every row, so a query of stop words alone matches nothing
there (it can still meet a row whose name holds it, at 800 and above).

Question framing ("how do I", "where is my") is stripped first. Before the alias layer, a query word
the Directory does not know (no row holds it, no alias is it) is corrected to the alias word it is
nearest to: within its edit budget (none under 4 letters, 1 up to 7, 2 from 8), else one that sounds
the same. Each hit carries `read_as`, the query words it was matched on after that correction, and
`matched`, how each met the row (`a~b`: a was taken for b). Ties inside a layer go to the row more of
whose name matched, then to the shorter name. The fuzzy layers only run when the exact ones found
fewer than `k` rows, since they can never outrank them. Nothing is ever invented: no hit is an empty
list, and `no_match(query)` says so plainly.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Final

from catalog.aliases import Targets
from catalog.index import Index, Row, SectionIndex
from catalog.words import STOPWORDS, content_words, forms, strip_framing, words

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
ALIAS_IN_NAME: Final = 14
ALIAS_IN_TEXT: Final = 2
DIRECTORY_ROUTE: Final = "GET /api/directory"


@dataclass(frozen=True, slots=True)
class Hit:
    """One resolved row: its score (which names its layer), the words it was read as and matched."""

    row: Row
    score: int
    layer: str
    matched: tuple[str, ...]
    read_as: tuple[str, ...] = ()


def budget(word: str) -> int:
    """How many edits a word may be away and still match: scaled to its length."""
    n = len(word)
    return 0 if n < 4 else 1 if n < 8 else 2


def no_match(query: str) -> str:
    """The plain answer when no layer matches, pointing at the listing of every row."""
    said = f'Nothing in the Directory is called, or means, "{query.strip()}".'
    return f"{said} Every row is listed at {DIRECTORY_ROUTE}"


Key = tuple[str, int]
Found = tuple[int, str, tuple[str, ...], tuple[str, ...]]
Offer = Callable[..., None]
Best = Callable[[SectionIndex, Iterable[int]], Iterable[int]]


class Resolver:
    """Resolve queries against one loaded index and its aliases."""

    def __init__(self, index: Index, aliases: Targets | Callable[[], Targets] | None = None) -> None:
        self.index = index
        self._aliases = aliases or {}
        self._soundex: dict[str, dict[str, list[str]]] = {}
        self._alias_sounds: dict[str, list[str]] | None = None

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
        loose = meaning if any(w not in STOPWORDS for w in meaning) else []  # 700 down: no stop words
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
            lambda s, offer: self._text_layer(s, loose, offer, best),
            lambda s, offer: self._lead_layer(s, loose, offer, best),
            lambda s, offer: self._fuzzy_layer(s, loose, offer, "typo", self._near),
            lambda s, offer: self._fuzzy_layer(s, loose, offer, "sound", self._sounds),
        ]
        need = k
        for n, step in enumerate(per_section):
            need = k - len(found)
            layer: dict[Key, Found] = {}

            def offer(
                key: Key,
                score: int,
                name: str,
                matched: Iterable[str],
                read_as: Iterable[str] | None = None,
                layer: dict[Key, Found] = layer,
            ) -> None:
                if key in found:
                    return
                old = layer.get(key)
                if old is None or score > old[0]:
                    got = tuple(matched)
                    layer[key] = (score, name, got, tuple(read_as) if read_as is not None else got)

            if n == 4:
                self._alias_layer(self._corrected(meaning), bundle, offer)
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
        return [
            Hit(self.index.row(*key), score, name, matched, read_as)
            for key, (score, name, matched, read_as) in ranked[:k]
        ]

    def _rank(self, item: tuple[Key, Found]) -> tuple[int, int, int, int, str, Key]:
        key, (score, _, matched, _) = item
        name = self._name(key)
        return (
            -score,
            -_cover(self.index.sections[key[0]].normals[key[1]], matched),
            -len(matched),
            len(name),
            name,
            key,
        )

    def _name(self, key: Key) -> str:
        return self.index.sections[key[0]].names[key[1]]

    # ---- the exact layers ------------------------------------------------------------------------

    def _name_layer(self, s: SectionIndex, text: str, qwords: list[str], offer: Offer) -> None:
        for i in s.named_rows(text.lower()):
            offer((s.bundle, i), LAYERS["name"], "name", qwords)

    def _prefix_layer(self, s: SectionIndex, text: str, qwords: list[str], offer: Offer, best: Best) -> None:
        lower, qnorm = text.lower(), " ".join(qwords)
        for i in best(s, s.lower_prefixed(lower) + s.lower_prefixed("_".join(qwords))):
            if s.normals[i] != qnorm or s.names[i].lower() == lower:
                offer((s.bundle, i), LAYERS["prefix"], "prefix", qwords)

    def _phrase_layer(self, s: SectionIndex, qwords: list[str], offer: Offer) -> None:
        """Rows whose name is the query's words in any order: every word is a name word (exactly,
        not folded), and the name has no other word, nor one more often than the query says."""
        want = sorted(qwords)
        postings = sorted((s.name_words.get(w, ()) for w in set(qwords)), key=len)
        if not postings[0]:
            return
        rows = set(postings[0]).intersection(*postings[1:])
        for i in sorted(rows):
            if sorted(s.normals[i].split()) == want:
                offer((s.bundle, i), LAYERS["phrase"], "phrase", qwords)

    def _words_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        for i in best(s, _all(s.name_words, meaning)):
            offer((s.bundle, i), LAYERS["words"], "words", meaning)

    def _text_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        if not meaning:
            return
        everywhere = reduce(lambda acc, w: acc & _in_text(s, w), meaning[1:], _in_text(s, meaning[0]))
        for i in best(s, everywhere):
            offer((s.bundle, i), LAYERS["text"], "text", meaning)

    def _lead_layer(self, s: SectionIndex, meaning: list[str], offer: Offer, best: Best) -> None:
        if len(meaning) < 2:
            return
        rest = reduce(lambda acc, w: acc & _in_text(s, w), meaning[2:], _in_text(s, meaning[1]))
        if not rest:
            return
        for i in best(s, {i for i in s.norm_prefixed(meaning[0]) if i in rest}):
            offer((s.bundle, i), LAYERS["lead"], "lead", meaning)

    # ---- aliases, after spelling correction -------------------------------------------------------

    def _corrected(self, meaning: list[str]) -> list[str]:
        """`meaning` with each word the Directory does not know replaced by the alias word it means."""
        vocab = sorted({w for alias in self.aliases for w in alias.split()})
        if not vocab:
            return meaning
        out = []
        for word in meaning:
            out.append(word if word in vocab or self._known(word) else self._alias_word(word, vocab) or word)
        return out

    def _known(self, word: str) -> bool:
        return any(word in s.name_words or word in s.text_words for s in self.index.sections.values())

    def _alias_word(self, word: str, vocab: list[str]) -> str | None:
        """The alias word `word` is a misspelling of: nearest by edits, else the one it sounds like."""
        limit = budget(word)
        if not limit or not word.isalpha():
            return None
        near = _nearest(word, vocab, limit)
        if near:
            return min(near, key=lambda n: (n[1], n[0]))[0]
        if self._alias_sounds is None:
            self._alias_sounds = {}
            for w in vocab:
                if w.isalpha():
                    self._alias_sounds.setdefault(_soundex(w), []).append(w)
        alike = [w for w in self._alias_sounds.get(_soundex(word), ()) if _distance(word, w) <= limit + 1]
        return min(alike, key=lambda w: (_distance(word, w), w)) if alike else None

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
                named = set(s.normals[i].split())
                in_name = [w for w in others if forms(w) & named]
                in_text = [w for w in others if w not in in_name and i in _in_text(s, w)]
                score = LAYERS["alias"] + ALIAS_IN_NAME * len(in_name) + ALIAS_IN_TEXT * len(in_text)
                offer((b, i), min(ALIAS_MAX, score), "alias", [alias, *in_name, *in_text], alias.split())

    # ---- the fuzzy layers ------------------------------------------------------------------------

    def _fuzzy_layer(
        self,
        s: SectionIndex,
        meaning: list[str],
        offer: Offer,
        layer: str,
        near: Callable[[SectionIndex, str], Iterable[str]],
    ) -> None:
        """Rows with a name word near a query word; each row lists every query word its name holds."""
        rows: dict[int, list[str]] = {}
        fuzzy: dict[int, list[str]] = {}
        for word in meaning:
            for other in near(s, word):
                for i in s.name_words[other]:
                    rows.setdefault(i, []).append(f"{word}~{other}")
                    fuzzy.setdefault(i, []).append(word)
        for i, matched in rows.items():
            named = set(s.normals[i].split())
            exact = [w for w in meaning if w not in fuzzy[i] and forms(w) & named]
            offer((s.bundle, i), LAYERS[layer], layer, [*matched, *exact], [*dict.fromkeys(fuzzy[i]), *exact])

    def _near(self, s: SectionIndex, word: str) -> Iterable[str]:
        limit = budget(word)
        if not limit:
            return ()
        return [other for other, distance, _ in _nearest(word, s.spelled_words, limit) if distance]

    def _sounds(self, s: SectionIndex, word: str) -> Iterable[str]:
        codes = self._soundex.get(s.bundle)
        if codes is None:
            codes = {}
            for w in s.name_words:
                if w.isalpha():
                    codes.setdefault(_soundex(w), []).append(w)
            self._soundex[s.bundle] = codes
        if not word.isalpha() or len(word) < 2:
            return ()
        return codes.get(_soundex(word), ())


# The fuzzy layers' libraries are imported on their first use: most queries end in an exact layer.


def _nearest(word: str, choices: list[str], limit: int) -> list[tuple[str, int, int]]:
    """Every choice within `limit` Damerau-Levenshtein edits of `word`: (choice, distance, index)."""
    from rapidfuzz import process
    from rapidfuzz.distance import DamerauLevenshtein

    return process.extract(word, choices, scorer=DamerauLevenshtein.distance, score_cutoff=limit, limit=None)


def _distance(a: str, b: str) -> int:
    from rapidfuzz.distance import DamerauLevenshtein

    return int(DamerauLevenshtein.distance(a, b))


def _soundex(word: str) -> str:
    import jellyfish

    return str(jellyfish.soundex(word))


def _cover(norm: str, matched: tuple[str, ...]) -> int:
    """How many of the name's words the matched words account for (the tie-break inside a layer)."""
    return len(set(norm.split()) & _read_forms(matched))


@lru_cache(maxsize=4096)
def _read_forms(matched: tuple[str, ...]) -> frozenset[str]:
    """Every form of the words a hit was matched on (`a~b` counts as b)."""
    return frozenset().union(*(forms(m.rsplit("~", 1)[-1]) for m in matched))


def _in_text(s: SectionIndex, word: str) -> frozenset[int]:
    """The rows whose text holds `word` or one of its folded forms."""
    return s.folded_set(word)


def _first(n: int, items: Iterable[int]) -> list[int]:
    out: list[int] = []
    for i in items:
        if len(out) >= n:
            break
        out.append(i)
    return out


def _all(postings: Mapping[str, Sequence[int]], ws: list[str]) -> set[int]:
    """Rows whose name holds every word (or one of its folded forms)."""
    lists = sorted(({i for f in forms(w) for i in postings.get(f, ())} for w in ws), key=len)
    if not lists or not lists[0]:
        return set()
    out = set(lists[0])
    for other in lists[1:]:
        out &= other
    return out
