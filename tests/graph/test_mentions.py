"""Title-mention edges: a document naming another document's title links to it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, db, make_kb, set_config, write_files
from pinakes_core import KB
from pinakes_graph.mentions import mentioned, title_index
from pinakes_graph.ppr import TAIL_BLEND


def _mention_edges(root: Path) -> dict[tuple[str, str], float]:
    conn = db(root)
    try:
        rows = conn.execute(
            "SELECT s.label, d.label, e.weight FROM edges e JOIN nodes s ON s.node_id = e.src "
            "JOIN nodes d ON d.node_id = e.dst WHERE e.kind = 'title-mention'"
        ).fetchall()
    finally:
        conn.close()
    return {(r[0], r[1]): r[2] for r in rows}


FILES = {
    "lothair.md": "# Lothair II\n\nLothair II was the son of Ermengarde of Tours and Lothair I.\n",
    "ermengarde.md": "# Ermengarde of Tours\n\nShe died on 20 March 851.\n",
    "lothair-i.md": "# Lothair I\n\nEmperor; married Ermengarde of Tours.\n",
    "the.md": "# The\n\nA page whose title is a stopword.\n",
}


def test_documents_naming_a_title_link_to_it_with_hub_damping(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    edges = _mention_edges(root)
    # Ermengarde is named by two documents: each mention weighs 1/2; Lothair I by one.
    assert edges[("Lothair II", "Ermengarde of Tours")] == pytest.approx(0.5)
    assert edges[("Lothair I", "Ermengarde of Tours")] == pytest.approx(0.5)
    assert edges[("Lothair II", "Lothair I")] == pytest.approx(1.0)
    assert not any(dst == "The" for _, dst in edges)  # stopword-only titles never match
    assert not any(src == dst for src, dst in edges)  # a page naming itself is no edge


def test_a_new_title_is_found_in_unchanged_documents(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {k: v for k, v in FILES.items() if k != "ermengarde.md"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert not any(dst == "Ermengarde of Tours" for _, dst in _mention_edges(root))
        write_files(root, {"ermengarde.md": FILES["ermengarde.md"]})
        kb.sync()
    assert ("Lothair II", "Ermengarde of Tours") in _mention_edges(root)


def test_title_mentions_can_be_switched_off(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    set_config(root, "graph", "title_mention = 0.0")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    assert _mention_edges(root) == {}


def test_matching_is_on_whole_word_sequences(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        titles = title_index(kb.store().conn)
    ids = {t: d for d, t in [(next(iter(v)), " ".join(k)) for k, v in titles.items()]}
    assert mentioned("about lothair iii and ermengarde", titles) == set()
    assert mentioned("LOTHAIR II, again", titles) == {ids["lothair ii"]}


def test_the_gated_ppr_stage_runs_for_two_named_titles_or_relational_phrasing(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()

        # Two titles named, no relational phrasing: a comparison between documents.
        assert (
            _stage(kb, "Lothair I Ermengarde of Tours dates")
            == "ran: multi-hop phrasing: 2 titles named; " + TAIL_BLEND
        )
        assert _stage(kb, "When did Lothair II's mother die?").startswith(
            "ran: multi-hop phrasing: possessive"
        )
        assert _stage(kb, "Ermengarde of Tours death").startswith("skipped: single-hop")
        # Whatever the gate decides, hits stay sorted by score and the second hop is reachable.
        result = kb.search("When did Lothair II's mother die?", k=3)
        assert [h.score for h in result.hits] == sorted(
            (h.score for h in result.hits), reverse=True
        )
        assert "ermengarde.md" in {h.path for h in result.hits}


def test_titles_made_of_everyday_words_do_not_open_the_graph_stage(tmp_path: Path) -> None:
    # Pages titled "where" and "sort" (a command reference) are named by nearly every question
    # about tables: two of them in a query do not make it multi-hop. Rare titles still do.
    pages = {
        f"page{i}.md": f"# Page {i}\n\nUse where to filter and sort to order rows.\n"
        for i in range(30)
    }
    pages["where.md"] = "# where\n\nKeep the rows that match a condition.\n"
    pages["sort.md"] = "# sort\n\nOrder the rows of a table.\n"
    root = make_kb(tmp_path / "kb", {**FILES, **pages})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()

        assert _stage(kb, "where rows match then sort them").startswith("skipped: single-hop")
        assert (
            _stage(kb, "Lothair I Ermengarde of Tours dates")
            == "ran: multi-hop phrasing: 2 titles named; " + TAIL_BLEND
        )


def _stage(kb: KB, query: str) -> str:
    """What the gated graph stage did for ``query`` (from ``explain``)."""
    ranking = kb.search(query, explain=True).ranking
    assert ranking is not None
    return ranking.stages["ppr-auto"]
