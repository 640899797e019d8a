"""Start-up and scale (issue 14): lazy imports, the narrow model path, mapped vectors, ANN."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import FakeHashEmbedder, make_kb, set_config, write_files
from pinakes_core import KB
from pinakes_core.config import EmbeddingConfig, ScaleConfig
from pinakes_core.index.dense import load_ann, read_rows, update_ann
from pinakes_core.index.store import Store
from pinakes_core.search.context import Filters, QueryContext

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"


def _modules_after(script: str, root: Path) -> set[str]:
    """Run ``script`` (with ``root`` as argv[1]) in a fresh interpreter; its loaded modules."""
    probe = textwrap.dedent(script) + textwrap.dedent(
        """
        import json, sys
        print(json.dumps(sorted(sys.modules)))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_bm25_search_imports_no_model_or_graph_stack(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    # Even with the reader on, a search that names its channels runs only those.
    set_config(root, "retrieval", "reader = true")
    loaded = _modules_after(
        """
        import sys
        import pinakes_core
        from pinakes_core import KB

        hits = KB.open(sys.argv[1]).search("leader majority", channels=["bm25"]).hits
        assert hits, "no BM25 hit"
        """,
        root,
    )
    assert {"pinakes_core", "numpy"} <= _top(loaded)  # the probe really searched
    assert not {"fastembed", "scipy", "onnxruntime", "tokenizers", "rich"} & _top(loaded)
    # Below [scale] bm25_index_min_chunks BM25 is FTS5's: tantivy is never imported.
    assert not {"tantivy", "pinakes_core.index.lexical"} & (loaded | _top(loaded))
    # Nor the modules only a sync or a document read needs, nor YAML (no sidecar is read),
    # nor the reader's model module.
    assert not {
        "pinakes_core.search.reader",
        "pinakes_core.index.sync",
        "pinakes_core.index.preparation",
        "pinakes_core.index.writer",
        "pinakes_core.index.chunking",
        "pinakes_core.read.blocks",
        "pinakes_core.index.packer",
        # sqlite-utils makes a new store's schema only (issue 38); a search loads neither.
        "sqlite_utils",
        "pinakes_core.index.tables",
        "markdown_it",
        "ruamel",
        "pathspec",
        # Reading a document's text or a slice of it (issue 37: kb.py loads them in read()).
        "pinakes_core.index.views",
        "pinakes_core.read.sections",
        "pinakes_core.read.sources",
        "pinakes_core.read.code",
    } & (loaded | _top(loaded))


def test_serving_modules_load_no_parser_before_they_parse(tmp_path: Path) -> None:
    # The MCP server imports these at start (crosskb for two link reasons, the fleet registry
    # for its path, writing for its path checks): markdown-it, tomlkit and pathspec wait until
    # a document is parsed, the registry file read, or a path matched (issue 37).
    loaded = _modules_after(
        """
        import pinakes_core.manage.crosskb, pinakes_core.manage.fleet
        import pinakes_core.manage.registry, pinakes_core.manage.writing
        """,
        tmp_path,
    )
    assert "pinakes_core.manage.writing" in loaded  # the probe really imported them
    assert not {"markdown_it", "tomlkit", "pathspec"} & _top(loaded)


def test_cli_json_search_draws_nothing(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    loaded = _modules_after(
        """
        import sys
        from pinakes_cli.main import cli

        cli.main(["--kb", sys.argv[1], "search", "leader majority", "--channel", "bm25", "--json"],
                 standalone_mode=False)
        """,
        root,
    )
    assert "pinakes_cli" in _top(loaded)
    assert not {"rich", "fastembed", "scipy", "onnxruntime", "tomlkit", "ruamel"} & _top(loaded)
    assert "sqlite_utils" not in _top(loaded)  # only a new store's schema needs it (issue 38)


@pytest.mark.model
def test_no_change_sync_reads_no_yaml(tmp_path: Path) -> None:
    # The example KB has frontmatter and a sidecar, and is big enough to self-calibrate.
    root = tmp_path / "kb"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".pinakes"))
    with KB.open(root) as kb:  # the real model, as the probe's pnk sync uses
        kb.sync()
    loaded = _modules_after(
        """
        import sys
        from pinakes_cli.main import cli

        try:
            cli.main(["--kb", sys.argv[1], "sync", "--json"], standalone_mode=False)
        except SystemExit as exc:
            assert not exc.code, exc.code
        """,
        root,
    )
    assert "pinakes_core.index.sync" in loaded  # the probe really synced
    # Nothing changed, so no frontmatter or sidecar is parsed and no document is chunked.
    assert not {"ruamel", "markdown_it", "onnxruntime"} & _top(loaded)
    assert "pinakes_core.search.reader" not in loaded


