"""Title-mention edges: a document naming another document's title links to it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, db, make_kb, set_config, write_files
from pinakes_core import KB
from pinakes_graph import edges as graph_edges
from pinakes_graph import mentions
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


def reference_derive_mentions_per_document(
    conn: sqlite3.Connection, changed: Iterable[str], *, everything: bool, weight: float
) -> None:
    """REFERENCE ONLY: ``derive_mentions`` as it was before issue 38's batching.

    Four statements per document and one COUNT per touched target; kept here so the batched
    version can be checked against it edge for edge and weight for weight.
    """
    titles = title_index(conn)
    docs = (
        [r[0] for r in conn.execute("SELECT doc_id FROM documents")]
        if everything
        else list(changed)
    )
    if not docs:
        return
    node = {k: int(n) for n, k in conn.execute("SELECT node_id, key FROM nodes WHERE kind = 'doc'")}
    touched: set[int] = set()
    for doc_id in docs:
        src = node.get(doc_id)
        if src is None:
            continue
        touched.update(
            r[0]
            for r in conn.execute(
                "SELECT dst FROM edges WHERE src = ? AND kind = 'title-mention'", (src,)
            )
        )
        conn.execute("DELETE FROM edges WHERE src = ? AND kind = 'title-mention'", (src,))
        text = " ".join(
            r[0]
            for r in conn.execute(
                "SELECT text FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
            )
        )
        targets = [node[t] for t in mentioned(text, titles) - {doc_id} if t in node]
        conn.executemany(
            "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'title-mention', 0) "
            "ON CONFLICT (src, dst, kind) DO NOTHING",
            [(src, t) for t in targets],
        )
        touched.update(targets)
    counts = []
    for dst in touched:
        n = conn.execute(
            "SELECT COUNT(*) FROM edges WHERE dst = ? AND kind = 'title-mention'", (dst,)
        ).fetchone()[0]
        if n:
            counts.append((weight / n, dst))
    conn.executemany("UPDATE edges SET weight = ? WHERE dst = ? AND kind = 'title-mention'", counts)


#: Carolingians naming each other; four pages titled "Overview" (a shared title, never a target)
#: name one of them; the long page names a title in its last section only.
FAMILY = {
    "lothair-ii.md": "# Lothair II\n\nSon of Ermengarde of Tours and Lothair I.\n",
    "ermengarde.md": "# Ermengarde of Tours\n\nShe died on 20 March 851.\n",
    "lothair-i.md": "# Lothair I\n\nEmperor; married Ermengarde of Tours. Son of Louis the Pious.\n",
    "charles.md": "# Charles the Bald\n\nHalf-brother of Lothair I; son of Louis the Pious.\n",
    "louis.md": (
        "# Louis the Pious\n\nFather of Lothair I and Charles the Bald; "
        "father-in-law of Ermengarde of Tours.\n"
    ),
    "pepin.md": "# Pepin of Aquitaine\n\nBrother of Lothair I.\n",
    **{
        f"{area}/overview.md": f"# Overview\n\nThe {area} pages begin with Lothair II.\n"
        for area in ("east", "west", "middle", "south")
    },
    "long.md": "# Verdun treaty\n\n"
    + "\n\n".join(
        f"## Clause {i}\n\n" + "The kingdom was divided among the brothers. " * 30 for i in range(6)
    )
    + "\n\n## Parties\n\nSigned by Charles the Bald and Pepin of Aquitaine.\n",
}

#: Each step after the first sync: files written (``None``: removed) and whether the titles
#: change (every document re-derived) or only the edited documents are.
STEPS: list[tuple[dict[str, str | None], bool]] = [
    # Bodies only: two documents lose a mention and gain another.
    (
        {
            "charles.md": "# Charles the Bald\n\nGrandson of Ermengarde of Tours, he says.\n",
            "pepin.md": "# Pepin of Aquitaine\n\nBrother of Lothair II and Charles the Bald.\n",
            "east/overview.md": "# Overview\n\nThe east pages begin with Louis the Pious.\n",
        },
        False,
    ),
    # A retitle: the pages naming "Lothair I" lose their edge to it.
    ({"lothair-i.md": "# Lothair the Elder\n\nMarried Ermengarde of Tours.\n"}, True),
    # A removal: the pages naming Louis lose their edge, the others' weights are re-damped.
    ({"louis.md": None}, True),
    # A new page that names others and is named by an unchanged one.
    ({"verdun.md": "# Treaty of Verdun\n\nCharles the Bald and Lothair the Elder.\n"}, True),
    # Nothing changed.
    ({}, False),
]


def _title_mentions(kb: KB) -> dict[tuple[str, str], float]:
    """(source path, target path) → weight of every title-mention edge in ``kb``'s store."""
    rows = (
        kb.store()
        .conn.execute(
            "SELECT sd.path, dd.path, e.weight FROM edges e "
            "JOIN nodes s ON s.node_id = e.src JOIN documents sd ON sd.doc_id = s.key "
            "JOIN nodes d ON d.node_id = e.dst JOIN documents dd ON dd.doc_id = d.key "
            "WHERE e.kind = 'title-mention'"
        )
        .fetchall()
    )
    return {(r[0], r[1]): r[2] for r in rows}


def _apply(root: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        if text is None:
            (root / rel).unlink()
        else:
            write_files(root, {rel: text})


def test_batched_mentions_equal_the_per_document_reference(
    tmp_path: Path, kb_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two KBs of the same files through the same edits: one derives mentions in batches (of 2
    # documents, so the folder takes several), the other with the reference algorithm.
    monkeypatch.setattr(mentions, "BATCH", 2)
    batched_calls: list[bool] = []

    def batched(conn: Any, changed: Iterable[str], *, everything: bool, weight: float) -> None:
        batched_calls.append(everything)
        mentions.derive_mentions(conn, changed, everything=everything, weight=weight)

    roots = {name: make_kb(tmp_path / name, dict(FAMILY)) for name in ("batched", "reference")}
    for root in roots.values():
        set_config(root, "store", f'backend = "{kb_backend}"')
    derive = {"batched": batched, "reference": reference_derive_mentions_per_document}
    kbs = {name: KB.open(root, embedder=FakeHashEmbedder()) for name, root in roots.items()}
    try:

        def sync_both() -> dict[tuple[str, str], float]:
            found = {}
            for name, kb in kbs.items():
                with monkeypatch.context() as patch:
                    patch.setattr(graph_edges, "derive_mentions", derive[name])
                    kb.sync()
                found[name] = _title_mentions(kb)
            assert found["batched"] == found["reference"]  # same rows, same float weights
            return found["batched"]

        first = sync_both()
        assert batched_calls == [True]
        # Lothair I is named by four pages (1/4 each); the shared title "Overview" by none; the
        # long page's mention sits in a later chunk than its first.
        assert first[("charles.md", "lothair-i.md")] == 0.25
        assert not any(dst.endswith("overview.md") for _, dst in first)
        assert ("long.md", "pepin.md") in first
        for files, retitled in STEPS:
            for root in roots.values():
                _apply(root, files)
            after = sync_both()
            if files:
                assert batched_calls[-1] is retitled
        assert False in batched_calls  # the edited-documents-only path ran too
        assert ("verdun.md", "charles.md") in after and ("pepin.md", "lothair-ii.md") in after
        assert not any("louis.md" in pair for pair in after)
    finally:
        for kb in kbs.values():
            kb.close()
