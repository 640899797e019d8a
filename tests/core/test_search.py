"""Retrieval: query safety, filters inside channels, RRF, FTS query building (DESIGN §5, §13)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, doc_ids, make_kb, set_config
from pinakes_core import KB, IndexMissingError, PluginMissingError
from pinakes_core.index.query import (
    build_fts_query,
    fts_phrases,
    query_terms,
    split_cjk,
    symbol_words,
    words,
)
from pinakes_core.search.fusion import query_shape, rrf

NASTY_QUERIES = [
    '"',
    '"""',
    'leader "election',
    "NEAR(",
    "NEAR(leader election, 2)",
    "leader NEAR(",
    "*",
    "lead*",
    "-",
    "-leader",
    "^",
    "^leader",
    "leader AND OR NOT",
    "AND",
    "title:leader",
    "text : raft",
    "{title text}: raft",
    "(leader",
    "leader)",
    "🦀🦀 raft 🦀",
    "🦀",
    "x" * 10_000,
    "leader " * 2_000,
    "",
    "   ",
    "\n\t",
    "the of and a is",
    "what is the",
    "\x00",
    "E-4012",
    "ledger.retry.max_attempts",
    "naïve café Ωmega",
    "'; DROP TABLE chunks; --",
    "\\",
    "%_",
]


@pytest.fixture
def synced(kb: KB) -> KB:
    kb.sync()
    return kb


@pytest.mark.parametrize("query", NASTY_QUERIES, ids=range(len(NASTY_QUERIES)))
@pytest.mark.parametrize("channels", [None, ["bm25"], ["dense"]])
def test_any_query_returns_hits_or_an_empty_list(synced: KB, query: str, channels) -> None:
    result = synced.search(query, channels=channels)
    assert isinstance(result.hits, list)
    assert len(result.hits) <= synced.config.retrieval.k
    assert result.query == query


def test_queries_with_syntax_still_find_their_words(synced: KB) -> None:
    for query in ('leader "election', "NEAR(election", "^election*", "-election"):
        hits = synced.search(query, channels=["bm25"]).hits
        assert hits and hits[0].path == "raft.md", query
    assert synced.search("E-4012", channels=["bm25"]).hits[0].path == "runbooks/deploy.md"


def test_questions_are_not_anded(synced: KB) -> None:
    # "zebra" is nowhere; the chunk with the other words must still be found.
    hits = synced.search("how do proposers acceptors zebra work", channels=["bm25"]).hits
    assert hits and hits[0].path == "notes/paxos.md"


