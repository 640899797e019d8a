"""At a million chunks (issue 14): the BM25 channel's candidates, and the no-change walk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pathspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb, scalar, set_config
from pinakes_core import KB
from pinakes_core.config import ScaleConfig
from pinakes_core.index.bm25 import EVIDENCE_POOL, scored_arms
from pinakes_core.read.documents import _matcher
from pinakes_core.search.context import QueryContext


def _files() -> dict[str, str]:
    """40 one-chunk notes: "table" in 30, "column" in 20 (10 of them with both), "csv" in 3."""
    files = {}
    for i in range(40):
        words = ["notes", f"topic{i}"]
        if i < 30:
            words += ["table"] * (1 + i % 3)
        if 20 <= i < 40:
            words += ["column"] * (1 + i % 2)
        if i in (5, 25, 35):
            words.append("csv")
        files[f"n{i:02d}.md"] = f"# Note {i}\n\n{' '.join(words)}.\n"
    return files


def _context(kb: KB, query: str, budget: int, candidates: int = 50) -> QueryContext:
    kb.config = kb.config.model_copy(update={"scale": ScaleConfig(bm25_max_rows=budget)})
    return kb.query_context(query, candidates=candidates)


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb", _files())
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    return handle


def test_chunk_total_is_the_fts_row_count(kb: KB) -> None:
    ctx = kb.query_context("table")
    assert ctx.chunk_total == scalar(kb.root, "SELECT COUNT(*) FROM chunks") == 40
    (kb.root / "n00.md").unlink()
    kb.sync()
    assert kb.query_context("table").chunk_total == 39


def test_common_words_only_score_the_rare_words_candidates(kb: KB) -> None:
    query = "csv table column"
    exact_ctx = _context(kb, query, 0)
    exact = dict(exact_ctx.bm25(query))
    assert exact_ctx.lexical_split(query) == (['"csv"', '"table"', '"column"'], [])
    assert len(exact) == 40  # every note holds table or column

    pruned_ctx = _context(kb, query, 10)
    assert pruned_ctx.lexical_split(query) == (['"csv"'], ['"table"', '"column"'])
    pruned = pruned_ctx.bm25(query)
    ids = {
        scalar(
            kb.root,
            "SELECT path FROM documents d JOIN chunks c USING (doc_id) WHERE c.chunk_id = ?",
            (chunk,),
        ): chunk
        for chunk, _ in pruned
    }
    # Candidates: the csv notes, and the notes holding every common word (20..29).
    expected = {f"n{i:02d}.md" for i in (5, 25, 35, *range(20, 30))}
    assert set(ids) == expected
    # Each candidate's score is its BM25 for the whole query, and the order is exact's.
    for chunk, score in pruned:
        assert score == pytest.approx(exact[chunk], rel=1e-12)
    exact_order = [c for c, _ in exact_ctx.bm25(query) if c in {c for c, _ in pruned}]
    assert [c for c, _ in pruned] == exact_order
    # The csv notes lead both rankings.
    assert [c for c, _ in pruned[:3]] == [c for c, _ in exact_ctx.bm25(query)[:3]]


def test_a_tighter_first_split_is_kept_only_when_provably_exact(kb: KB) -> None:
    query = "csv column"
    exact = _context(kb, query, 0).bm25(query)
    # Budget 40 covers the whole KB (no split); its first try, at a quarter, splits off "column".
    proven = _context(kb, query, 40, candidates=3)
    assert proven.lexical_split(query, 10) == (['"csv"'], ['"column"'])
    top = proven.bm25(query)
    # "column" is in half the notes: its ceiling is ~0, below the 3rd csv note's score, so the
    # split's top 3 are provably the exact top 3 and only the csv notes were scored.
    assert proven.split_is_exact(proven.lexical_ranker.pool[query][0], ['"column"'])
    assert _ids(top) == _ids(exact)[:3]
    assert [score for _, score in top] == pytest.approx([score for _, score in exact[:3]])
    assert len(proven.lexical_ranker.pool[query][0]) == 3
    # Asking for 50 candidates, 3 rows prove nothing: "column"'s rows are scored too, and in a
    # KB within the budget that ends exact.
    unproven = _context(kb, query, 40, candidates=50)
    assert not unproven.split_is_exact(exact[:3], ['"column"'])
    assert _ids(unproven.bm25(query)) == _ids(exact)


def test_an_unproven_split_widens_within_the_budget_only(kb: KB) -> None:
    query = "csv column"
    exact = _context(kb, query, 0).bm25(query)
    # KB of 40 chunks, budget 30: "column"'s 20 rows fit beside csv's 3, so they are scored.
    widened = _context(kb, query, 30, candidates=5)
    assert _ids(widened.bm25(query)) == _ids(exact)[:5]
    assert _ids(widened.lexical_ranker.pool[query][0]) == _ids(exact)[: 5 * EVIDENCE_POOL]
    # Budget 10: they do not fit, so the split stays where the first try left it.
    capped = _context(kb, query, 10, candidates=5)
    capped.bm25(query)
    assert len(capped.lexical_ranker.pool[query][0]) == 3


def _ids(ranked: list[tuple[int, float]]) -> list[int]:
    return [chunk for chunk, _ in ranked]


@pytest.mark.parametrize(
    ("rare", "common"),
    [
        (['"csv"'], ['"table"', '"column"']),
        (['"csv"', '"column"'], ['"table"']),
        (['"column"'], ['"table"', '"notes"']),
    ],
)
@pytest.mark.parametrize("limit", [2, 5, 200])
def test_split_arms_score_every_row_as_the_whole_query_does_bit_for_bit(
    kb: KB, rare: list[str], common: list[str], limit: int
) -> None:
    # The exclusive first arm (rare NOT common) and the arms' own LIMITs change which rows each
    # arm scores, never a returned row or its score; the reference is one UNION of the full
    # arms with no LIMIT of their own, merged as before.
    ctx = kb.query_context(" ".join(p.strip('"') for p in rare + common))
    score = "bm25(chunks_fts, 2.0, 1.5, 1.0, 1.0)"
    anyone = " OR ".join(rare)
    union = (
        f"SELECT rowid, MIN(s) FROM (SELECT chunks_fts.rowid AS rowid, {score} AS s FROM "
        f"chunks_fts WHERE chunks_fts MATCH ? UNION ALL SELECT chunks_fts.rowid, {score} FROM "
        "chunks_fts WHERE chunks_fts MATCH ?) GROUP BY rowid ORDER BY 2, rowid LIMIT ?"
    )
    reference = [
        (int(r[0]), -float(r[1]))
        for r in ctx.conn.execute(
            union, (anyone, f"({anyone}) AND ({' OR '.join(common)})", limit)
        ).fetchall()
    ]
    assert reference
    for exclusive in (False, True):
        arms = scored_arms(rare, common, exclusive=exclusive)
        assert ("NOT" in arms[0]) == exclusive
        assert ctx.lexical_ranker._rows(arms, limit) == reference


def test_the_exclusive_arm_is_taken_when_the_rare_rows_are_not_few(kb: KB) -> None:
    ctx = kb.query_context("csv table column")
    # csv: 3 rows; table + column: 50 rows. 3 >= 0.05 x 50.
    assert "NOT" in ctx.lexical_ranker._split_arms(['"csv"'], ['"table"', '"column"'])[0]
    assert ctx.lexical_ranker._split_arms(['"csv"'], []) == ['"csv"']
    # topic3: 1 row against notes' 40: scoring it twice is cheaper than counting notes again.
    assert "NOT" not in ctx.lexical_ranker._split_arms(['"topic3"'], ['"notes"'])[0]


def _strong_kb(root: Path) -> KB:
    """40 notes: 4 titled "alpha beta gamma", 6 more with "alpha" once, beta and gamma in 8 and
    10 others. The 4 score far above what "alpha" alone can give any note (its ceiling)."""
    files = {}
    for i in range(40):
        title, words = f"Note {i}", ["notes", f"topic{i}"]
        if i < 4:
            title, words = "Alpha beta gamma", [*words, "alpha beta gamma"]
        elif i < 10:
            words.append("alpha")
        elif i < 18:
            words.append("beta")
        elif i < 28:
            words.append("gamma")
        files[f"n{i:02d}.md"] = f"# {title}\n\n{' '.join(words)}.\n"
    handle = KB.open(make_kb(root, files), embedder=FakeHashEmbedder())
    handle.sync()
    return handle


@pytest.mark.parametrize(("limit", "skipped"), [(2, True), (4, True), (5, False), (200, False)])
def test_the_rare_only_arm_runs_only_when_its_rows_can_still_enter(
    tmp_path: Path, limit: int, skipped: bool
) -> None:
    kb = _strong_kb(tmp_path / "kb")
    ctx = kb.query_context("alpha beta gamma")
    rare, common = ['"alpha"'], ['"beta"', '"gamma"']
    reference = ctx.lexical_ranker._rows(
        ctx.lexical_ranker._split_arms(rare, common), limit
    )  # both arms, one UNION
    ran: list[list[str]] = []
    scored = ctx.lexical_ranker._rows

    def spy(arms: list[str], n: int) -> list[tuple[int, float]]:
        ran.append(arms)
        return scored(arms, n)

    ctx.lexical_ranker._rows = spy  # type: ignore[method-assign]
    assert ctx.lexical_ranker._split_rows([], rare, common, limit) == reference
    # The rows holding alpha alone score below its ceiling; the 4 strong notes above it.
    assert (len(ran) == 1) == skipped
    assert "AND" in ran[0][0]
    if skipped:
        assert reference[limit - 1][1] >= ctx.phrase_ceiling(rare)


def _recording(may_enter: Callable[..., bool], answers: list[bool]) -> Callable[..., bool]:
    def record(*args: object) -> bool:
        answers.append(may_enter(*args))
        return answers[-1]

    return record


def test_skipping_the_rare_only_arm_leaves_the_channel_unchanged(tmp_path: Path) -> None:
    kb = _strong_kb(tmp_path / "kb")
    query = "alpha beta gamma"
    answers: list[bool] = []
    for candidates in (1, 2, 5, 50):
        ctx = _context(kb, query, 10, candidates=candidates)
        assert ctx.lexical_split(query, 2) == (['"alpha"'], ['"beta"', '"gamma"'])
        ctx.lexical_ranker._may_enter = _recording(ctx.lexical_ranker._may_enter, answers)  # type: ignore[method-assign]
        # The reference: the same channel with the rare-only arm always run.
        reference = _context(kb, query, 10, candidates=candidates)
        reference.lexical_ranker._may_enter = lambda ranked, phrases, limit: True  # type: ignore[method-assign]
        assert ctx.bm25(query) == reference.bm25(query)
        assert ctx.lexical_ranker.pool[query] == reference.lexical_ranker.pool[query]
    # Skipped only for 1 candidate (a pool of 4 rows: the 4 strong notes), run for the others.
    assert answers == [False, True, True, True]


def test_small_kbs_and_rare_queries_stay_exact(kb: KB) -> None:
    # A KB of at most bm25_max_rows chunks never prunes; neither does a query whose rows fit.
    assert _context(kb, "csv table", 40).lexical_split("csv table") == (['"csv"', '"table"'], [])
    assert _context(kb, "csv topic3", 10).lexical_split("csv topic3") == (
        ['"csv"', '"topic3"'],
        [],
    )
    # A single phrase is never split, however common.
    assert _context(kb, "table", 10).lexical_split("table") == (['"table"'], [])


def test_the_budget_is_configurable(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", _files())
    set_config(root, "scale", "bm25_max_rows = 0")
    assert KB.open(root).config.scale.bm25_max_rows == 0
    assert ScaleConfig().bm25_max_rows > 0


# -- the no-change walk at 100k files (issue 14) ----------------------------------------------

_GLOBS = [
    "*.md",
    "**/*.txt",
    "docs/",
    "docs/**/x.md",
    "a/b/",
    "build",
    "*.p?f",
    "!keep.md",
    "[ab]*",
]
_NAMES = [
    "a.md",
    "docs/x.md",
    "docs/q/x.md",
    "a/b/c.txt",
    "build/y.md",
    "keep.md",
    "z.pdf",
    "b.txt",
]


@given(
    patterns=st.lists(st.sampled_from(_GLOBS), max_size=5),
    rel=st.sampled_from(_NAMES) | st.from_regex(r"[a-z]{1,3}(/[a-z.]{1,5}){0,3}", fullmatch=True),
)
def test_scan_matcher_equals_pathspec(patterns: list[str], rel: str) -> None:
    spec = pathspec.PathSpec.from_lines("gitignore", patterns)
    assert _matcher(spec)(rel) == spec.match_file(rel)


def test_no_change_plan_still_sees_changes_and_removals(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    report = kb.sync()
    assert report.unchanged == 2 and not (report.added or report.changed or report.removed)
    (root / "a.md").write_text("# A\n\nalpha, longer now\n")
    (root / "b.md").unlink()
    report = kb.sync()
    assert report.changed == ["a.md"] and report.removed == ["b.md"]


def test_store_connections_keep_a_page_cache_for_large_kbs(kb: KB) -> None:
    from pinakes_core.index.store import PAGE_CACHE_KIB

    # Negative cache_size: KiB, not pages. The default (-2000) re-reads a 1M-chunk KB's hot
    # FTS pages from the OS on every query.
    assert kb.store().conn.execute("PRAGMA cache_size").fetchone()[0] == -PAGE_CACHE_KIB
    assert PAGE_CACHE_KIB >= 32768


def test_a_filter_is_not_handed_to_fts5_as_rowid_lookups(kb: KB) -> None:
    from pinakes_core.search.context import Filters

    # Handed to FTS5 (plan "INDEX 0:=M…"), ``rowid IN (…)`` re-ran the MATCH once per allowed
    # row, re-reading each phrase's doclist for its IDF: 7.5 s instead of 64 ms for a path
    # filter passing all 6,542 chunks of nushell-docs.
    statements: list[str] = []
    conn = kb.store().conn
    ctx = kb.query_context("table column", filters=Filters(path="n0"))
    conn.set_trace_callback(statements.append)
    try:
        got = ctx.bm25("table column")
    finally:
        conn.set_trace_callback(None)
    scored = [s for s in statements if "bm25(chunks_fts" in s]
    assert scored
    for sql in scored:
        plan = " ".join(str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "VIRTUAL TABLE INDEX" in plan and ":=" not in plan, plan
    # The same rows as the unfiltered channel's, restricted to the filter.
    full = kb.query_context("table column").bm25("table column")
    paths = dict(
        conn.execute("SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)")
    )
    assert got == [(c, s) for c, s in full if paths[c].startswith("n0")]
    assert len(got) == 10
