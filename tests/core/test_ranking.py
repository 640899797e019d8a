"""Ranking (issue 9): scores that mean something, query-adaptive fusion, per-document results,
near-duplicates, titles in hits, and the adaptive choices shown by ``explain``."""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb, query_context
from pinakes_core import KB, PinakesError
from pinakes_core.index.bm25 import bm25_idf
from pinakes_core.models import Hit
from pinakes_core.search.context import QueryContext
from pinakes_core.search.fusion import (
    LEXICAL_EXACT,
    LEXICAL_PROSE,
    combine,
    lexical_share,
    query_shape,
)

FILES: dict[str, str | bytes] = {
    "services/ledger.md": (
        "---\ntitle: Ledger service\n---\n# Ledger service\n\n"
        "The ledger records every payment as a double-entry journal.\n\n"
        "## Configuration\n\n`ledger.retry.max_attempts` is 5; `ledger.pool.size` is 40.\n\n"
        "## Error codes\n\nLED-4009 means the journal entry does not balance.\n"
    ),
    "services/payouts.md": (
        "# Payouts\n\nPayouts send money to carriers every night through the bank file.\n\n"
        "## Configuration\n\n`payouts.retry.max_attempts` is 6.\n"
    ),
    "runbooks/stuck-payouts.md": (
        "# Stuck payouts\n\nWhen carriers were not paid this morning, log in to the settlement "
        "host and read the worker log before re-running the batch.\n"
    ),
    "notes/copy-of-stuck-payouts.md": (
        "# Stuck payouts (copy)\n\nWhen carriers were not paid this morning, log in to the "
        "settlement host and read the worker log before re-running the batch.\n"
    ),
    "glossary/journal.md": "# Journal entry\n\nA journal entry is a balanced set of postings.\n",
}


