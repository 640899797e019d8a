"""The tantivy BM25 index past ``[scale] bm25_index_min_chunks`` (issue 14, docs/scaling.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb, set_config, write_files
from pinakes_core import KB
from pinakes_core.config import ScaleConfig
from pinakes_core.index import lexical, store
from pinakes_core.search.context import Filters

pytest.importorskip("tantivy")


def _files() -> dict[str, str]:
    """60 notes in two folders, tagged by parity; distinct words with graded frequencies."""
    files = {}
    for i in range(60):
        words = ["notes", f"topic{i}", "alpha" if i % 2 else "beta"]
        words += ["table"] * (1 + i % 4) if i < 40 else []
        words += ["column"] * (1 + i % 3) if i >= 25 else []
        if i in (5, 25, 35, 55):
            words += ["csv", "parser"]
        folder = "a" if i < 30 else "b"
        tag = "even" if i % 2 == 0 else "odd"
        files[f"{folder}/n{i:02d}.md"] = (
            f"---\ntags: [{tag}]\n---\n# Note {i} {'csv' if i == 7 else ''}\n\n{' '.join(words)}.\n"
        )
    return files


def _kb(tmp_path: Path, threshold: int = 10) -> KB:
    root = make_kb(tmp_path / "kb", _files())
    set_config(root, "scale", f"bm25_index_min_chunks = {threshold}")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    return kb


def _fts(kb: KB, query: str, filters: Filters | None = None) -> list[tuple[int, float]]:
    """The channel's whole pool on FTS5 (the index turned off for this context)."""
    ctx = kb.query_context(query, filters=filters)
    ctx._lexical = None
    ctx.bm25(query)
    return ctx.lexical_ranker.pool[query][0]


def _tv(kb: KB, query: str, filters: Filters | None = None) -> list[tuple[int, float]]:
    """The channel's whole pool (200 rows at most: every match here) on the index."""
    ctx = kb.query_context(query, filters=filters)
    assert ctx.lexical_index is not None
    ctx.bm25(query)
    return ctx.lexical_ranker.pool[query][0]


QUERIES = [
    "csv parser",
    "table column",
    "alpha csv",
    "topic7",
    "notes about the beta table",
    "the csv-parser",  # an identifier: the phrase "csv parser" as well as its words
]


