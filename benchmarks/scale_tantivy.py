"""tantivy as a top-k BM25 engine at a million chunks, against FTS5 (issue 14).

Uses the KB that ``benchmarks/scale_lexical.py`` builds (nushell-docs chunked for real and
cloned to ``--chunks`` chunks, FAKE vectors), copies its FTS rows (title, heading, text,
identifier parts; the chunk id as a fast field) into a tantivy index beside it, and measures:

- build: seconds, peak RSS of the building process, index size on disk, segments;
- the BM25 channel's query for :data:`scale.QUERIES`: the same FTS phrases
  (:func:`pinakes_core.index.query.fts_phrases`), tokenized like FTS5's ``porter unicode61
  remove_diacritics 2`` (simple tokenizer, lower case, ASCII folding, English stemmer), each
  phrase a term (or phrase) query on one field holding the columns (title twice), OR-ed; the
  top 200 (``candidates`` × ``EVIDENCE_POOL``) with their chunk ids; warm p50/p95 and the RSS
  of the querying process;
- FTS5 in the same process and window, alternating query by query: the channel as shipped
  (``bm25_max_rows`` 20,000) and exact (0);
- overlap of tantivy's top 10 / top 50 / 200-row pool with FTS5's exact ranking (the column
  weights are approximated, the stemmer is Porter2 instead of Porter, and the IDF is Lucene's
  ln(1 + (N - n + 0.5) / (n + 0.5)) instead of FTS5's ln((N - n + 0.5) / (n + 0.5)), so the
  rankings differ);
- filters by over-fetching: tantivy's top ``n`` for several ``n``, then the rows passing a path
  filter through the store.

- with ``--hybrid``: warm ``KB.search(channels=["bm25", "dense"])`` on the KB with its own index
  (``bm25_index_min_chunks`` set in its ``pinakes.toml``, built by ``KB.sync``), alternating
  query by query with FTS5, the dense channel's ANN index stood in for by one that waits
  ``--ann-stub-ms`` (the vectors are FAKE); then the index's incremental update for 10 changed
  documents and a no-change sync.

    uv run python benchmarks/scale_tantivy.py --chunks 1000000 --workdir /tmp/pinakes-lexical
    uv run python benchmarks/scale_tantivy.py --chunks 1000000 --workdir /tmp/pinakes-lexical \
        --hybrid --skip-channel
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

import scale  # noqa: E402  (a sibling benchmark script)
import scale_lexical  # noqa: E402
from pinakes_core import KB  # noqa: E402
from pinakes_core.config import ScaleConfig  # noqa: E402
from pinakes_core.index.lexical import analyzer as make_analyzer  # noqa: E402
from pinakes_core.index.query import fts_phrases  # noqa: E402

#: One text field holding the FTS columns as separate values, the title twice: FTS5's
#: ``bm25()`` sums the column-weighted frequencies (title 2, heading 1.5, text 1, identifier
#: parts 1) into one BM25 per phrase over the row's whole length, which one field with the
#: title repeated approximates; per-field BM25 summed over boosted fields (tantivy's usual
#: multi-field query) kept only 46 % of FTS5's top 10 on nushell-docs, this 94 % (see
#: docs/scaling.md).
FIELD = "all"
POOL = 200
TOKENIZER = "pnk"


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_unsigned_field("chunk_id", stored=False, indexed=True, fast=True)
    builder.add_text_field(FIELD, tokenizer_name=TOKENIZER, index_option="position")
    return builder.build()


def _open(path: Path) -> Any:
    import tantivy

    index = tantivy.Index(_schema(), path=str(path), reuse=True)
    index.register_tokenizer(TOKENIZER, make_analyzer())
    return index


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def build_worker(db: Path, out: Path, threads: int, heap_mb: int) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    index = _open(out)
    import tantivy

    start = time.perf_counter()
    writer = index.writer(heap_size=heap_mb * 1_000_000, num_threads=threads)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = 0
    for rowid, title, heading, text, idents in conn.execute(
        "SELECT rowid, title, heading, text, idents FROM chunks_fts"
    ):
        doc = tantivy.Document()
        doc.add_unsigned("chunk_id", rowid)
        for value in (title, title, heading, text, idents):
            if value:
                doc.add_text(FIELD, value)
        writer.add_document(doc)
        rows += 1
    added = time.perf_counter() - start
    writer.commit()
    committed = time.perf_counter() - start
    writer.wait_merging_threads()
    merged = time.perf_counter() - start
    index.reload()
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    print(
        json.dumps(
            {
                "rows": rows,
                "added_s": round(added, 1),
                "committed_s": round(committed, 1),
                "merged_s": round(merged, 1),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
                "index_mb": round(size / 1e6),
                "segments": index.searcher().num_segments,
                "threads": threads,
                "heap_mb": heap_mb,
            }
        )
    )


def tantivy_query(index: Any, analyzer: Any, text: str) -> Any:
    """The BM25 channel's OR of FTS phrases as a tantivy query (None without words)."""
    import tantivy

    schema = index.schema
    clauses = []
    for phrase in fts_phrases(text):
        words = analyzer.analyze(phrase.strip('"'))
        if not words:
            continue
        if len(words) == 1:
            q = tantivy.Query.term_query(schema, FIELD, words[0])
        else:
            q = tantivy.Query.phrase_query(schema, FIELD, words)
        clauses.append((tantivy.Occur.Should, q))
    return tantivy.Query.boolean_query(clauses) if clauses else None


