"""`links(rel=…)` driven by the seed schema: aliases and inverses (DESIGN §9)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB, PinakesError

SCHEMA = """
[schema.relation_types.cites]
inverse = "cited-by"
aliases = ["references"]

[schema.relation_types.extends]
inverse = "extended-by"
"""


@pytest.fixture
def kb(tmp_path: Path):
    root = make_kb(
        tmp_path / "kb",
        {
            "a.md": "# A\n\nPaper A.\n",
            "b.md": "# B\n\nPaper B.\n",
            "c.md": "# C\n\nPaper C.\n",
            "d.md": "# D\n\nPaper D, linked in the text to [A](a.md).\n",
            # a cites b (written on a); c is cited by a (written on c, the inverse).
            "a.md.pnk.yaml": "id: 01JAAAAAAAAAAAAAAAAAAAAAAA\nlinks:\n  - to: b.md\n    rel: cites\n"
            "  - to: d.md\n    rel: extends\n",
            "c.md.pnk.yaml": "id: 01JCCCCCCCCCCCCCCCCCCCCCCC\nlinks:\n  - to: a.md\n    rel: cited-by\n",
        },
    )
    with (root / "pinakes.toml").open("a") as handle:
        handle.write(SCHEMA)
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def _out(result) -> list[tuple[str, str, str]]:
    return sorted((n.path, n.rel, n.direction) for n in result.neighbours)


def test_a_relation_follows_links_written_with_its_inverse(kb: KB) -> None:
    result = kb.links("a.md", rel="cites", direction="out")
    assert _out(result) == [("b.md", "cites", "out"), ("c.md", "cites", "out")]
    assert result.matched_rel == "cites"
    assert _out(kb.links("c.md", rel="cites", direction="in")) == [("a.md", "cites", "in")]
    assert _out(kb.links("c.md", rel="cites", direction="out")) == []


def test_asking_for_the_inverse_reads_the_relation_backwards(kb: KB) -> None:
    result = kb.links("b.md", rel="cited by", direction="out")
    assert result.matched_rel == "cites" and result.rel == "cited-by"
    assert _out(result) == [("a.md", "cites", "in")]
    assert _out(kb.links("a.md", rel="Cited-By", direction="out")) == []
    assert _out(kb.links("a.md", rel="cited-by", direction="in")) == [
        ("b.md", "cites", "out"),
        ("c.md", "cites", "out"),
    ]


def test_an_alias_matches_and_other_relations_stay_out(kb: KB) -> None:
    assert _out(kb.links("a.md", rel="References", direction="out")) == _out(
        kb.links("a.md", rel="cites", direction="out")
    )
    assert _out(kb.links("a.md", rel="extends")) == [("d.md", "extends", "out")]
    # Without rel every link counts: d's Markdown link back to a is one too.
    assert _out(kb.links("d.md", direction="out")) == [("a.md", "links-to", "out")]
    assert _out(kb.links("d.md", rel="cites")) == []


def test_an_unknown_relation_names_the_schema_and_the_relations_in_use(kb: KB) -> None:
    with pytest.raises(PinakesError) as info:
        kb.links("a.md", rel="zzqx")
    hint = info.value.hint or ""
    for rel in ("cites", "extends", "cited-by", "links-to"):
        assert rel in hint