def test_explain_and_ranks(synced: KB) -> None:
    result = synced.search("leader election", explain=True)
    top = result.hits[0]
    assert set(top.ranks) == {"bm25", "dense"}
    assert top.channel_scores is not None and set(top.channel_scores) <= {"bm25", "dense"}
    assert all(h.channel_scores is None for h in synced.search("leader").hits)
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_unknown_channel_is_a_plugin_missing_error(
    synced: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinakes_core.search import registry

    monkeypatch.setitem(registry._PROVIDERS, "fancy", "pinakes-fancy")
    with pytest.raises(PluginMissingError) as info:
        synced.search("x", channels=["fancy"])
    assert "uv pip install pinakes-fancy" in str(info.value)
    with pytest.raises(PluginMissingError, match="Known channels"):
        synced.search("x", channels=["no-such-channel"])


def test_search_syncs_a_never_synced_kb(kb: KB) -> None:
    assert not kb.synced
    assert kb.search("paxos").hits[0].path == "notes/paxos.md"
    assert kb.synced


def test_resolve_accepts_ulid_uri_and_path(synced: KB) -> None:
    doc_id = doc_ids(synced.root)["notes/paxos.md"]
    view = synced.read("notes/paxos.md")
    assert view.doc_id == doc_id
    assert view.uri == f"pnk://{synced.config.kb.id}/{doc_id}"
    for ref in (
        doc_id,
        doc_id.lower(),
        view.uri,
        f"pnk://{doc_id}",
        "./notes/paxos.md",
        str(synced.root / "notes" / "paxos.md"),
    ):
        assert synced.resolve(ref) == doc_id, ref


# -- filters inside channels ------------------------------------------------------------------


@pytest.fixture
def crowded(tmp_path: Path) -> KB:
    """Twenty documents about leader election, and one low-ranked one in archive/."""
    files: dict[str, str | bytes] = {
        f"hot/doc{i:02}.md": f"# Leader election {i}\n\nLeader election leader election leader "
        f"election with terms and votes, note {i}.\n"
        for i in range(20)
    }
    files["archive/old.md"] = (
        "# Old minutes\n\nWe discussed budgets, parking, lunch menus, the printer, and once, "
        "briefly, a leader.\n"
    )
    root = make_kb(tmp_path / "kb", files)
    set_config(root, "retrieval", "candidates = 5\nk = 5")
    old = 946_684_800  # 2000-01-01
    for i in range(20):
        os.utime(root / f"hot/doc{i:02}.md", (old, old))
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    yield kb
    kb.close()


@pytest.mark.parametrize("channels", [None, ["bm25"], ["dense"]])
def test_narrow_filters_never_starve_a_channel(crowded: KB, channels) -> None:
    unfiltered = [h.path for h in crowded.search("leader election", channels=channels).hits]
    assert "archive/old.md" not in unfiltered  # it ranks low globally

    old_id = doc_ids(crowded.root)["archive/old.md"]
    for kwargs in (
        {"path": "archive/"},
        {"path": "./archive"},
        {"doc_ids": [old_id]},
        {"modified_after": 1_500_000_000.0},
    ):
        hits = crowded.search("leader election", channels=channels, **kwargs).hits
        assert [h.path for h in hits] == ["archive/old.md"], kwargs


def test_tag_filter_inside_channels(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"d{i}.md": f"# Leader election\n\nleader election leader election {i}\n" for i in range(15)
    }
    files["tagged.md"] = "---\ntags: [rare]\n---\nmostly about cheese, a leader once\n"
    root = make_kb(tmp_path / "kb", files)
    set_config(root, "retrieval", "candidates = 3\nk = 3")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        for channels in (None, ["bm25"], ["dense"]):
            hits = kb.search("leader election", tags=["#RARE"], channels=channels).hits
            assert [h.path for h in hits] == ["tagged.md"]


def test_modified_before_and_path_combine(crowded: KB) -> None:
    hits = crowded.search("leader", path="hot/", modified_before=1_000_000_000.0, k=50).hits
    assert hits and all(h.path.startswith("hot/") for h in hits)
    assert crowded.search("leader", path="archive/", modified_before=1_000_000_000.0).hits == []


def test_path_filter_matching_nothing_is_empty(crowded: KB) -> None:
    assert crowded.search("leader", path="nowhere/").hits == []


# -- RRF ------------------------------------------------------------------------------------


def test_rrf_scores() -> None:
    fused = dict(rrf({"a": [1, 2], "b": [2, 3]}, k=60))
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[3] == pytest.approx(1 / 62)
    assert rrf({}) == []
    assert [i for i, _ in rrf({"a": [5, 4], "b": [4, 5]})] == [4, 5]  # tie: smaller id first


@settings(max_examples=200, deadline=None)
@given(
    lists=st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.lists(st.integers(0, 40), max_size=15, unique=True),
        max_size=5,
    ),
    k=st.integers(1, 100),
    data=st.data(),
)
def test_rrf_is_invariant_under_reordering_of_the_lists(lists, k, data) -> None:
    order = data.draw(st.permutations(list(lists)))
    reordered = {name: lists[name] for name in order}
    a, b = rrf(lists, k=k), rrf(reordered, k=k)
    assert dict(a) == pytest.approx(dict(b), rel=1e-12)
    # The same ranking (exact ties are broken by id, see the tie test below).
    canon = lambda fused: sorted(fused, key=lambda kv: (-round(kv[1], 9), kv[0]))  # noqa: E731
    assert [i for i, _ in canon(a)] == [i for i, _ in canon(b)]
    assert [s for _, s in a] == sorted((s for _, s in a), reverse=True)
    assert {i for i, _ in a} == {i for ranked in lists.values() for i in ranked}