def top(index: Any, searcher: Any, analyzer: Any, text: str, n: int) -> list[tuple[int, float]]:
    query = tantivy_query(index, analyzer, text)
    if query is None:
        return []
    hits = searcher.search(query, n, count=False).hits
    ids = searcher.fast_field_values("chunk_id", [addr for _, addr in hits])
    return [(int(c), float(s)) for (s, _), c in zip(hits, ids, strict=True)]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def query_worker(root: Path, path: Path, rounds: int) -> None:
    import tantivy

    rss0 = _rss_mb()
    index = _open(path)
    searcher = index.searcher()
    analyzer = make_analyzer()
    rss_open = _rss_mb()
    kb = KB.open(root, embedder=scale_lexical._embedder())
    queries = scale.QUERIES

    def fts(budget: int, query: str) -> tuple[float, list[int]]:
        return scale_lexical.bm25_pool(kb, budget, query)

    def tv(query: str, n: int = POOL) -> tuple[float, list[int]]:
        start = time.perf_counter()
        got = top(index, searcher, analyzer, query, n)
        return (time.perf_counter() - start) * 1000, [c for c, _ in got]

    for q in queries:  # warm both (and FTS5's word counts)
        fts(20000, q)
        tv(q)
    times: dict[str, list[float]] = {"tantivy": [], "fts5_20000": [], "fts5_exact": []}
    exact: dict[str, list[int]] = {}
    shipped: dict[str, list[int]] = {}
    mine: dict[str, list[int]] = {}
    for _ in range(rounds):
        for q in queries:
            ms, mine[q] = tv(q)
            times["tantivy"].append(ms)
            ms, shipped[q] = fts(20000, q)
            times["fts5_20000"].append(ms)
            ms, exact[q] = fts(0, q)
            times["fts5_exact"].append(ms)
    rss_after = _rss_mb()

    # Up to ties: the share of tantivy's top k whose exact FTS5 score reaches FTS5's k-th best
    # (the clone KB holds each text ~153 times, so a top 10 is 10 of many tied copies).
    scores: dict[str, dict[int, float]] = {}
    for q in queries:
        kb.config = kb.config.model_copy(update={"scale": ScaleConfig(bm25_max_rows=0)})
        ctx = kb.query_context(q)
        ctx.bm25(q)
        scores[q] = dict(ctx.lexical_ranker.pool[q][0])

    def tied(k: int) -> float:
        shares = []
        for q in queries:
            ranked = sorted(scores[q].values(), reverse=True)
            kth = ranked[min(k, len(ranked)) - 1]
            got = mine[q][:k]
            shares.append(sum(scores[q].get(c, -1.0) >= kth - 1e-9 for c in got) / max(1, len(got)))
        return round(statistics.mean(shares), 3)

    def overlap(a: dict[str, list[int]], b: dict[str, list[int]], k: int) -> float:
        return round(
            statistics.mean(
                len(set(a[q][:k]) & set(b[q][:k])) / max(1, len(b[q][:k])) for q in queries
            ),
            3,
        )

    # Filters, two ways, against FTS5's channel with the same filter: a narrow path prefix
    # (one copy of the clone KB, 1/153 of the rows) and a broad one ("copy1": 64 copies).
    from pinakes_core.index.bm25 import allowed_chunks_sql
    from pinakes_core.search.context import Filters

    filters: dict[str, object] = {}
    db = root / ".pinakes" / "index.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    for prefix in ("copy0/", "copy1"):
        where = "substr(d.path, 1, ?) = ?"
        timing: dict[str, list[float]] = {
            "ids_sql": [],
            "term_set": [],
            "over_fetch_2000": [],
            "fts5_20000": [],
        }
        kept_over, agree = [], []
        for q in queries:
            # (a) the allowed chunk ids from the store, as a tantivy term set that must match
            start = time.perf_counter()
            allowed = [
                r[0]
                for r in conn.execute(
                    allowed_chunks_sql(where),
                    (len(prefix), prefix),
                )
            ]
            mid = time.perf_counter()
            query = tantivy_query(index, analyzer, q)
            must = tantivy.Query.const_score_query(
                tantivy.Query.term_set_query(index.schema, "chunk_id", allowed), 0.0
            )
            hits = searcher.search(
                tantivy.Query.boolean_query(
                    [(tantivy.Occur.Must, query), (tantivy.Occur.Must, must)]
                ),
                POOL,
                count=False,
            ).hits
            setq = [int(c) for c in searcher.fast_field_values("chunk_id", [a for _, a in hits])]
            end = time.perf_counter()
            timing["ids_sql"].append((mid - start) * 1000)
            timing["term_set"].append((end - mid) * 1000)
            # (b) tantivy's top 2000, then the rows passing the filter through the store
            start = time.perf_counter()
            ids = [c for c, _ in top(index, searcher, analyzer, q, 2000)]
            passing: set[int] = set()
            for i in range(0, len(ids), 900):
                part = ids[i : i + 900]
                passing.update(
                    r[0]
                    for r in conn.execute(
                        f"SELECT c.chunk_id FROM chunks c JOIN documents d USING (doc_id) "
                        f"WHERE c.chunk_id IN ({','.join('?' * len(part))}) AND {where}",
                        [*part, len(prefix), prefix],
                    )
                )
            over = [c for c in ids if c in passing][:POOL]
            timing["over_fetch_2000"].append((time.perf_counter() - start) * 1000)
            kept_over.append(len(over))
            agree.append(len(set(over[:50]) & set(setq[:50])) / max(1, len(setq[:50])))
            # FTS5's channel with the same filter
            kb.config = kb.config.model_copy(update={"scale": ScaleConfig(bm25_max_rows=20000)})
            ctx = kb.query_context(q, filters=Filters(path=prefix))
            start = time.perf_counter()
            ctx.bm25(q)
            timing["fts5_20000"].append((time.perf_counter() - start) * 1000)
        filters[prefix] = {
            "allowed_chunks": len(allowed),
            "p50_ms": {k: round(statistics.median(v), 1) for k, v in timing.items()},
            "over_fetch_rows_kept_p50": statistics.median(kept_over),
            "over_fetch_queries_with_50": sum(k >= 50 for k in kept_over),
            "over_fetch_top50_in_term_set_top50": round(statistics.mean(agree), 3),
        }
    conn.close()

    out = {
        "queries": len(queries),
        "rounds": rounds,
        "p50_ms": {k: round(statistics.median(v), 2) for k, v in times.items()},
        "p95_ms": {k: round(_pct(v, 0.95), 2) for k, v in times.items()},
        "tantivy_vs_exact_fts5": {
            "top10": overlap(mine, exact, 10),
            "top50": overlap(mine, exact, 50),
            "pool200": overlap(mine, exact, 200),
            "top10_up_to_ties": tied(10),
            "top50_up_to_ties": tied(50),
        },
        "fts5_20000_vs_exact": {
            "top10": overlap(shipped, exact, 10),
            "top50": overlap(shipped, exact, 50),
        },
        "rss_mb": {
            "start": round(rss0),
            "index_open": round(rss_open),
            "after_queries": round(rss_after),
        },
        "filters": filters,
    }
    print(json.dumps(out))