def test_help_imports_no_model_and_no_reader(tmp_path: Path) -> None:
    loaded = _modules_after(
        """
        from pinakes_cli.main import cli

        try:
            cli.main(["--help"], standalone_mode=False)
        except SystemExit as exc:
            assert not exc.code, exc.code
        """,
        tmp_path,
    )
    assert "pinakes_cli" in _top(loaded)
    assert not {"onnxruntime", "tokenizers", "fastembed"} & _top(loaded)
    assert not {"pinakes_core.search.reader", "pinakes_core.search.reading"} & loaded


def test_cli_freezes_the_heap_before_exit_and_still_prints(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    probe = textwrap.dedent(
        """
        import gc, sys
        from pinakes_cli.main import main

        sys.argv = ["pnk", "--kb", sys.argv[1], "search", "leader majority", "--channel",
                    "bm25", "--json"]
        try:
            main()
        except SystemExit as exc:
            assert exc.code in (0, None), exc.code
        # The shutdown collection has nothing left to walk (issue 14, exit cost).
        assert gc.get_freeze_count() > 10_000, gc.get_freeze_count()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, str(root)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["hits"]  # the output was written and flushed in full


@pytest.mark.model
def test_hybrid_search_loads_the_model_without_fastembed(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root) as kb:
        kb.sync()
    loaded = _modules_after(
        """
        import sys
        from pinakes_core import KB

        result = KB.open(sys.argv[1]).search("leader majority", channels=["bm25", "dense"])
        assert "dense" in result.timings_ms, result.timings_ms
        """,
        root,
    )
    assert "onnxruntime" in _top(loaded)  # the query really was embedded
    assert not {"fastembed", "huggingface_hub", "PIL", "rich"} & _top(loaded)


@pytest.mark.parametrize("package", ["pinakes_cli", "pinakes_mcp"])
def test_our_processes_run_one_blas_thread_unless_the_user_set_one(package: str) -> None:
    # Set while importing the package, before numpy (which reads it once, when it loads).
    script = (
        f"import os, sys, {package}; "
        "print(os.environ['OPENBLAS_NUM_THREADS'], 'numpy' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for given, expected in ((None, "1 False"), ("3", "3 False")):
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        out = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert out.strip() == expected


@pytest.mark.model
def test_onnx_embedder_vectors_equal_fastembed() -> None:
    from pinakes_core.index.embedding import FastEmbedder, OnnxEmbedder

    config = EmbeddingConfig()
    narrow, reference = OnnxEmbedder(config), FastEmbedder(config)
    assert narrow.model_id == reference.model_id
    texts = [
        "how does leader election work",
        "Raft elects a leader with randomised timeouts. " * 60,  # past the 256-token cut
        "",
        "a",
        "ünïcode façade — 東京 and emoji 🚀",
        "x " * 400,
    ]
    for text in texts:
        assert np.array_equal(narrow.embed_query(text), reference.embed_query(text)), text
    assert np.array_equal(narrow.embed_documents(texts), reference.embed_documents(texts))
    assert np.array_equal(narrow.embed_queries(texts), reference.embed_queries(texts))


@pytest.mark.model
def test_a_query_has_its_own_session_that_leaves_a_core_to_bm25() -> None:
    from pinakes_core.index.embedding import OnnxEmbedder, _cores

    embedder = OnnxEmbedder(EmbeddingConfig())
    embedder.embed_query("how does leader election work")
    assert set(embedder._sessions) == {True}  # a search never loads the batch session
    single = embedder._sessions[True][0].get_session_options()
    assert single.intra_op_num_threads == max(1, _cores() - 1)
    assert single.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    batch = OnnxEmbedder(EmbeddingConfig())
    batch.embed_documents(["one passage"])  # a sync's batch of one passage is still a batch
    assert set(batch._sessions) == {False}
    pinned = OnnxEmbedder(EmbeddingConfig(threads=3))
    pinned.embed_query("x")
    assert pinned._sessions[True][0].get_session_options().intra_op_num_threads == 3


@pytest.mark.model
def test_optimised_graph_is_saved_once_with_mapped_weights(tmp_path: Path) -> None:
    import onnxruntime as ort

    from pinakes_core.index.embedding import _cpu_key, _optimized_model, assemble_default_model

    folder, _ = assemble_default_model(tmp_path / "models")
    stale = folder / f"model.ort-{ort.__version__}.onnx"  # the one-file graph of earlier releases
    stale.write_bytes(b"old")
    graph = _optimized_model(ort, folder)
    assert graph is not None and graph.parent.name == f"ort-{ort.__version__}-{_cpu_key()}"
    # The weights live beside the graph (onnxruntime maps them), not inside the protobuf, and
    # prepacked as well as plain: the data is ~1.5x the float32 weights, which are ~4x the
    # int8 model.
    assert graph.stat().st_size < 1 << 20
    source = (folder / "model.onnx").stat().st_size
    assert (graph.parent / "model.data").stat().st_size > 5 * source
    assert not stale.exists()
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    written = graph.stat().st_mtime_ns
    assert _optimized_model(ort, folder) == graph  # the second start reuses it
    assert graph.stat().st_mtime_ns == written


def test_vectors_are_memory_mapped_and_equal_the_store(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    embedder = FakeHashEmbedder()
    with KB.open(root, embedder=embedder) as kb:
        kb.sync()
    with KB.open(root, embedder=embedder) as kb:
        mapped = kb.vectors()
        loaded = kb.store().load_vectors(embedder.dim)
        assert isinstance(mapped.matrix, np.memmap)
        assert np.array_equal(mapped.chunk_ids, loaded.chunk_ids)
        assert np.array_equal(mapped.matrix, loaded.matrix)
        # ANN rescoring reads scattered rows from the file: the same bytes.
        rows = np.array([len(loaded) - 1, 0, len(loaded) // 2], dtype=np.int64)
        assert np.array_equal(read_rows(mapped, rows), loaded.matrix[rows])
        before = sorted(p.name for p in (root / ".pinakes").glob("vectors-*"))
        assert len(before) == 2  # one snapshot: ids and matrix
    write_files(root, {"new-note.md": "# New\n\nA note about gossip protocols and epidemics.\n"})
    with KB.open(root, embedder=embedder) as kb:
        kb.sync()
    with KB.open(root, embedder=embedder) as kb:
        mapped = kb.vectors()
        loaded = kb.store().load_vectors(embedder.dim)
        assert np.array_equal(mapped.chunk_ids, loaded.chunk_ids)
        assert np.array_equal(mapped.matrix, loaded.matrix)
    after = sorted(p.name for p in (root / ".pinakes").glob("vectors-*"))
    assert len(after) == 2 and after != before  # the old generation's snapshot is gone


def test_no_change_sync_keeps_the_generation(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        generation = kb.store().generation()
        report = kb.sync()
        assert not (report.added or report.changed or report.removed)
        assert kb.store().generation() == generation


def _synthetic_store(root: Path, vectors: np.ndarray) -> Store:
    """A real store holding one document whose chunks carry ``vectors`` (rows = chunk ids)."""
    root.mkdir(parents=True)
    store = Store.open(root)
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO documents(doc_id, path, title, content_hash, mtime_ns, size, synced_at) "
            "VALUES ('D', 'd.md', 'D', 'h', 0, 0, 0)"
        )
        for row, vector in enumerate(vectors):
            embed_hash = f"{row:032x}"
            conn.execute(
                "INSERT INTO chunks(chunk_id, doc_id, ordinal, heading_path, text, embed_hash, "
                "start_line, end_line, tokens) VALUES (?, 'D', ?, '[]', '', ?, 1, 1, 1)",
                (row + 1, row, embed_hash),
            )
            conn.execute(
                "INSERT INTO vectors(embed_hash, vector) VALUES (?, ?)",
                (embed_hash, vector.astype(np.float32).tobytes()),
            )
        store.set_meta(conn, "dim", str(vectors.shape[1]))
        store.set_meta(conn, "model_id", "synthetic")
        store.set_meta(conn, "sync_serial", "1")
    return store


def _clustered(rng: np.random.Generator, n: int, dim: int, centres: int) -> np.ndarray:
    """Unit vectors around ``centres`` random directions, as sentence embeddings cluster."""
    middle = rng.normal(size=(centres, dim))
    points = middle[rng.integers(0, centres, n)] + 0.6 * rng.normal(size=(n, dim))
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def test_ann_recall_against_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    data = _clustered(rng, 6000, 64, 40)
    store = _synthetic_store(tmp_path / "kb", data)
    config = ScaleConfig(ann_min_chunks=1000)
    stats = update_ann(tmp_path / "kb", store, config)
    assert stats == {"removed": 0, "added": 6000, "size": 6000}
    index = load_ann(tmp_path / "kb", store, config)
    assert index is not None and len(index) == 6000
    vectors = store.load_vectors(64)
    recalls = []
    for query in _clustered(rng, 200, 64, 40):
        exact = set((np.argsort(-(data @ query))[:10] + 1).tolist())
        # The dense channel's path: 2 × 50 candidates from the index, scored exactly.
        ctx = QueryContext(
            query="q",
            conn=store.conn,
            filters=Filters(),
            candidates=50,
            vectors=lambda: vectors,
            embed_query=lambda _text, query=query: query,
            ann=lambda: index,
            ann_oversample=2.0,
        )
        found = {chunk_id for chunk_id, _ in ctx.dense()[:10]}
        recalls.append(len(exact & found) / 10)
    assert float(np.mean(recalls)) >= 0.98, np.mean(recalls)
    # Below the threshold there is no index, and search is exact.
    assert update_ann(tmp_path / "kb", store, ScaleConfig(ann_min_chunks=10_000)) is None
    assert not (tmp_path / "kb" / ".pinakes" / "ann.usearch").exists()
    assert load_ann(tmp_path / "kb", store, config) is None


def test_ann_search_and_rescoring_run_on_the_dense_worker(tmp_path: Path) -> None:
    # Past ann_min_chunks the index search and the exact rescoring of its candidates run on the
    # dense worker with the query's embedding, beside the BM25 channel, with the same result.
    rng = np.random.default_rng(7)
    data = _clustered(rng, 3000, 64, 20)
    store = _synthetic_store(tmp_path / "kb", data)
    config = ScaleConfig(ann_min_chunks=1000)
    update_ann(tmp_path / "kb", store, config)
    index = load_ann(tmp_path / "kb", store, config)
    assert index is not None
    vectors = store.load_vectors(64)
    threads: list[str] = []

    class Spy:
        def search(self, vector: np.ndarray, count: int) -> np.ndarray:
            threads.append(threading.current_thread().name)
            return index.search(vector, count)

    def context(query: np.ndarray) -> QueryContext:
        return QueryContext(
            query="q",
            conn=store.conn,
            filters=Filters(),
            candidates=50,
            vectors=lambda: vectors,
            embed_query=lambda _text: query,
            ann=lambda: Spy(),
            ann_oversample=2.0,
        )

    for query in _clustered(rng, 5, 64, 20):
        inline = context(query).dense()
        assert threads.pop() == threading.current_thread().name
        beside = context(query)
        beside.start_dense()
        assert beside.dense() == inline and inline
        assert threads.pop().startswith("pinakes-dense")
        assert "dense_scores" not in beside.__dict__  # no row was scanned


def _dense_ids(kb: KB, query: str) -> list[tuple[str, int]]:
    return [(h.path, h.chunk) for h in kb.search(query, channels=["dense"], k=20).hits]


def test_ann_is_updated_incrementally_by_sync(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    set_config(root, "scale", "ann_min_chunks = 1")
    embedder = FakeHashEmbedder()
    store_dir = root / ".pinakes"
    with KB.open(root, embedder=embedder) as kb:
        kb.sync()
        first = {int(k) for k in np.load(store_dir / "ann-keys.npy")[:, 0]}
        assert kb.searcher.ann() is not None
        notes = sorted(p for p in root.rglob("*.md"))
        gone, edited = notes[0], notes[1]
        gone_ids = {
            r[0]
            for r in kb.store().conn.execute(
                "SELECT c.chunk_id FROM chunks c JOIN documents d USING (doc_id) WHERE d.path = ?",
                (gone.relative_to(root).as_posix(),),
            )
        }
    gone.unlink()
    edited.write_text(edited.read_text() + "\n\nA new paragraph on vector clocks.\n")
    write_files(root, {"added.md": "# Gossip\n\nEpidemic protocols spread rumours to peers.\n"})
    with KB.open(root, embedder=embedder) as kb:
        report = kb.sync()
        assert report.added == ["added.md"] and report.removed and report.changed
        keys = np.load(store_dir / "ann-keys.npy")
        current = {
            r[0]
            for r in kb.store().conn.execute(
                "SELECT c.chunk_id FROM chunks c JOIN vectors v USING (embed_hash)"
            )
        }
        assert {int(k) for k in keys[:, 0]} == current != first
        assert not gone_ids & current
        index = kb.searcher.ann()
        assert index is not None and len(index) == len(current)
        vectors = kb.vectors()
        # Every chunk of the new document is found as its own nearest neighbour…
        new_ids = [
            r[0]
            for r in kb.store().conn.execute(
                "SELECT chunk_id FROM chunks JOIN documents USING (doc_id) WHERE path = 'added.md'"
            )
        ]
        for chunk_id in new_ids:
            row = int(np.searchsorted(vectors.chunk_ids, chunk_id))
            assert int(index.search(np.asarray(vectors.matrix[row]), 1)[0]) == chunk_id
        # …no removed chunk comes back, and dense search through the index equals the exact one.
        for query in ("gossip rumours", "vector clocks", "quorum reads", "leader"):
            found = set(index.search(embedder.embed_query(query), len(current)).tolist())
            assert not found & gone_ids
            with_ann = _dense_ids(kb, query)
            exact = KB.open(root, embedder=embedder)
            exact.config = exact.config.model_copy(update={"scale": ScaleConfig(ann_min_chunks=0)})
            assert exact.searcher.ann() is None
            assert with_ann == _dense_ids(exact, query)
            exact.close()
        # A sync that changes nothing keeps the index current without rebuilding it.
        stamp = (store_dir / "ann.usearch").stat().st_mtime_ns
        kb.sync()
        assert (store_dir / "ann.usearch").stat().st_mtime_ns == stamp
        assert kb.searcher.ann() is not None


def test_stale_ann_is_not_used(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    set_config(root, "scale", "ann_min_chunks = 1")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert kb.searcher.ann() is not None
        # A sync the index missed (e.g. by a version without it) leaves it a serial behind.
        conn = sqlite3.connect(root / ".pinakes" / "index.db")
        with conn:
            conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'sync_serial'"
            )
            conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )
        conn.close()
        assert kb.searcher.ann() is None
        assert kb.search("leader majority", channels=["dense"]).hits  # exact search still answers
        kb.sync()  # nothing changed, but the index was a serial behind: rebuilt, current again
        assert kb.searcher.ann() is not None
    assert os.path.exists(root / ".pinakes" / "ann.json")


@pytest.mark.model
def test_ann_and_the_model_load_together_in_a_fresh_process(tmp_path: Path) -> None:
    # The ANN index loads before the query is embedded; usearch before onnxruntime used to
    # crash the process on import.
    root = make_kb(tmp_path / "kb")
    set_config(root, "scale", "ann_min_chunks = 1")
    with KB.open(root) as kb:
        kb.sync()
    loaded = _modules_after(
        """
        import sys
        from pinakes_core import KB

        kb = KB.open(sys.argv[1])
        assert kb.searcher.ann() is not None
        assert kb.search("leader majority", channels=["bm25", "dense"]).hits
        """,
        root,
    )
    assert {"usearch", "onnxruntime"} <= _top(loaded)