@pytest.fixture
def kb(tmp_path: Path):
    handle = KB.open(make_kb(tmp_path / "kb", FILES), embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def _context(kb: KB, query: str) -> QueryContext:
    ctx: QueryContext = query_context(kb, query)
    return ctx


# -- query shape and weights -------------------------------------------------------------------


def test_query_shape_finds_identifiers_but_not_plain_compounds_or_years() -> None:
    shape = query_shape("what is ledger.retry.max_attempts set to in 2024 for on-call?")
    assert shape.identifiers == ("ledger.retry.max_attempts",)
    assert query_shape("LED-4009").exact_share == 1.0
    assert query_shape("E-4012 v2 --force $HOME fooBar a/b").identifiers == (
        "E-4012",
        "v2",
        "--force",
        "$HOME",
        "fooBar",
        "a/b",
    )
    assert query_shape('find "exact phrase here" please').quoted == ("exact phrase here",)
    assert query_shape("ls | where size > 10kb").code
    plain = query_shape("why did we write our own toggle system instead of buying one?")
    assert plain.identifiers == () and plain.exact_share == 0.0 and plain.question


@given(st.text(max_size=200))
def test_query_shape_never_raises_and_shares_stay_in_range(text: str) -> None:
    shape = query_shape(text)
    assert 0.0 <= shape.exact_share <= 1.0
    assert LEXICAL_PROSE <= lexical_share(shape) <= LEXICAL_EXACT


def test_lexical_share_grows_with_the_exact_part_of_the_query() -> None:
    prose = lexical_share(query_shape("how do carriers get paid"))
    mixed = lexical_share(query_shape("what does the code GW-429 mean for a request?"))
    exact = lexical_share(query_shape("GW-429"))
    assert prose == LEXICAL_PROSE < mixed < exact == LEXICAL_EXACT


def test_the_comparison_phrasing_is_found_anywhere_in_a_long_query() -> None:
    # Unanchored, the pattern rescanned the query from every position (minutes at 100k).
    long = "which came out first " + "word " * 20_000 + "Foo or Bar"
    assert "comparison" in query_shape(long).relations
    assert "comparison" not in query_shape("word " * 20_000).relations


def test_bm25_idf_survives_counts_read_at_different_moments() -> None:
    # A phrase counted after a sync grew it, against a total read before: log of a negative.
    assert bm25_idf(400, 440) == bm25_idf(400, 400) > 0
    assert bm25_idf(0, 3) > 0 and bm25_idf(1000, 3) > bm25_idf(1000, 300)


def test_a_query_in_chinese_japanese_or_korean_leans_on_exact_words() -> None:
    # The default model reads English: its cosine on these scripts follows the Latin words.
    chinese = query_shape("扩展运算符可以把数组转为参数序列吗")
    assert chinese.cjk_share == 1.0 and lexical_share(chinese) == LEXICAL_EXACT
    mixed = query_shape("箭头函数里面的this指向哪里")
    assert 0.0 < mixed.cjk_share < 1.0 and lexical_share(mixed) == LEXICAL_EXACT
    english = query_shape("how do carriers get paid")
    assert english.cjk_share == 0.0 and lexical_share(english) == LEXICAL_PROSE


def test_relational_phrasings_are_recognised() -> None:
    def rel(query: str) -> tuple[str, ...]:
        return query_shape(query).relations

    assert "relative clause" in rel("who leads the team that owns the ledger?")
    assert "relative clause" in rel("In what county is the city where Harris Fawell was born?")
    assert "possessive" in rel("When did Lothair II's mother die?")
    assert "role of" in rel("Where was the director of film Billy Elliot born?")
    assert "two questions" in rel("who owns the policy, and who does that person report to?")
    assert "comparison" in rel("Which film came out first, Dying God or 3 Dots?")
    assert "participle" in rel("which acquirers does the router owned by Aiko's team use?")
    for single in (
        "what port does the ledger service listen on?",
        "how do I make a variable that I can change later",
        "how do I sort a table by one of its columns",
        "In Nu, how do I read a file line by line?",  # a fronted phrase asks no second question
        "where does the history file live?",  # "where" asks; it does not relate
        "which folder do I put plugins in when I start nu?",
        "LED-4009",
    ):
        assert rel(single) == (), single


def test_combine_is_a_weighted_mean_in_unit_range_and_order_invariant() -> None:
    evidence = {"bm25": {1: 0.8, 2: 0.1}, "dense": {2: 0.9, 3: 0.4}}
    fused = combine(evidence, {"bm25": 0.25, "dense": 0.75})
    scores = dict(fused)
    assert scores[1] == pytest.approx(0.25 * 0.8)
    assert scores[2] == pytest.approx(0.25 * 0.1 + 0.75 * 0.9)
    assert scores[3] == pytest.approx(0.75 * 0.4)
    assert [c for c, _ in fused] == [2, 3, 1]
    assert combine(dict(reversed(evidence.items())), {"dense": 0.75, "bm25": 0.25}) == fused
    assert combine({"bm25": {5: 0.5, 4: 0.5}}, {"bm25": 1.0}) == [(4, 0.5), (5, 0.5)]
    assert combine(evidence, {}) == []


# -- scores -----------------------------------------------------------------------------------


def test_score_is_the_channel_evidence_in_every_mode_and_falls_with_rank(kb: KB) -> None:
    query = "ledger retry attempts"
    ctx = _context(kb, query)
    lexical = kb.search(query, channels=["bm25"], k=10, explain=True)
    semantic = kb.search(query, channels=["dense"], k=10, explain=True)
    hybrid = kb.search(query, channels=["bm25", "dense"], k=10, explain=True)
    ceiling = ctx.lexical_ceiling(query)
    for hit in lexical.hits:  # bm25 alone: the share of the query's best possible BM25
        assert hit.channel_scores is not None
        assert hit.score == pytest.approx(hit.channel_scores["bm25"] / ceiling, abs=1e-6)
    for hit in semantic.hits:  # dense alone: the cosine
        assert hit.channel_scores is not None
        assert hit.score == pytest.approx(hit.channel_scores["dense"], abs=1e-6)
    assert hybrid.ranking is not None
    w = hybrid.ranking.weights
    assert w["bm25"] + w["dense"] == pytest.approx(1.0)
    by_chunk = {(h.doc_id, h.chunk): h.score for h in semantic.hits}
    lex = {(h.doc_id, h.chunk): h.score for h in lexical.hits}
    for hit in hybrid.hits:  # hybrid: their weighted mean
        key = (hit.doc_id, hit.chunk)
        if key in by_chunk and key in lex:
            expected = w["bm25"] * lex[key] + w["dense"] * by_chunk[key]
            assert hit.score == pytest.approx(expected, abs=1e-5)
    for result in (lexical, semantic, hybrid):
        scores = [h.score for h in result.hits]
        assert scores == sorted(scores, reverse=True)
        assert all(0.0 <= s <= 1.0 for s in scores)
        assert len(set(scores)) > 1  # never 1, 1/2, 1/3 …: values, not ranks
        assert not all(math.isclose(s, 1 / i) for i, s in enumerate(scores, 1))


def test_scores_are_monotone_with_every_graph_reranker(kb: KB) -> None:
    pytest.importorskip("pinakes_graph")
    for graph in ("ppr-rerank", "ppr-rank", "ppr-auto", "link-rerank", "salience"):
        result = kb.search(
            "who runs the service that pays carriers?", channels=["bm25", "dense", graph], k=8
        )
        scores = [h.score for h in result.hits]
        assert scores == sorted(scores, reverse=True), graph
        assert all(0.0 <= s <= 1.0 for s in scores), graph


def test_min_score_drops_weak_hits_and_is_validated(kb: KB) -> None:
    everything = kb.search("ledger retry attempts", k=10)
    cut = everything.hits[2].score
    strong = kb.search("ledger retry attempts", k=10, min_score=cut)
    assert [h.score for h in strong.hits] == [h.score for h in everything.hits if h.score >= cut]
    assert kb.search("ledger retry attempts", min_score=1.0).hits == []
    with pytest.raises(PinakesError, match="min_score"):
        kb.search("ledger", min_score=1.5)
    with pytest.raises(PinakesError, match="group_by"):
        kb.search("ledger", group_by="page")  # type: ignore[arg-type]


# -- explain shows the adaptive choices --------------------------------------------------------


def test_explain_shows_the_shape_the_weights_and_the_graph_gate(kb: KB) -> None:
    exact = kb.search("ledger.retry.max_attempts", explain=True)
    prose = kb.search("how do carriers get paid at night", explain=True)
    assert exact.ranking is not None and prose.ranking is not None
    assert exact.ranking.shape["identifiers"] == ["ledger.retry.max_attempts"]
    assert exact.ranking.weights["bm25"] == LEXICAL_EXACT
    assert prose.ranking.weights["bm25"] == LEXICAL_PROSE
    assert exact.ranking.weights["bm25"] > prose.ranking.weights["bm25"]
    assert kb.search("ledger").ranking is None  # only with explain
    if "ppr-auto" in exact.ranking.stages:  # the graph plugin is installed
        assert exact.ranking.stages["ppr-auto"].startswith("skipped: single-hop")
        multi = kb.search("who leads the team that owns the ledger?", explain=True)
        assert multi.ranking is not None
        assert multi.ranking.stages["ppr-auto"].startswith("ran: multi-hop phrasing")
        assert "ppr-auto" in multi.timings_ms and "ppr-auto" not in exact.timings_ms


def test_a_skipped_graph_stage_leaves_the_plain_hybrid_ranking(kb: KB) -> None:
    pytest.importorskip("pinakes_graph")
    query = "ledger.retry.max_attempts"
    auto = kb.search(query, channels=["bm25", "dense", "ppr-auto"], k=8)
    plain = kb.search(query, channels=["bm25", "dense"], k=8)
    assert [(h.path, h.chunk, h.score) for h in auto.hits] == [
        (h.path, h.chunk, h.score) for h in plain.hits
    ]


# -- documents --------------------------------------------------------------------------------


def test_near_duplicate_passages_fold_into_one_hit(kb: KB) -> None:
    result = kb.search("carriers not paid this morning settlement host", k=5)
    paths = [h.path for h in result.hits]
    pair = {"runbooks/stuck-payouts.md", "notes/copy-of-stuck-payouts.md"}
    assert len(pair & set(paths)) == 1
    top = next(h for h in result.hits if h.path in pair)
    assert top.duplicates == list(pair - {top.path})
    assert all(h.duplicates is None for h in result.hits if h is not top)


def _reference_duplicate(a: str, b: str) -> bool:
    """The near-duplicate rule read straight from its definition (hits.DUPLICATE_JACCARD)."""
    import re

    from pinakes_core.search.hits import DUPLICATE_JACCARD

    small, large = sorted((len(a), len(b)))
    if small < 0.8 * large:
        return False
    wa, wb = (frozenset(re.findall(r"\w+", t.lower())) for t in (a, b))
    if not wa or not wb:
        return a.strip() == b.strip()
    if min(len(wa), len(wb)) < 0.9 * max(len(wa), len(wb)):
        return False
    return len(wa & wb) / len(wa | wb) >= DUPLICATE_JACCARD


_PASSAGE = st.text(alphabet=st.sampled_from("ab cd\n.éZ"), max_size=40)


@given(a=_PASSAGE, b=_PASSAGE, same=st.booleans())
def test_folding_decides_as_the_near_duplicate_rule_does(a: str, b: str, same: bool) -> None:
    from pinakes_core.search.hits import _duplicate, _Row

    def row(text: str) -> _Row:
        return _Row(1, 0.5, "d", 0, "p.md", "t", [], text, (1, 1), "markdown", None, None)

    b = a if same else b
    assert _duplicate(row(a), row(b)) == _reference_duplicate(a, b)


def test_per_document_search_returns_k_distinct_documents_with_their_passages(kb: KB) -> None:
    chunks = kb.search("ledger configuration retry error journal", k=4, group_by="chunk")
    per_doc = kb.search("ledger configuration retry error journal", k=4, group_by="document")
    assert len(per_doc.hits) == 4
    assert len({h.doc_id for h in per_doc.hits}) == 4
    assert len({h.doc_id for h in chunks.hits}) < 4  # k chunks came from fewer documents
    ledger = next(h for h in per_doc.hits if h.path == "services/ledger.md")
    assert ledger.passages  # the ledger's other matching sections ride along
    assert all(p.score <= ledger.score for p in ledger.passages)
    assert len({ledger.chunk, *(p.chunk for p in ledger.passages)}) == 1 + len(ledger.passages)
    assert all(h.passages is None for h in chunks.hits)
    scores = [h.score for h in per_doc.hits]
    assert scores == sorted(scores, reverse=True)


def test_a_passage_no_channel_matched_does_not_ride_along(kb: KB) -> None:
    # The graph reranker can place a head document's other chunks at score 0 (reached by the
    # graph, matched by nothing): they are not among the document's best passages.
    from conftest import db
    from pinakes_core.search.hits import build_hits

    conn = db(kb.root)
    try:
        chunks = [
            r[0]
            for r in conn.execute(
                "SELECT c.chunk_id FROM chunks c JOIN documents d ON d.doc_id = c.doc_id "
                "WHERE d.path = 'services/ledger.md' ORDER BY c.ordinal"
            )
        ]
        assert len(chunks) >= 3
        ranked = [(chunks[0], 0.8), (chunks[1], 0.4), *((c, 0.0) for c in chunks[2:])]
        (hit,) = build_hits(conn, ranked, {}, k=1, explain=False, group_by="document")
    finally:
        conn.close()
    assert [p.score for p in hit.passages or []] == [0.4]


# -- titles -----------------------------------------------------------------------------------


def test_hit_location_puts_the_title_before_the_heading_path() -> None:
    def hit(title: str, path: list[str]) -> Hit:
        return Hit(
            doc_id="X",
            chunk=0,
            path="a.md",
            title=title,
            heading_path=path,
            text="t",
            score=0.5,
            lines=(1, 1),
            ranks={},
        )

    assert hit("Ledger service", ["Ledger service", "Configuration"]).location == (
        "Ledger service › Configuration"
    )
    assert hit("Changelog", ["0.119.0", "Fix"]).location == "Changelog › 0.119.0 › Fix"
    assert hit("Postmortem: outage (2025-01-14)", ["Postmortem: outage", "Timeline"]).location == (
        "Postmortem: outage (2025-01-14) › Timeline"
    )
    assert hit("Notes", []).location == "Notes"
    # A frontmatter title that says the H1 in other words does not repeat it (issue 35)...
    assert hit("ADR 0002: Retry policy", ["Retry policy", "Backoff"]).location == (
        "ADR 0002: Retry policy › Backoff"
    )
    # ... but an H1 that says something else stays.
    assert hit("Notes", ["Meeting notes", "Actions"]).location == "Notes › Meeting notes › Actions"
    assert hit("Policy: retry", ["Retry policy"]).location == "Policy: retry › Retry policy"


def test_every_hit_carries_its_document_title(kb: KB) -> None:
    result = kb.search("configuration retry", k=6)
    titles = {h.path: h.title for h in result.hits}
    assert titles["services/ledger.md"] == "Ledger service"
    assert all(h.location.startswith(h.title) for h in result.hits)
    assert all("title" in h.model_dump() for h in result.hits)


# -- a query that is a document's name --------------------------------------------------------

NAMED_FILES = {
    "tags.md": "---\naliases: [Labels]\n---\n# Tags\n\nGroup notes by topic with a hash mark.\n",
    "cli.md": (
        "# Command line\n\n## Tags\n\nCommands for tags: list tags, rename tags, count tags.\n\n"
        "## Files\n\nCommands for files.\n"
    ),
    "a/overview.md": "# Overview\n\nOverview of a.\n",
    "b/overview.md": "# Overview\n\nOverview of b.\n",
    "c/overview.md": "# Overview\n\nOverview of c.\n",
    "d/overview.md": "# Overview\n\nOverview of d.\n",
}


def test_a_query_that_is_a_title_or_alias_finds_that_document_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KB.open(make_kb(tmp_path / "kb", NAMED_FILES), embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        for query in ("Tags", "tags!", "labels"):
            result = kb.search(query, k=5, explain=True)
            assert result.hits[0].path == "tags.md", query
            assert result.ranking is not None
            assert result.ranking.stages["names"].startswith("ran: the query is the title")
            scores = [h.score for h in result.hits]
            assert scores == sorted(scores, reverse=True) and scores[0] <= 1.0
        # A name four documents share names none of them; a longer query is no name.
        for query in ("Overview", "which commands list tags"):
            result = kb.search(query, k=5, explain=True)
            assert result.ranking is not None
            assert result.ranking.stages["names"].startswith("skipped"), query
        # Without the stage the page that only mentions the name wins: the test can fail.
        monkeypatch.setattr(
            "pinakes_core.search.retrieval.lift_named", lambda ctx, fused: (fused, "skipped")
        )
        assert kb.search("Tags", k=5).hits[0].path == "cli.md"


# -- copies of a page (older versions beside the current one) ---------------------------------

_SETUP = "Run setup once before all tests with the beforeAll hook in the test file."
_TEARDOWN = "Clean up after every test with the afterEach hook and reset timers mocks state."
VERSIONED_FILES = {
    "docs/hooks.md": f"# Hooks\n\n## Setup\n\n{_SETUP}\n\n## Teardown\n\n{_TEARDOWN}\n",
    "versioned/v1/hooks.md": f"# Hooks\n\n## Setup\n\n{_SETUP}\n\n## Teardown\n\n{_TEARDOWN}\n",
    "docs/other.md": "# Other\n\nSetup of the database before tests.\n",
}


@contextlib.contextmanager
def _synced_chunks(
    tmp_path: Path, files: dict[str, str]
) -> Iterator[tuple[sqlite3.Connection, dict[tuple[str, int], int]]]:
    """A synced KB's connection and its chunk ids by (path, ordinal), for ranking by hand."""
    with KB.open(make_kb(tmp_path / "kb", files), embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        conn = kb.store().conn
        rows = conn.execute(
            "SELECT d.path, c.ordinal, c.chunk_id FROM chunks c JOIN documents d USING (doc_id)"
        )
        yield conn, {(r[0], r[1]): r[2] for r in rows}


def test_a_copy_of_a_listed_page_is_shown_under_that_page(tmp_path: Path) -> None:
    from pinakes_core.search.hits import build_hits

    with _synced_chunks(tmp_path, VERSIONED_FILES) as (conn, chunk):
        docs, old = "docs/hooks.md", "versioned/v1/hooks.md"
        assert (docs, 1) in chunk and (old, 1) in chunk  # setup and teardown are two passages
        # The old version's teardown scored above the current one's (a word closer to a query).
        ranked = [
            (chunk[docs, 0], 0.9),
            (chunk[old, 1], 0.8),
            (chunk[docs, 1], 0.7),
            (chunk[old, 0], 0.6),
            (chunk["docs/other.md", 0], 0.5),
        ]
        hits = build_hits(conn, ranked, {}, k=5, explain=False)
        assert [(h.path, h.chunk, h.score, h.duplicates) for h in hits] == [
            (docs, 0, 0.9, [old]),
            (docs, 1, 0.8, [old]),  # the passage, shown under the page listed first
            ("docs/other.md", 0, 0.5, None),
        ]
        # One row per document: the old version is a copy of a listed page, not a document.
        documents = build_hits(conn, ranked, {}, k=2, explain=False, group_by="document")
        assert [h.path for h in documents] == [docs, "docs/other.md"]


def test_a_note_sharing_template_text_is_listed_by_its_own_words(tmp_path: Path) -> None:
    from pinakes_core.search.hits import build_hits

    template = "Budget sheet review and plants watering checklist for the morning routine."
    files = {
        "daily/a.md": f"## Template\n\n{template}\n\n## Log\n\nRepotted the fern today.\n",
        "daily/b.md": f"## Template\n\n{template}\n\n## Log\n\nPaid the budget sheet bills.\n",
        "x.md": "# X\n\nUnrelated words.\n",
        "y.md": "# Y\n\nOther unrelated words.\n",
    }
    with _synced_chunks(tmp_path, files) as (conn, chunk):
        a, b = "daily/a.md", "daily/b.md"
        assert (a, 1) in chunk and (b, 1) in chunk
        ranked = [
            (chunk[a, 0], 0.9),
            (chunk[b, 0], 0.85),  # the template text a lists already
            (chunk[b, 1], 0.5),
            (chunk[a, 1], 0.4),
            (chunk["x.md", 0], 0.3),
            (chunk["y.md", 0], 0.2),
        ]
        hits = build_hits(conn, ranked, {}, k=3, explain=False, group_by="document")
        assert [(h.path, h.chunk, h.score) for h in hits] == [
            (a, 0, 0.9),
            (b, 1, 0.5),
            ("x.md", 0, 0.3),
        ]
        assert hits[0].duplicates == [b]


SECTION_FILES = {
    "config.md": (
        "# Build Options\n\n## build.assetsInlineLimit\n\nAssets under this size are inlined as "
        "base64 URLs.\n\n## build.outDir\n\nThe output directory.\n"
    ),
    "blog.md": (
        "# Release 5.1\n\n## build.assetsInlineLimit now takes a callback\n\n"
        "`build.assetsInlineLimit` may be a callback: build.assetsInlineLimit(file).\n"
    ),
    **{f"ref/{n}.md": f"# Reference {n}\n\n## Examples\n\nAn example of {n}.\n" for n in "abcd"},
}


def test_a_query_that_is_a_heading_finds_that_section_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KB.open(make_kb(tmp_path / "kb", SECTION_FILES), embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        result = kb.search("build.assetsInlineLimit", k=5, explain=True, group_by="chunk")
        assert result.hits[0].path == "config.md"
        assert result.hits[0].heading_path[-1] == "build.assetsInlineLimit"
        assert result.ranking is not None
        assert (
            result.ranking.stages["names"]
            == "ran: the query is the heading of a section in 1 document(s)"
        )
        # A heading four documents share names no section.
        result = kb.search("Examples", k=5, explain=True)
        assert result.ranking is not None
        assert result.ranking.stages["names"].startswith("skipped"), result.ranking.stages
        # Without the section lift the release note that only mentions it wins: the test can fail.
        monkeypatch.setattr("pinakes_core.search.retrieval._named_sections", lambda *args: {})
        assert kb.search("build.assetsInlineLimit", k=5).hits[0].path == "blog.md"
