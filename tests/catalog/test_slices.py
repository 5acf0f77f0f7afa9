"""`get` slices and `find` windows, framed so a model knows where it is; `search` rows and `pos`."""

from __future__ import annotations

import pytest

from catalog.agent_api import AgentApi
from catalog.directory import Directory
from catalog.document import sections
from catalog.errors import UnknownBundle
from catalog.slices import Slice, cut, join, pos
from tests.catalog.conftest import row


def test_frames_whole_partial_and_missing() -> None:
    """Whole reads frame as `@@ id`, partial as `[start..end of total]`, unknown ids last."""
    text = join([cut("a", "alpha", Slice()), cut("b", "0123456789", Slice(limit=4))], ["c"])
    assert text == "@@ a\nalpha\n@@ b [0..4 of 10]\n0123\n@@ missing\nc"


def test_slice_bounds() -> None:
    """Offsets clamp: negative is 0, past the end is empty at total; the cap bounds a read without limit."""
    assert cut("b", "0123456789", Slice(offset=-5, limit=3)) == "@@ b [0..3 of 10]\n012"
    assert cut("b", "0123456789", Slice(offset=50)) == "@@ b [10..10 of 10]\n"
    assert cut("b", "0123456789", Slice(offset=8, limit=5)) == "@@ b [8..10 of 10]\n89"
    assert cut("b", "x" * 20, Slice(cap=15)) == "@@ b [0..15 of 20]\n" + "x" * 15
    assert cut("b", "x" * 20, Slice(offset=15, cap=15)) == "@@ b [15..20 of 20]\n" + "x" * 5
    assert cut("é", "ééé", Slice(limit=2)) == "@@ é [0..2 of 3]\néé"  # characters, never bytes


def test_find_window_and_every_offset() -> None:
    """find centres a window on the first match and lists every match; a miss says so."""
    text = "x" * 1000 + "Needle" + "y" * 3000 + "needle" + "z" * 10
    framed = cut("d", text, Slice(find="NEEDLE"))
    head, body = framed.split("\n", 1)
    assert head == f"@@ d [3..2003 of {len(text)}] 2 matches at 1000 4006"
    assert "Needle" in body and len(body) == 2000
    assert cut("d", text, Slice(find="needle", limit=10)).startswith("@@ d [998..1008 of 4022] 2 matches")
    assert cut("d", text, Slice(find="absent")) == f"@@ d no match in {len(text)} chars"
    many = "ab " * 30
    assert (
        cut("m", many, Slice(find="ab"))
        .split("\n")[0]
        .endswith("first 20 of 30 matches at " + " ".join(str(3 * i) for i in range(20)))
    )


def test_sections_are_slugged_headings() -> None:
    """Frontmatter, body, then one section per heading; headings in code fences do not count."""
    text = row("N", "d", "intro\n# Usage Notes\nuse\n```\n# not a heading\n```\n## Limits\nsixty\n")
    names = [s.slug for s in sections(text)]
    assert names == ["frontmatter", "body", "usage_notes", "limits"]


def test_get_many_ids_sections_and_find(directory: Directory) -> None:
    """One call reads several ids; a section reads one part; unknown ids and sections are missing."""
    api = AgentApi(directory)
    text = api.get(["get_weather", "weather_notes", "nope"], section="usage")
    assert text.splitlines()[0] == "@@ weather_notes#usage"
    assert "Call GET_WEATHER with a city." in text
    assert text.endswith("@@ missing\nget_weather#usage\nnope")
    whole = api.get("get_weather")
    assert whole == "@@ get_weather\n" + directory.document("get_weather").text
    found = api.get(["weather_notes"], find="sixty")
    assert found.splitlines()[0].endswith(
        "1 match at " + str(directory.document("weather_notes").text.find("Sixty"))
    )