def _tied_lists() -> dict[str, list[int]]:
    """Chunk 1 ranks (1, 2, 7) and chunk 2 ranks (2, 7, 1) in three channels: an exact tie."""
    out = {}
    for n, (name, r1, r2) in enumerate((("bm25", 1, 2), ("dense", 2, 7), ("graph", 7, 1))):
        ranked = list(range(100 * (n + 1), 100 * (n + 1) + 7))
        ranked[r1 - 1], ranked[r2 - 1] = 1, 2
        out[name] = ranked
    return out


def test_rrf_exact_tie_is_broken_by_id_whatever_the_list_order() -> None:
    lists = _tied_lists()
    rankings = set()
    for order in itertools.permutations(lists):
        fused = rrf({name: lists[name] for name in order})
        rankings.add(tuple(i for i, _ in fused if i in (1, 2)))
    assert rankings == {(1, 2)}


# -- FTS query building -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(title, heading, text, "
        "tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [
            ("Raft", "Safety", "leader election near votes"),
            ("Café", "naïve", "E-4012 ledger.retry"),
        ],
    )
    return conn


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_build_fts_query_never_makes_match_raise(fts: sqlite3.Connection, text: str) -> None:
    query = build_fts_query(text)
    if query is None:
        assert not re.search(r"\w", text)
        return
    fts.execute("SELECT rowid, bm25(t) FROM t WHERE t MATCH ?", (query,)).fetchall()


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    text=st.lists(
        st.sampled_from(
            [
                '"',
                "NEAR(",
                "*",
                "-",
                "^",
                ":",
                "(",
                ")",
                "AND",
                "OR",
                "NOT",
                "+",
                "title:",
                "{",
                "}",
                "leader",
                "E-4012",
                "🦀",
                "\u0301",
                "ﬁ",
                "ǅ",
            ]
        ),
        max_size=20,
    ).map(" ".join)
)
def test_build_fts_query_on_fts_syntax_soup(fts: sqlite3.Connection, text: str) -> None:
    query = build_fts_query(text)
    if query is not None:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,)).fetchall()


def test_build_fts_query_shape() -> None:
    assert build_fts_query("") is None
    assert build_fts_query("*** --- ^^^") is None
    query = build_fts_query("What is error E-4012?")
    assert query is not None
    assert '"e 4012"' in query
    assert '"error"' in query and '"what"' not in query
    assert query_terms("the of and") == ["the", "of", "and"]  # only stopwords: keep them
    assert len(build_fts_query(" ".join(f"w{i}" for i in range(500))).split(" OR ")) <= 32


def test_build_fts_query_finds_identifiers(fts: sqlite3.Connection) -> None:
    rows = fts.execute(
        "SELECT rowid FROM t WHERE t MATCH ?", (build_fts_query("E-4012"),)
    ).fetchall()
    assert rows == [(2,)]
    rows = fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (build_fts_query("cafe"),)).fetchall()
    assert rows == [(2,)]  # diacritics folded