def hybrid_worker(root: Path, rounds: int, stub_ms: float, threshold: int) -> None:
    """Warm ``KB.search`` at scale with the index (built by sync) and without, alternating."""
    import numpy as np

    from pinakes_core.index import lexical

    config = root / "pinakes.toml"
    text = config.read_text()
    if "bm25_index_min_chunks" not in text:
        config.write_text(
            text.replace("[scale]\n", f"[scale]\nbm25_index_min_chunks = {threshold}\n", 1)
            if "[scale]\n" in text
            else text + f"\n[scale]\nbm25_index_min_chunks = {threshold}\n"
        )
    updates: list[tuple[float, object]] = []
    real = lexical.update_lexical

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = real(*args, **kwargs)
        updates.append((time.perf_counter() - start, result))
        return result

    lexical.update_lexical = timed  # type: ignore[assignment]
    kb = KB.open(root, embedder=scale_lexical._embedder())
    start = time.perf_counter()
    kb.sync()
    first_sync = {
        "seconds": round(time.perf_counter() - start, 1),
        "index_update_s": round(updates[-1][0], 1),
        "update": updates[-1][1],
    }
    index = kb.searcher.lexical()
    assert index is not None, "no tantivy index after sync"

    class _Stub:
        """Stands for the usearch index (FAKE vectors): its measured 2.7 ms, GIL released."""

        def search(self, vector: Any, n: int) -> Any:
            time.sleep(stub_ms / 1000)
            ids = kb.vectors().chunk_ids
            rng = np.random.default_rng(abs(hash(vector.tobytes())) % 2**32)
            return ids[rng.integers(0, ids.size, n)]

    stub = _Stub()
    kb.searcher.ann = lambda: stub  # type: ignore[method-assign]
    real_lexical = kb.searcher.lexical
    variants = {"fts5": lambda: None, "tantivy": real_lexical}
    times: dict[str, list[float]] = {k: [] for k in variants}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in variants}
    for fn in variants.values():  # warm both
        kb.searcher.lexical = fn  # type: ignore[method-assign]
        for q in scale.QUERIES[:3]:
            kb.search(q, channels=["bm25", "dense"])
    for _ in range(rounds):
        for q in scale.QUERIES:
            for name, fn in variants.items():
                kb.searcher.lexical = fn  # type: ignore[method-assign]
                start = time.perf_counter()
                result = kb.search(q, channels=["bm25", "dense"])
                times[name].append((time.perf_counter() - start) * 1000)
                for stage, ms in result.timings_ms.items():
                    stages[name].setdefault(stage, []).append(ms)
    kb.searcher.lexical = real_lexical  # type: ignore[method-assign]
    # An incremental update: 10 documents changed (a word appended), then a no-change sync.
    conn = sqlite3.connect(f"file:{root / '.pinakes' / 'index.db'}?mode=ro", uri=True)
    paths = [r[0] for r in conn.execute("SELECT path FROM documents ORDER BY path LIMIT 10")]
    conn.close()
    for rel in paths:
        with (root / rel).open("a") as handle:
            handle.write("\nzebracrossing\n")
    start = time.perf_counter()
    kb.sync()
    changed_sync = {
        "seconds": round(time.perf_counter() - start, 1),
        "index_update_s": round(updates[-1][0], 2),
        "update": updates[-1][1],
    }
    found = kb.search("zebracrossing", channels=["bm25"]).hits
    start = time.perf_counter()
    kb.sync()
    quiet_sync = {
        "seconds": round(time.perf_counter() - start, 1),
        "index_update_s": round(updates[-1][0], 3),
        "update": updates[-1][1],
    }
    print(
        json.dumps(
            {
                "rounds": rounds,
                "ann_stub_ms": stub_ms,
                "hybrid_p50_ms": {k: round(statistics.median(v), 1) for k, v in times.items()},
                "hybrid_p95_ms": {k: round(_pct(v, 0.95), 1) for k, v in times.items()},
                "stages_p50_ms": {
                    k: {s: round(statistics.median(v), 2) for s, v in st.items()}
                    for k, st in stages.items()
                },
                "first_sync_with_index": first_sync,
                "sync_10_changed": changed_sync,
                "changed_docs_found": len({h.path for h in found}),
                "no_change_sync": quiet_sync,
                "rss_mb": round(_rss_mb()),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora/nushell-docs"))
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pinakes-lexical"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--heap-mb", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the tantivy index")
    parser.add_argument("--build-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--query-worker", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="also time warm hybrid KB.search with the index built by sync (ANN stubbed)",
    )
    parser.add_argument("--ann-stub-ms", type=float, default=2.7)
    parser.add_argument("--index-min-chunks", type=int, default=200_000)
    parser.add_argument("--skip-channel", action="store_true", help="skip the channel comparison")
    parser.add_argument("--hybrid-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_worker:
        build_worker(*args.build_worker, args.threads, args.heap_mb)
        return
    if args.query_worker:
        query_worker(*args.query_worker, args.rounds)
        return
    if args.hybrid_worker:
        hybrid_worker(args.hybrid_worker, args.rounds, args.ann_stub_ms, args.index_min_chunks)
        return
    root = scale_lexical.build(args.workdir, args.corpus.resolve(), args.chunks)
    path = args.workdir / f"tantivy-{args.chunks}"
    out: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_1min_before": round(os.getloadavg()[0], 2),
        "chunks": KB.open(root, embedder=scale_lexical._embedder()).status().chunks,
    }
    me = [sys.executable, __file__, "--threads", str(args.threads), "--heap-mb", str(args.heap_mb)]
    if args.rebuild or not (path / "meta.json").exists():
        done = subprocess.run(
            [*me, "--build-worker", str(root / ".pinakes" / "index.db"), str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        out["build"] = json.loads(done.stdout.strip().splitlines()[-1])
        out["load_1min_after_build"] = round(os.getloadavg()[0], 2)
    if not args.skip_channel:
        done = subprocess.run(
            [*me, "--rounds", str(args.rounds), "--query-worker", str(root), str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        out["search"] = json.loads(done.stdout.strip().splitlines()[-1])
    if args.hybrid:
        hybrid = [*me, "--rounds", str(args.rounds), "--ann-stub-ms", str(args.ann_stub_ms)]
        hybrid += ["--index-min-chunks", str(args.index_min_chunks), "--hybrid-worker", str(root)]
        done = subprocess.run(hybrid, capture_output=True, text=True, check=True)
        out["hybrid"] = json.loads(done.stdout.strip().splitlines()[-1])
    out["load_1min_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