def test_mcp_cap_applies_only_where_asked(directory: Directory) -> None:
    """The MCP layer caps reads at 15,000 characters; the library and HTTP API stay unbounded."""
    directory.write("article", "long.md", row("Long", "long", "w" * 40_000))
    total = len(directory.document("long").text)
    capped = AgentApi(directory, cap=15_000).get(["long"])
    assert capped.splitlines()[0] == f"@@ long [0..15000 of {total}]"
    nxt = AgentApi(directory, cap=15_000).get(["long"], offset=15_000)
    assert nxt.splitlines()[0] == f"@@ long [15000..30000 of {total}]"
    assert AgentApi(directory).get(["long"]).splitlines()[0] == "@@ long"


def test_search_returns_manifest_rows_with_pos_never_bodies(directory: Directory) -> None:
    """search answers the preamble, query, hit counts, the manifest columns plus pos and the resolver's
    score, layer and matched words; linked rows follow (no pos, layer "linked")."""
    text = AgentApi(directory).search("send imessage")
    lines = text.splitlines()
    assert lines[0] == f"# directory: {directory.name}" and lines[3] == "# query: send imessage"
    assert lines[4] == "# hits: 3 direct, 0 linked"
    assert lines[5].split("\t") == [
        "id", "bundle", "kind", "status", "grain", "summary", "links", "pos", "score", "layer", "matched",
    ]  # fmt: skip
    assert lines[6].split("\t")[0] == "imsg_send" and lines[6].split("\t")[-4:] == [
        "0",
        "764",
        "alias",
        "imessage send",
    ]
    assert "@@" not in text and "---" not in text
    linked = AgentApi(directory).search("IMSG_SEND", k=1).splitlines()
    assert linked[4] == "# hits: 1 direct, 1 linked"
    assert linked[-1].split("\t")[0] == "imsg_read" and linked[-1].endswith("\t-\t-\tlinked\t-")
    empty = AgentApi(directory).search("zzqx").splitlines()
    assert empty[4] == "# hits: 0 direct, 0 linked" and len(empty) == 7
    assert empty[5].startswith('# Nothing in the Directory is called, or means, "zzqx"'), empty
    with pytest.raises(UnknownBundle, match="the bundles are: article tool"):
        AgentApi(directory).search("x", bundle="nope")


def test_pos_points_at_the_densest_cluster() -> None:
    """pos starts the 2,000-character window holding the most distinct query words, clamped."""
    text = "alpha " + "x" * 5000 + " alpha beta gamma " + "y" * 5000
    at = text.index("alpha beta")
    p = pos(text, ["alpha", "beta", "gamma"])
    assert p <= at and at + len("alpha beta gamma") <= p + 2000
    assert pos("short alpha", ["alpha"]) == 0
    assert pos(text, ["nothing"]) == 0


def test_manifest_projections(directory: Directory) -> None:
    """The manifest groups rows by bundle; names-only and bundle-scoped keep the preamble."""
    api = AgentApi(directory)
    lines = api.manifest().splitlines()
    assert lines[1] == "# bundles: article tool"
    assert lines[3] == "id\tbundle\tkind\tstatus\tgrain\tsummary\tlinks"
    bundles = [line.split("\t")[1] for line in lines[4:]]
    assert bundles == sorted(bundles) and len(bundles) == len(directory.rows())
    send = next(line for line in lines if line.startswith("imsg_send\t")).split("\t")
    assert send == ["imsg_send", "tool", "tool", "-", "-", "Send a text message to a contact.", "imsg_read"]
    names = api.manifest(names=True).splitlines()
    assert names[:3] == lines[:3] and names[3] == "id" and "get_weather" in names
    only = api.manifest(bundle="article").splitlines()
    assert only[:4] == lines[:4] and {line.split("\t")[1] for line in only[4:]} == {"article"}
    sizes = api.sizes()
    assert sizes["names"].bytes < sizes["full"].bytes and sizes["full"].tokens == -(-sizes["full"].bytes // 4)
    with pytest.raises(UnknownBundle):
        api.manifest(bundle="nope")


def test_summary_is_collapsed_and_cut(directory: Directory) -> None:
    """Summaries collapse whitespace and stop at 120 characters with an ellipsis."""
    directory.write("article", "wordy.md", row("Wordy", "'" + "word\\tword  " * 30 + "'"))
    summary = directory.row("wordy").summary
    assert len(summary) == 120 and summary.endswith("…") and "  " not in summary
