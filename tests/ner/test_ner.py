"""pinakes-ner with the real spaCy pipeline and the real embedding model (DESIGN §6, §7)."""

from __future__ import annotations

import functools
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pinakes_ner")
pytest.importorskip("spacy")

from conftest import db, make_kb, set_config
from pinakes_core import KB
from pinakes_core.config import EmbeddingConfig
from pinakes_core.index.embedding import Embedder, load_embedder
from pinakes_ner import extract
from pinakes_ner.layer import label_hash

pytestmark = [pytest.mark.spacy, pytest.mark.model]

#: Two documents whose only shared word is a person's name (and one with neither).
SHARED_ONLY_ENTITY = {
    "consensus.md": (
        "# Consensus notes\n\nDiego Ongaro designed the protocol while studying at Stanford "
        "University; understandability was the goal.\n"
    ),
    "review.md": (
        "# Dissertation review\n\nThe thesis by Diego Ongaro explains leader election in "
        "considerable detail.\n"
    ),
    "garden.md": "# Garden\n\nTomatoes need full sun and regular watering in July.\n",
}


@functools.cache
def _model() -> Embedder:
    return load_embedder(EmbeddingConfig())


def _open(root: Path) -> KB:
    return KB.open(root, embedder=_model())


def _ner_kb(root: Path, files: dict[str, str | bytes], extra: str = "") -> Path:
    make_kb(root, files)
    set_config(root, "ner", "enabled = true\n" + extra)
    return root


