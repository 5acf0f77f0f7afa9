"""The manifest: the Directory as TSV, the one read an agent makes before anything else.

    # directory: flightlog
    # bundles: article tool
    # snapshot: 5844e0935e6e...
    id<TAB>bundle<TAB>kind<TAB>status<TAB>grain<TAB>summary<TAB>links
    ...

Rows are grouped by bundle in sorted order; an empty cell is `-`; `links` is ids separated by
spaces. The names-only projection keeps the preamble and lists ids alone; a bundle-scoped one keeps
the preamble and that bundle's rows. Sizes are measured in bytes; tokens are estimated at bytes/4,
and the manifest tool's advice uses that estimate of the full manifest (no tokenizer at run time).
Measured with a real tokenizer (o200k_base, `python -m bench.directory` with bpe-openai installed) on
the generated 25,000-row Directory: the full manifest is 3,748,327 B, 923,424 tokens (bytes/4 says
937,082, within 1.5%); names-only is 655,583 B, 188,666 tokens (bytes/4 says 163,896: ids cut into
more tokens than prose). So names-only saves a little less in tokens than in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from catalog.errors import UnknownBundle
from catalog.index import Row

COLUMNS: Final = ("id", "bundle", "kind", "status", "grain", "summary", "links")
BYTES_PER_TOKEN: Final = 4
WHOLE_READ_MAX_TOKENS: Final = 8000
"""Above this estimate, the manifest tool advises search or a bundle-scoped manifest instead."""


@dataclass(frozen=True, slots=True)
class Size:
    bytes: int

    @property
    def tokens(self) -> int:
        return (self.bytes + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN


def cell(value: str) -> str:
    """A TSV cell: no tabs or newlines inside, `-` when empty."""
    text = " ".join(value.split())
    return text or "-"


def line(row: Row) -> str:
    return "\t".join(
        (
            row.id,
            row.bundle,
            cell(row.kind),
            cell(row.status),
            cell(row.grain),
            cell(row.summary),
            cell(" ".join(row.links)),
        )
    )


def preamble(name: str, bundles: Iterable[str], snapshot: str) -> list[str]:
    return [f"# directory: {name}", f"# bundles: {' '.join(bundles)}", f"# snapshot: {snapshot}"]


def render(
    name: str,
    bundles: list[str],
    snapshot: str,
    rows: Iterable[Row],
    *,
    bundle: str | None = None,
    names: bool = False,
) -> str:
    """The manifest text (whole, one bundle's, or names only)."""
    if bundle is not None and bundle not in bundles:
        raise UnknownBundle(
            f'no bundle is called "{bundle}"; the bundles are: {" ".join(bundles) or "(none)"}'
        )
    chosen = [r for r in rows if bundle is None or r.bundle == bundle]
    out = preamble(name, bundles, snapshot)
    if names:
        out.append("id")
        out.extend(r.id for r in chosen)
    else:
        out.append("\t".join(COLUMNS))
        out.extend(line(r) for r in chosen)
    return "\n".join(out) + "\n"


def advice(full: Size) -> str:
    """The manifest tool's closing sentence, from the Directory's measured size."""
    if full.tokens > WHOLE_READ_MAX_TOKENS:
        return (
            f"The full manifest measures ~{full.tokens:,} tokens; prefer search or manifest(bundle) over "
            "reading it whole."
        )
    return f"The full manifest measures ~{full.tokens:,} tokens; reading it whole is cheaper than searching."