def test_a_phrase_counts_rows_holding_its_words_in_order(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    index = kb.searcher.lexical()
    assert index is not None
    ctx = kb.query_context("x")
    ctx._lexical = None
    for phrase in ['"csv parser"', '"parser csv"', '"csv"', '"tables"', '"nosuchword"']:
        assert index.doc_freq(phrase) == ctx.doc_freq(phrase), phrase
    assert index.doc_freq('"csv parser"') == 4 and index.doc_freq('"parser csv"') == 0


def test_the_index_is_built_past_the_threshold_only(tmp_path: Path) -> None:
    kb = _kb(tmp_path, threshold=10)
    assert (kb.root / ".pinakes" / "bm25-tantivy").is_dir()
    assert kb.searcher.lexical() is not None and len(kb.searcher.lexical()) == 60
    small = _kb(tmp_path / "small", threshold=61)
    assert not (small.root / ".pinakes" / "bm25-tantivy").exists()
    assert small.searcher.lexical() is None
    assert small.query_context("csv").lexical_index is None


def test_tantivy_and_fts5_agree_on_the_top_hits(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    for query in QUERIES:
        fts = _fts(kb, query)
        tv = _tv(kb, query)
        assert fts and tv, query
        # The same rows match (OR of the same words); the order agrees at the top.
        assert {c for c, _ in tv} == {c for c, _ in fts}, query
        assert tv[0][0] == fts[0][0], query
        top = min(5, len(fts))
        assert len({c for c, _ in tv[:top]} & {c for c, _ in fts[:top]}) >= top - 1, query


def test_the_whole_search_uses_the_index(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    hits = kb.search("csv parser", channels=["bm25"]).hits
    paths = {h.path for h in hits[:4]}
    assert paths == {"a/n05.md", "a/n25.md", "b/n35.md", "b/n55.md"}


def test_filters_on_the_index_path(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    paths = dict(
        kb.store().conn.execute(
            "SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)"
        )
    )
    for filters, keep in [
        (Filters(path="b/"), lambda p: p.startswith("b/")),
        (Filters(tags=("even",)), lambda p: int(p[-5:-3]) % 2 == 0),
        (
            Filters(tags=("even",), path="a/"),
            lambda p: p.startswith("a/") and int(p[-5:-3]) % 2 == 0,
        ),
    ]:
        for query in QUERIES:
            got = _tv(kb, query, filters)
            want = [(c, s) for c, s in _tv(kb, query) if keep(paths[c])]
            assert [c for c, _ in got] == [c for c, _ in want], (filters, query)
            assert {c for c, _ in got} == {c for c, _ in _fts(kb, query, filters)}, (filters, query)
    assert _tv(kb, "csv", Filters(tags=("nosuchtag",))) == []


def _updates(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, int] | None]:
    seen: list[dict[str, int] | None] = []
    real = lexical.update_lexical

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(lexical, "update_lexical", spy)
    return seen


def test_sync_updates_the_index_incrementally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    seen = _updates(monkeypatch)
    (kb.root / "a" / "n05.md").unlink()  # held csv parser
    (kb.root / "b" / "n35.md").write_text("# Changed\n\nnothing about that any more.\n")
    write_files(kb.root, {"c/new.md": "# New\n\nzebra csv parser zebra.\n"})
    kb.sync()
    assert seen[-1] == {"removed": 3, "added": 2, "size": 60, "rebuilt": 0}
    hits = [
        kb.store()
        .conn.execute(
            "SELECT d.path FROM chunks c JOIN documents d USING (doc_id) WHERE c.chunk_id = ?", (c,)
        )
        .fetchone()[0]
        for c, _ in _tv(kb, "csv parser")
    ]
    assert "a/n05.md" not in hits and "b/n35.md" not in hits and "c/new.md" in hits
    assert _tv(kb, "zebra")[0][0] == _fts(kb, "zebra")[0][0]
    assert {c for c, _ in _tv(kb, "csv parser")} == {c for c, _ in _fts(kb, "csv parser")}
    # A sync that changes nothing only moves the stamp.
    kb.sync()
    assert seen[-1] == {"removed": 0, "added": 0, "size": 60, "rebuilt": 0}
    assert kb.searcher.lexical() is not None


def test_a_sync_killed_before_the_index_leaves_it_stale_then_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    write_files(kb.root, {"c/new.md": "# New\n\nzebra csv.\n"})

    def killed(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt  # the store has the new note; the index does not

    monkeypatch.setattr(lexical, "update_lexical", killed)
    with pytest.raises(KeyboardInterrupt):
        kb.sync()
    monkeypatch.undo()
    reopened = KB.open(kb.root, embedder=FakeHashEmbedder())
    # The stamp is behind the store: the index is not used, FTS5 answers (and finds the note).
    assert reopened.searcher.lexical() is None
    assert reopened.query_context("zebra").bm25("zebra")
    seen = _updates(monkeypatch)
    reopened.sync()
    assert seen[-1] is not None and seen[-1]["rebuilt"] == 1 and seen[-1]["size"] == 61
    assert _tv(reopened, "zebra")[0][0] == _fts(reopened, "zebra")[0][0]


def test_a_kill_inside_the_update_leaves_no_usable_stale_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    write_files(kb.root, {"c/new.md": "# New\n\nzebra csv.\n"})
    real = lexical._add_rows
    calls = []

    def dies(writer, rows):  # type: ignore[no-untyped-def]
        calls.append(1)
        real(writer, rows)
        raise KeyboardInterrupt  # after the rows went to the writer, before its commit

    monkeypatch.setattr(lexical, "_add_rows", dies)
    with pytest.raises(KeyboardInterrupt):
        kb.sync()
    monkeypatch.undo()
    assert calls
    meta = json.loads((kb.root / ".pinakes" / "bm25-tantivy.json").read_text())
    reopened = KB.open(kb.root, embedder=FakeHashEmbedder())
    assert str(meta["sync_serial"]) != reopened.store().get_meta("sync_serial")
    assert reopened.searcher.lexical() is None
    reopened.sync()
    assert reopened.searcher.lexical() is not None and len(reopened.searcher.lexical()) == 61
    assert _tv(reopened, "zebra")[0][0] == _fts(reopened, "zebra")[0][0]


def test_shrinking_below_the_threshold_drops_the_index(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    config = kb.root / "pinakes.toml"
    config.write_text(
        config.read_text().replace("bm25_index_min_chunks = 10", "bm25_index_min_chunks = 1000")
    )
    kb = KB.open(kb.root, embedder=FakeHashEmbedder())
    kb.sync()
    assert not (kb.root / ".pinakes" / "bm25-tantivy").exists()
    assert not (kb.root / ".pinakes" / "bm25-tantivy.json").exists()
    assert kb.searcher.lexical() is None


def test_the_lexical_ceiling_bounds_the_index_scores(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    for query in QUERIES:
        ctx = kb.query_context(query)
        ranked = ctx.bm25(query)
        assert ranked[0][1] <= ctx.lexical_ceiling(query)
        assert 0 < max(ctx.lexical_evidence(query, [c for c, _ in ranked]).values()) < 1


def test_config_default() -> None:
    assert ScaleConfig().bm25_index_min_chunks == 200_000


def test_both_filter_strategies_give_the_filtered_ranking(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    index = kb.searcher.lexical()
    assert index is not None
    phrases = ['"notes"', '"table"']
    full = index.search(phrases, 100)
    assert len(full) == 60
    # Broad: the allowed rows are found among the over-fetched unfiltered ones.
    broad = [c for i, (c, _) in enumerate(full) if i % 2 == 0]
    assert index.search(phrases, 3, broad) == [p for p in full if p[0] in set(broad)][:3]
    # Narrow: the last rows of the ranking, beyond OVER_FETCH × limit: tantivy's id set.
    assert lexical.OVER_FETCH * 2 < 58
    narrow = [c for c, _ in full[-3:]]
    assert index.search(phrases, 2, narrow) == full[-3:-1]
    # Broad enough to over-fetch, but ranked too low to be found there: the id set after all.
    low = [c for c, _ in full[-8:]]
    assert len(low) * lexical.OVER_FETCH * 2 >= 2 * 60
    assert index.search(phrases, 2, low) == full[-8:-6]
    assert index.search(phrases, 2, []) == []


def test_a_killed_rebuild_leaves_nothing_behind_after_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    store_dir = kb.root / ".pinakes"
    (store_dir / "bm25-tantivy.json").unlink()  # not current: the next sync rebuilds
    real = lexical._add_rows

    def dies(writer, rows):  # type: ignore[no-untyped-def]
        real(writer, rows)
        raise KeyboardInterrupt

    monkeypatch.setattr(lexical, "_add_rows", dies)
    monkeypatch.setattr(lexical.shutil, "rmtree", lambda *a, **k: None)  # as if killed
    write_files(kb.root, {"c/new.md": "# New\n\nzebra.\n"})
    with pytest.raises(KeyboardInterrupt):
        kb.sync()
    monkeypatch.undo()
    assert list(store_dir.glob(".bm25-tantivy.*"))
    reopened = KB.open(kb.root, embedder=FakeHashEmbedder())
    assert reopened.searcher.lexical() is None
    reopened.sync()
    assert not list(store_dir.glob(".bm25-tantivy.*"))
    assert reopened.searcher.lexical() is not None and len(reopened.searcher.lexical()) == 61


def test_a_document_taking_another_id_leaves_no_rows_of_the_old_one(tmp_path: Path) -> None:
    from pinakes_core.read.identity import new_ulid

    kb = _kb(tmp_path)
    old, new = new_ulid(), new_ulid()
    write_files(kb.root, {"x.md": "# X\n\nzebracorn only here.\n", "x.md.pnk.yaml": f"id: {old}\n"})
    kb.sync()
    assert [c for c, _ in _tv(kb, "zebracorn")] == [c for c, _ in _fts(kb, "zebracorn")] != []
    # The sidecar names another id: the old document (and its chunk id) goes; SQLite hands
    # the freed chunk id to the new row, so an old index row would alias it.
    write_files(kb.root, {"x.md": "# X\n\nplain text now.\n", "x.md.pnk.yaml": f"id: {new}\n"})
    kb.sync()
    index = kb.searcher.lexical()
    assert index is not None
    assert len(index) == kb.query_context("x").chunk_total == 61
    assert _tv(kb, "zebracorn") == _fts(kb, "zebracorn") == []


def test_an_index_with_rows_the_store_lacks_is_rebuilt_and_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    seen: list[dict[str, int] | None] = []
    real = lexical.update_lexical

    def forgets(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(real(*args, **{**kwargs, "removed": []}))  # as if sync left one out
        return seen[-1]

    monkeypatch.setattr(lexical, "update_lexical", forgets)
    (kb.root / "a" / "n05.md").unlink()
    kb.sync()
    assert seen[-1] == {"removed": 0, "added": 59, "size": 59, "rebuilt": 1}
    assert [c for c, _ in _tv(kb, "csv parser")] == [c for c, _ in _fts(kb, "csv parser")]
    # A stamp whose row count is not the store's: searches use FTS5.
    meta = kb.root / ".pinakes" / "bm25-tantivy.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "size": 60}))
    assert KB.open(kb.root, embedder=FakeHashEmbedder()).searcher.lexical() is None


def test_counts_and_ceiling_leave_deleted_rows_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    seen = _updates(monkeypatch)
    # Five notes holding "table" rewritten: their old rows stay in tantivy until a merge.
    for i in range(5):
        (kb.root / "a" / f"n{i:02d}.md").write_text(f"# Note {i}\n\ntable rewritten {i}.\n")
    kb.sync()
    assert seen[-1] is not None and seen[-1]["rebuilt"] == 0
    index = kb.searcher.lexical()
    assert index is not None
    fts = kb.query_context("x")
    fts._lexical = None
    for phrase in ['"table"', '"notes"', '"table rewritten"', '"rewritten"']:
        assert index.doc_freq(phrase) == fts.doc_freq(phrase), phrase
    assert index.scored_rows > len(index) == 60
    monkeypatch.setattr(lexical, "EXACT_COUNT_MAX", 0)  # the dictionary's count, capped
    assert index.doc_freq('"table"') <= len(index)
    for query in ["table", "table rewritten", "notes table column"]:
        ctx = kb.query_context(query)
        assert ctx.bm25(query)[0][1] <= ctx.lexical_ceiling(query)
        assert ctx.lexical_ceiling(query) > 0


def test_an_update_leaving_many_deleted_rows_rebuilds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = _kb(tmp_path)
    seen = _updates(monkeypatch)
    for i in range(20):  # a third of the rows
        (kb.root / "a" / f"n{i:02d}.md").write_text(f"# Note {i}\n\ntable again {i}.\n")
    kb.sync()
    assert seen[-1] == {"removed": 0, "added": 60, "size": 60, "rebuilt": 1}
    index = kb.searcher.lexical()
    assert index is not None and index.scored_rows == len(index) == 60


def test_any_sync_sweeps_what_killed_rebuilds_left(tmp_path: Path) -> None:
    import os

    kb = _kb(tmp_path)
    store_dir = kb.root / ".pinakes"
    # A rebuild of this very pid killed while deleting the old folder, another's temp folder
    # and a stamp write's temp file.
    write_files(
        store_dir,
        {
            f".bm25-tantivy.{os.getpid()}.old/meta.json": "{}",
            ".bm25-tantivy.4242.tmp/x": "",
            ".bm25-tantivy.json.4242.tmp": "{}",
        },
    )
    (kb.root / "a" / "n01.md").write_text("# Note 1\n\nchanged.\n")
    kb.sync()  # an incremental update
    assert not list(store_dir.glob(".bm25-tantivy.*"))
    write_files(store_dir, {f".bm25-tantivy.{os.getpid()}.old/meta.json": "{}"})
    (store_dir / "bm25-tantivy.json").unlink()
    (kb.root / "a" / "n01.md").write_text("# Note 1\n\nchanged again.\n")
    kb.sync()  # a rebuild
    assert not list(store_dir.glob(".bm25-tantivy.*"))
    assert kb.searcher.lexical() is not None


def test_below_the_threshold_sync_drops_whatever_of_the_index_is_left(tmp_path: Path) -> None:
    # One rule for keeping the index (lexical.wanted), applied by update_lexical alone: a
    # stamp without its folder, or a killed rebuild's folder, goes too.
    kb = _kb(tmp_path, threshold=1000)
    folder, stamp = store.lexical_paths(kb.root)
    write_files(kb.root / ".pinakes", {stamp.name: "{}", f".{folder.name}.1-ab.tmp/x": ""})
    (kb.root / "a" / "n01.md").write_text("# Note 1\n\nchanged.\n")
    kb.sync()
    assert not stamp.exists() and not list(folder.parent.glob(f".{folder.name}.*"))


def test_the_index_reads_letters_as_fts5_does_where_tantivy_allows(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    write_files(
        kb.root,
        {
            "t/upper.md": "# Trip\n\nİstanbul trip.\n",
            "t/lower.md": "# Trip\n\nistanbul trip.\n",
            "t/accent.md": "# Café\n\nvisited a café.\n",
            "t/plain.md": "# Cafe\n\nvisited a cafe.\n",
        },
    )
    kb.sync()
    for query in ["istanbul", "İSTANBUL", "café", "cafe"]:
        assert sorted(c for c, _ in _tv(kb, query)) == sorted(c for c, _ in _fts(kb, query))


def test_the_shared_counts_of_the_index_and_of_fts5_stay_apart(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    write_files(kb.root, {"t/lig.md": "# Money\n\n\ufb01nance report.\n"})
    kb.sync()
    on_index = kb.query_context("finance")
    assert on_index.lexical_index is not None
    assert on_index.doc_freq('"finance"') == 1  # the index folds the ligature
    # Same generation, same shared table, but this context runs on FTS5 (as when the index
    # goes stale between a context's start and its first count).
    on_fts = kb.query_context("finance")
    on_fts._lexical = None
    assert on_fts.doc_freq('"finance"') == 0
    assert kb.query_context("finance").doc_freq('"finance"') == 1


def test_a_sync_by_another_kb_handle_is_seen_at_the_next_search(tmp_path: Path) -> None:
    """A server holding the index notices another process's sync (the index's stamp moved).

    The other process is a second KB handle over the same folder: its own store connection,
    nothing shared with the first but the files.
    """
    server = _kb(tmp_path)
    held = server.searcher.lexical()
    assert held is not None and len(held) == 60
    other = KB.open(server.root, embedder=FakeHashEmbedder())
    write_files(server.root, {"c/new.md": "# New\n\nzebra csv parser zebra.\n"})
    other.sync()
    other.close()
    now = server.searcher.lexical()
    assert now is not None and now is not held and len(now) == 61
    ctx = server.query_context("zebra")
    assert ctx.lexical_index is now and ctx.bm25("zebra")
    server.close()