def test_symbol_words_name_operators_that_stand_alone() -> None:
    assert symbol_words("how do I use =~ here?") == ["zzsym3d7e"]
    assert symbol_words("| `!~` | `a && b` |") == ["zzsym217e", "zzsym2626"]
    # Attached to a word, an operator is part of that word's spelling, not one of its own.
    assert symbol_words("C++ and foo->bar, (x)") == []
    # Markdown's structure: heading and quote markers, rules, table separators, fences.
    assert symbol_words("## Title\n>> quoted\n---\n|:-:|--:|\n~~~\n***\n^^^") == []
    assert symbol_words("=== ... ** //") == ["zzsym3d3d3d", "zzsym2e2e2e", "zzsym2a2a", "zzsym2f2f"]
    # Punctuation stuck to an operator: read with and without it, on both sides.
    assert "zzsym3d7e" in symbol_words("what is =~?") and "zzsym2626" in symbol_words("(&&).")
    # A marker alone is what the user typed; brackets and separators alone are punctuation.
    assert symbol_words(">>") == ["zzsym3e3e"] and symbol_words("> ## Note\n- ## x") == []
    assert symbol_words("f(a), g(b). <!-- c --> $$ %% | -: | :- |") == []
    # Operators take at most eight of a query's phrase slots: its words keep theirs.
    many = " ".join(["==", "!=", "<=", ">=", "&&", "||", "+=", "-=", "*=", "/=", "=~"])
    assert fts_phrases(many + " ledger retry")[-2:] == ['"ledger"', '"retry"']
    # The query side spells it as the index does, and a query of operators alone has a phrase.
    assert fts_phrases("what does the ++= operator do?")[:2] == ['"zzsym2b2b3d"', '"operator"']
    assert build_fts_query("=~") == '"zzsym3d7e"'