@pytest.fixture
def extracted(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text the real spaCy pipeline is run on (a spy: extraction itself is real)."""
    seen: list[str] = []
    real = extract.extract

    def spy(texts, *, batch_size=extract.BATCH):  # type: ignore[no-untyped-def]
        texts = list(texts)
        seen.extend(texts)
        return real(texts, batch_size=batch_size)

    monkeypatch.setattr(extract, "extract", spy)
    yield seen


def _entities(root: Path) -> dict[str, set[str]]:
    """Entity key → paths of the documents whose chunks it has mention edges to."""
    conn = db(root)
    try:
        rows = conn.execute(
            "SELECT n.key, d.path FROM edges e JOIN nodes n ON n.node_id = e.src "
            "JOIN nodes c ON c.node_id = e.dst "
            "JOIN documents d ON d.doc_id = substr(c.key, 1, instr(c.key, ':') - 1) "
            "WHERE e.kind = 'mentions'"
        ).fetchall()
    finally:
        conn.close()
    out: dict[str, set[str]] = {}
    for key, path in rows:
        out.setdefault(key, set()).add(path)
    return out


def test_two_documents_sharing_only_an_entity_are_connected_through_it(tmp_path: Path) -> None:
    root = _ner_kb(tmp_path / "kb", SHARED_ONLY_ENTITY, "seed_mass = 0.3\nauto_entities = true")
    with _open(root) as kb:
        kb.sync()
        entities = _entities(root)
        assert entities["diego ongaro"] == {"consensus.md", "review.md"}
        assert "stanford university" in entities  # an ORG, kept by the default types
        # Without the entity the two documents have no path between them but the folder hub.
        conn = kb.store().conn
        kinds = {r[0] for r in conn.execute("SELECT DISTINCT kind FROM edges")}
        assert "title-mention" not in kinds and "reverse-scan" not in kinds
        consensus, review = kb.resolve("consensus.md"), kb.resolve("review.md")
        shared = kb.links(consensus).entity_neighbours
        assert [(n.path, n.entities) for n in shared] == [("review.md", ["Diego Ongaro"])]
        assert kb.links(review).entity_neighbours[0].doc_id == consensus
        assert kb.links(kb.resolve("garden.md")).entity_neighbours == []
        # The query names the entity: it seeds PPR, whose mass reaches both documents' chunks.
        hits = kb.search("Diego Ongaro", channels=["ppr"]).hits
        assert {h.path for h in hits[:2]} == {"consensus.md", "review.md"}
        # ... and becomes the automatic entities= list of the default search.
        result = kb.search("what did Diego Ongaro write about?")
        assert "entities" in result.hits[0].ranks
        status = kb.status()
        assert status.entities == len(entities) and status.mentions == sum(
            len(v) for v in entities.values()
        )


def test_by_default_queries_get_no_entity_seeds_and_no_entities_list(tmp_path: Path) -> None:
    from pinakes_core.plugins import plugin_manager

    root = _ner_kb(tmp_path / "kb", SHARED_ONLY_ENTITY)
    with _open(root) as kb:
        kb.sync()
        assert plugin_manager().hook.graph_seeds(kb=kb, query="Diego Ongaro") == [[]]
        result = kb.search("what did Diego Ongaro write about?")
        assert "entities" not in result.hits[0].ranks
        assert "query_entities" not in result.timings_ms


def test_entity_seeds_take_their_share_of_the_personalisation(tmp_path: Path) -> None:
    from pinakes_core.plugins import plugin_manager

    root = _ner_kb(tmp_path / "kb", SHARED_ONLY_ENTITY, "seed_mass = 0.4")
    with _open(root) as kb:
        kb.sync()
        seeds = [
            s
            for group in plugin_manager().hook.graph_seeds(kb=kb, query="Who is diego ongaro?")
            for s in group
        ]
        label = (
            kb.store()
            .conn.execute("SELECT label FROM nodes WHERE node_id = ?", (seeds[0][0],))
            .fetchone()[0]
        )
        assert label == "Diego Ongaro"
        assert sum(m for _, m in seeds) == pytest.approx(0.4)
        # A lower-case plain word is not a name: "garden" names no entity here anyway, and a
        # query naming nothing gives no seeds.
        assert plugin_manager().hook.graph_seeds(kb=kb, query="tomatoes in july") == [[]]


NEAR_DUPLICATES = {
    "speech.md": "# Speech\n\nBarack Obama spoke in Chicago about healthcare reform.\n",
    "visit.md": "# Visit\n\nLater that year Obama visited a factory in Ohio.\n",
}


def _cosine(a: str, b: str) -> float:
    vectors = np.asarray(_model().embed_documents([a, b]), dtype=np.float32)
    return float(vectors[0] @ vectors[1])


def test_near_duplicates_merge_at_the_threshold_and_not_below_it(tmp_path: Path) -> None:
    similarity = _cosine("Obama", "Barack Obama")
    merged = _ner_kb(
        tmp_path / "merged", NEAR_DUPLICATES, f"near_duplicate = {similarity - 0.01:.4f}"
    )
    with _open(merged) as kb:
        kb.sync()
        entities = _entities(merged)
        assert entities["barack obama"] == {"speech.md", "visit.md"}
        assert "obama" not in entities
        aliases = dict(kb.store().conn.execute("SELECT alias, node_id FROM entity_aliases"))
        assert aliases["obama"] == aliases["barack obama"]
        neighbours = kb.links(kb.resolve("visit.md")).entity_neighbours
        assert neighbours[0].path == "speech.md" and neighbours[0].entities == ["Barack Obama"]
        # A query that says only "Obama" seeds the merged entity.
        assert kb.search("Obama", channels=["ppr"]).hits[0].path in {"speech.md", "visit.md"}
    apart = _ner_kb(
        tmp_path / "apart", NEAR_DUPLICATES, f"near_duplicate = {similarity + 0.01:.4f}"
    )
    with _open(apart) as kb:
        kb.sync()
        entities = _entities(apart)
        assert entities["barack obama"] == {"speech.md"}
        assert entities["obama"] == {"visit.md"}
        assert kb.links(kb.resolve("visit.md")).entity_neighbours == []


def test_a_short_form_shared_by_two_entities_merges_into_neither() -> None:
    from pinakes_ner.layer import merge_near_duplicates

    def same(key: str, others: list[str]) -> np.ndarray:  # a FAKE similarity: all alike
        return np.ones(len(others))

    keys = ["obama", "barack obama", "michelle obama", "raft", "raft paper", "new york", "york"]
    merged = merge_near_duplicates(keys, same, 0.5)
    assert merged["obama"] == "obama"  # ambiguous
    assert merged["raft"] == "raft paper"
    assert merged["york"] == "new york"
    assert merged["barack obama"] == "barack obama"
    assert merge_near_duplicates(keys, lambda k, o: np.zeros(len(o)), 0.5)["raft"] == "raft"


LONG_DOC = {
    "history.md": (
        "# History\n\n## Origins\n\nAda Lovelace wrote the first program for Charles Babbage.\n\n"
        "## Later\n\nAlan Turing worked at Bletchley Park during the war.\n\n"
        "## Today\n\nGrace Hopper built the first compiler at Remington Rand.\n"
    ),
    "other.md": "# Other\n\nTim Berners-Lee proposed the web at CERN.\n",
}


def test_a_resync_with_one_chunk_changed_runs_ner_on_that_chunk_only(
    tmp_path: Path, extracted: list[str]
) -> None:
    root = _ner_kb(tmp_path / "kb", LONG_DOC)
    set_config(root, "sync", "chunk_tokens = 32")  # one chunk per section
    with _open(root) as kb:
        kb.sync()
        texts = kb.store().conn.execute("SELECT COUNT(DISTINCT embed_hash) FROM chunks")
        assert len(extracted) == texts.fetchone()[0] >= 4  # every chunk text, once
        assert "bletchley park" in _entities(root)

        extracted.clear()
        kb.sync()  # nothing changed
        assert extracted == []

        path = root / "history.md"
        path.write_text(
            path.read_text(encoding="utf-8").replace(
                "Alan Turing worked at Bletchley Park", "John von Neumann worked at Princeton"
            ),
            encoding="utf-8",
        )
        kb.sync()
        assert len(extracted) == 1 and "John von Neumann" in extracted[0]
        entities = _entities(root)
        assert "john von neumann" in entities and "bletchley park" not in entities
        assert entities["ada lovelace"] == {"history.md"}  # unchanged chunks keep their edges
        conn = kb.store().conn
        dupes = conn.execute(
            "SELECT COUNT(*) FROM (SELECT src, dst FROM edges WHERE kind = 'mentions' "
            "GROUP BY src, dst HAVING COUNT(*) > 1)"
        ).fetchone()[0]
        assert dupes == 0
        # Texts no chunk has any more are forgotten.
        stored = conn.execute("SELECT COUNT(*) FROM ner_texts").fetchone()[0]
        assert stored == conn.execute("SELECT COUNT(DISTINCT embed_hash) FROM chunks").fetchone()[0]


def test_a_full_graph_rebuild_keeps_the_entity_layer_without_rerunning_the_model(
    tmp_path: Path, extracted: list[str]
) -> None:
    root = _ner_kb(tmp_path / "kb", LONG_DOC, "seed_mass = 0.3")
    with _open(root) as kb:
        kb.sync()
        before = _entities(root)
        edges_before = kb.status().mentions
    extracted.clear()
    set_config(root, "graph", "sibling = 0.5")  # new [graph] settings: the graph is rebuilt
    with _open(root) as kb:
        kb.sync()
        assert extracted == []
        assert _entities(root) == before
        assert kb.status().mentions == edges_before
        # Entity labels are embedded, as tag and heading labels are: every one here, as the
        # query side is on (see the next test for the default).
        assert set(_label_vectors(root)) == set(before)


def _label_vectors(root: Path) -> dict[str, bytes]:
    """Entity key → its label's vector, for the entity nodes that have one."""
    conn = db(root)
    try:
        rows = conn.execute(
            "SELECT n.key, n.label, nv.embed_hash, v.vector FROM nodes n "
            "JOIN node_vectors nv USING (node_id) JOIN vectors v USING (embed_hash) "
            "WHERE n.kind = 'entity'"
        ).fetchall()
    finally:
        conn.close()
    assert all(label_hash(label) == h for _, label, h, _ in rows)
    return {key: vector for key, _, _, vector in rows}


def test_only_labels_the_merge_compares_are_embedded_unless_queries_match_labels(
    tmp_path: Path,
) -> None:
    from pinakes_ner.query import entities_in

    files = {**NEAR_DUPLICATES, "consensus.md": SHARED_ONLY_ENTITY["consensus.md"]}
    root = _ner_kb(tmp_path / "kb", files, "near_duplicate = 0.0")
    with _open(root) as kb:
        kb.sync()
        entities = set(_entities(root))
        assert {"barack obama", "diego ongaro", "stanford university"} <= entities
        assert "obama" not in entities  # merged: its label was compared with "Barack Obama"
        # Only the pair's labels were embedded; no other label is in the store at all.
        assert set(_label_vectors(root)) == {"barack obama"}
        conn = kb.store().conn
        stored = {h for (h,) in conn.execute("SELECT embed_hash FROM vectors")}
        assert label_hash("Barack Obama") in stored
        assert label_hash("Diego Ongaro") not in stored and label_hash("Chicago") not in stored
        aliases = dict(conn.execute("SELECT alias, node_id FROM entity_aliases"))
        default_vector = _label_vectors(root)["barack obama"]
    # Queries matching labels by embedding need every label: turning them on embeds the rest
    # at the next sync, with the same merge.
    set_config(root, "ner", "seed_mass = 0.3")
    with _open(root) as kb:
        kb.sync()
        vectors = _label_vectors(root)
        assert set(vectors) == set(_entities(root)) == entities
        assert vectors["barack obama"] == default_vector
        conn = kb.store().conn
        assert dict(conn.execute("SELECT alias, node_id FROM entity_aliases")) == aliases
        # A name that is no alias is matched to the closest label through those vectors.
        found = [e.label for e in entities_in(kb, "Where did Diego Ongaro study, Stanford?")]
        assert "Diego Ongaro" in found and "Stanford University" in found


def test_turning_ner_off_removes_the_layer_and_on_again_reuses_the_extraction(
    tmp_path: Path, extracted: list[str]
) -> None:
    root = _ner_kb(tmp_path / "kb", SHARED_ONLY_ENTITY)
    with _open(root) as kb:
        kb.sync()
        assert kb.status().entities
    config = root / "pinakes.toml"
    config.write_text(config.read_text().replace("enabled = true", "enabled = false"))
    extracted.clear()
    with _open(root) as kb:
        kb.sync()
        status = kb.status()
        assert status.entities is None and status.mentions is None
        assert _entities(root) == {}
        assert kb.links(kb.resolve("consensus.md")).entity_neighbours == []
    config.write_text(config.read_text().replace("enabled = false", "enabled = true"))
    with _open(root) as kb:
        kb.sync()
        assert extracted == []  # the texts' entities were kept in the store
        assert _entities(root)["diego ongaro"] == {"consensus.md", "review.md"}


def test_entity_types_are_configurable_and_numbers_are_left_out(tmp_path: Path) -> None:
    files = {"a.md": "# A\n\nIn 1990 Marie Curie's notes sold for 5 million dollars in Paris.\n"}
    root = _ner_kb(tmp_path / "kb", files)
    with _open(root) as kb:
        kb.sync()
        keys = set(_entities(root))
        assert {"marie curie", "paris"} <= keys
        assert not any(k[0].isdigit() for k in keys)
    set_config(root, "ner", 'types = ["GPE"]')
    with _open(root) as kb:
        kb.sync()
        assert set(_entities(root)) == {"paris"}


def test_doctor_lists_glue_entities(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"n{i:02d}.md": f"# Note {i}\n\nToday Nushell handled item {i} without trouble.\n"
        for i in range(24)
    }
    files["berlin.md"] = "# Trip\n\nWe flew to Berlin for the conference.\n"
    root = _ner_kb(tmp_path / "kb", files)
    with _open(root) as kb:
        kb.sync()
        found = {f.check: f for f in kb.doctor().findings}
        assert found["ner-entities"].severity == "info"
        glue = found["ner-glue"]
        assert glue.severity == "warning"
        assert any(item.startswith("Nushell:") for item in glue.items)
        assert not any(item.startswith("Berlin") for item in glue.items)


_MISSING = textwrap.dedent(
    """
    import sys
    sys.modules["pinakes_ner"] = None  # the plugin is not installed: its entry point fails
    from pathlib import Path
    from pinakes_core import KB, PluginMissingError
    from pinakes_core.plugins import plugin_manager

    root = Path(sys.argv[1])
    KB.init(root, name="noner")
    (root / "a.md").write_text("# Alpha\\n\\nDiego Ongaro wrote about Raft.\\n", encoding="utf-8")
    kb = KB.open(root)
    assert not plugin_manager().has_plugin("ner")
    kb.sync()
    assert kb.search("Raft").hits[0].path == "a.md"
    assert kb.status().entities is None
    with (root / "pinakes.toml").open("a") as f:
        f.write("\\n[ner]\\nenabled = true\\n")
    try:
        KB.open(root).sync()
    except PluginMissingError as exc:
        print(exc)
    else:
        raise SystemExit("sync did not fail")
    assert "spacy" not in sys.modules
    """
)


def _run(script: str, root: Path) -> str:
    """Run ``script`` in a fresh interpreter with ``root`` as its argument; return its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_without_the_plugin_core_runs_and_asking_for_ner_fails_with_the_install_command(
    tmp_path: Path,
) -> None:
    stdout = _run(_MISSING, tmp_path / "kb")
    assert "[ner] enabled = true" in stdout
    assert "uv pip install pinakes-ner" in stdout


def test_the_plugin_imports_no_spacy_until_ner_runs(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from pinakes_core import KB
        from pinakes_core.plugins import plugin_manager
        root = Path(sys.argv[1])
        KB.init(root, name="light")
        (root / "a.md").write_text("# Alpha\\n\\nDiego Ongaro wrote about Raft.\\n", encoding="utf-8")
        assert plugin_manager().has_plugin("ner")
        kb = KB.open(root)
        kb.sync()
        kb.search("Diego Ongaro")
        kb.links("a.md")
        assert "spacy" not in sys.modules, "spaCy imported with [ner] off"
        print("OK")
        """
    )
    assert _run(script, tmp_path / "kb").strip() == "OK"