def test_an_operator_finds_the_page_that_uses_it(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb",
        {
            "operators.md": "# Operators\n\n| `=~` | regex match |\n| `!~` | no match |\n",
            "strings.md": "# Strings\n\nA regex match on strings, and C++ or a->b in prose.\n",
        },
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        for channels in (["bm25"], None):
            hits = kb.search("=~", channels=channels).hits
            assert [h.path for h in hits][:1] == ["operators.md"]
        assert kb.search("!~ regex", channels=["bm25"]).hits[0].path == "operators.md"
        assert kb.search("what is =~?", channels=["bm25"]).hits[0].path == "operators.md"
        assert kb.search("->", channels=["bm25"]).hits == []  # attached: no operator indexed
    assert query_shape("=~").exact_share == 1.0  # only BM25 can match it: it leans lexical


def test_split_cjk_writes_runs_as_overlapping_bigrams() -> None:
    assert split_cjk("用Python写项目计划。好") == " 用 Python 写项 项目 目计 计划 。 好 "
    assert words("東京タワー 서울에서") == ["東京", "京タ", "タワ", "ワー", "서울", "울에", "에서"]
    plain = "no CJK here, E-4012"
    assert split_cjk(plain) is plain
    assert query_terms("项目计划") == ["项目", "目计", "计划"]
    assert words("人々・タワー") == ["人々", "タワ", "ワー"]  # 々 is a character, ・ punctuation


def test_a_long_cjk_question_keeps_its_end() -> None:
    # 32 phrases used to end a Chinese question after ~33 characters, dropping its topic.
    question = "请问在这个项目里面我们应该怎样配置持续集成的流水线以及自动部署到生产环境的服务器呢关于缓存失效"
    phrases = fts_phrases(question)
    assert '"缓存"' in phrases and '"失效"' in phrases and len(phrases) <= 64
    assert len(fts_phrases(" ".join(f"w{i}" for i in range(500)) + " " + question)) <= 32 + 64


@given(st.text(alphabet="项目计划我们的東京タワー서울 aZ1.", max_size=40))
def test_split_cjk_twice_gives_the_words_of_once(text: str) -> None:
    assert words(split_cjk(text)) == words(text)


def test_cjk_words_are_found_inside_longer_runs(tmp_path: Path) -> None:
    # Unsplit, FTS5 indexed "我们的项目计划很好" as one token: no shorter query ever matched it.
    files = {
        "plan.md": "# 计划\n\n我们的项目计划很好，下周开始实施。\n",
        "tower.md": "# 观光\n\n東京タワーの高さは333メートルです。\n",
        "cat.md": "# 宠物\n\n我的猫很可爱，人々も猫が好きです。\n",
        "other.md": "# Notes\n\nNothing in other scripts here.\n",
    }
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert [h.path for h in kb.search("项目计划", channels=["bm25"]).hits] == ["plan.md"]
        assert [h.path for h in kb.search("下周开始", channels=["bm25"]).hits] == ["plan.md"]
        assert [h.path for h in kb.search("タワーの高さ", channels=["bm25"]).hits] == ["tower.md"]
        assert [h.path for h in kb.search("计划", channels=["bm25"]).hits] == ["plan.md"]
        assert [h.path for h in kb.search("人々", channels=["bm25"]).hits] == ["cat.md"]
        # A lone character between other words is left out; alone it matches where it stands
        # alone, not inside longer runs (bigrams only: see query_terms).
        assert query_terms("用Symbol值") == ["symbol"]
        assert query_terms("새 집 구하기") == ["새", "집", "구하", "하기"]  # Korean words stay
        assert [h.path for h in kb.search("猫", channels=["bm25"]).hits] == []
        shown = kb.search("项目计划", channels=["bm25"]).hits[0].text
        assert "我们的项目计划很好" in shown  # the text as written, not its bigrams


# -- sync idempotence as a property -----------------------------------------------------------

_body = st.lists(
    st.one_of(
        st.text(alphabet="abcdefgh ", min_size=1, max_size=40).map(lambda s: s.strip() or "x"),
        st.just("# Heading"),
        st.just("## Sub"),
        st.just(""),
        st.just("```\n# code\n```"),
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.dictionaries(
        st.sampled_from(["a.md", "b.txt", "d/c.md", "d/e/f.markdown"]), _body, max_size=4
    )
)
def test_sync_twice_changes_nothing(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = make_kb(Path(tmp) / "kb", dict(files))
        fake = FakeHashEmbedder()
        with KB.open(root, embedder=fake) as kb:
            first = kb.sync()
            assert sorted(first.added) == sorted(files)
            fake.reset()
            second = kb.sync()
        assert (second.added, second.changed, second.removed, second.renamed) == ([], [], [], [])
        assert second.chunks_embedded == 0 and fake.chunk_texts == []
        assert second.unchanged == len(files)


def test_vectors_of_another_model_are_a_clear_error_not_a_crash(kb: KB) -> None:
    kb.sync()  # with the fake model (32 dims)
    other = FakeHashEmbedder(model_id="fake-hash-v2", dim=16)
    with KB.open(kb.root, embedder=other) as changed:
        with pytest.raises(IndexMissingError) as info:
            changed.search("leader")
        assert "32-dimension" in str(info.value) and "pnk sync" in str(info.value)
        changed.sync()  # re-embeds with the new model
        assert changed.search("leader election").hits


def test_the_query_is_embedded_beside_bm25_and_only_when_a_dense_channel_runs(
    synced: KB, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = synced.embedder
    threads: list[str] = []
    plain = embedder.embed_query

    def recording(text: str):  # type: ignore[no-untyped-def]
        threads.append(threading.current_thread().name)
        return plain(text)

    monkeypatch.setattr(embedder, "embed_query", recording)
    hybrid = synced.search("leader election", channels=["bm25", "dense"], explain=True)
    assert threads and threads[0].startswith("pinakes-dense")
    # Embedded in the calling thread instead, the query ranks the same.
    monkeypatch.setattr("pinakes_core.search.context.QueryContext.start_dense", lambda self: None)
    again = synced.search("leader election", channels=["bm25", "dense"], explain=True)
    assert threads[-1] == threading.current_thread().name
    assert [(h.path, h.score) for h in again.hits] == [(h.path, h.score) for h in hybrid.hits]
    threads.clear()
    synced.search("leader election", channels=["bm25"])
    assert threads == []


def test_work_put_on_the_dense_worker_runs_there_after_the_dense_work(synced: KB) -> None:
    from pinakes_core.search.fusion import query_shape

    ctx = synced.query_context("who leads the election that the raft log depends on")
    assert ctx.on_worker(lambda: 1) is None  # no dense work started: the caller computes
    assert ctx.shape == query_shape(ctx.query)
    ctx.start_dense()
    job = ctx.on_worker(lambda: (threading.current_thread().name, ctx.query_vector))
    assert job is not None
    thread, vector = job.result(timeout=60)
    assert thread.startswith("pinakes-dense")
    assert vector is ctx.query_vector  # the dense job ran first: its vector is the query's


def test_worker_work_left_by_one_search_cannot_block_the_next(synced: KB) -> None:
    # A search may leave work on the worker that reads its own context's cached values (a
    # graph channel's seed vector the gate then did not use). The next search's main thread
    # reads the same property of its own context while that work waits its turn: the two
    # must not share a lock (Python 3.11's functools.cached_property has one per property).
    first = synced.query_context("how does raft elect a leader")
    first.start_dense()
    release = threading.Event()
    first.on_worker(release.wait)  # holds the worker until the next search is waiting
    left = first.on_worker(lambda: first.dense_scores)
    second = synced.query_context("leader election timeouts")
    second.start_dense()
    done = threading.Event()

    def read_second() -> None:
        assert second.dense_scores.size > 0
        done.set()

    reader = threading.Thread(target=read_second, daemon=True)
    reader.start()
    time.sleep(0.2)  # the reader now waits on its dense job, queued behind ``left``
    release.set()
    assert done.wait(timeout=60), "the next search waited forever on the worker"
    assert left is not None and left.result(timeout=60).size > 0


def test_only_short_phrases_are_kept_between_queries(synced: KB) -> None:
    # A query word may be 100,000 characters; kept for every query, 50,000 of them would hold
    # gigabytes in a long-lived server.
    huge = '"' + "a" * 5000 + '"'
    ctx = synced.query_context("x")
    assert ctx.doc_freq(huge) == 0 and ctx.doc_freq('"leader"') > 0
    shared = synced.query_context("y")._doc_freq
    assert '"leader"' in shared and huge not in shared
    assert ctx.doc_freq(huge) == 0  # still counted once within its own query


def test_phrase_counts_are_kept_between_queries_until_a_sync_changes_the_kb(synced: KB) -> None:
    first = synced.query_context("leader election")
    before = first.doc_freq('"leader"')
    second = synced.query_context("who is the leader")
    assert second._doc_freq is first._doc_freq  # counted once for both queries
    # A count kept from before a sync would give BM25 a stale IDF: the next query recounts.
    (synced.root / "leaders.md").write_text("# Leaders\n\nA leader leads.\n", encoding="utf-8")
    synced.sync()
    after = synced.query_context("leader election")
    assert after._doc_freq is not first._doc_freq
    assert after.doc_freq('"leader"') == before + 1
    fresh = KB.open(synced.root, embedder=synced.embedder)
    try:
        plain = [(h.path, h.chunk, h.score) for h in fresh.search("the leader election").hits]
    finally:
        fresh.close()
    assert [(h.path, h.chunk, h.score) for h in synced.search("the leader election").hits] == plain


def test_a_forked_child_embeds_queries_with_its_own_worker(synced: KB) -> None:
    synced.search("leader election", channels=["bm25", "dense"])  # the parent's worker exists

    def child() -> None:
        hits = synced.search("leader election", channels=["bm25", "dense"]).hits
        os._exit(0 if hits else 3)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(timeout=60)
    if process.is_alive():  # it waits for a worker thread that does not exist in a child
        process.kill()
        process.join()
    assert process.exitcode == 0
