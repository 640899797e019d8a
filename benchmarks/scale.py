"""Search latency and cost at scale (DESIGN §14, issue 14).

Two modes.

``--copies N`` (the graph at ~50k chunks): the KB is N copies of a corpus in sibling folders,
each synced for real. Copies have the same embedded texts, so vectors are embedded once and
reused by text hash; FTS, chunks, nodes and edges are real and N times larger. Latency is the
warm ``KB.search`` call (median and p95 over the queries, after warm-up), for each channel
configuration on the same KB object.

    uv run python benchmarks/scale.py --corpus ../shared/corpora/nushell-docs --copies 7

``--chunks 50000,1000000`` (the cost curve up to a million chunks): one copy of the corpus is
synced for real (the base); a KB of each size is then made by cloning the base's rows in SQL —
documents, chunks, FTS rows, links — once per extra copy of the files (copied with their
mtimes, so a sync sees them unchanged). Each clone's vectors are the base's plus Gaussian noise
(σ = ``--noise`` per unit vector, renormalised) under their own text hash, so every chunk has a
distinct vector, as in a real KB, and near-duplicates make the approximate index's job harder,
not easier. The graph is not cloned (hybrid only). Per size, in fresh processes: the first sync
(builds the ANN index past ``[scale] ann_min_chunks`` and the vector snapshot), a no-change
sync (library and ``pnk sync``), warm hybrid search with and without the ANN index, recall@10
of the dense channel against exact search, and resident memory; plus disk per file.

    uv run python benchmarks/scale.py --chunks 50000,1000000 --workdir /tmp/pinakes-scale

Why one script of this length (issue 37): both modes build a KB at a size and time the same
searches on it, and share the staging, the timing and the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from memory import proc_memory_mb  # a helper shared with mcp_latency.py
from pinakes_core import KB

QUERIES = [
    "how do I define a custom command",
    "read a csv file into a table",
    "set an environment variable for the session",
    "filter rows of a table where a column matches",
    "sort a list by a column descending",
    "convert a table to json",
    "what is the difference between a list and a table",
    "run an external command and capture its output",
    "loop over the lines of a file",
    "configure the prompt colours",
    "create a new module and export a command",
    "handle errors with try and catch",
    "parse a date string into a datetime",
    "group rows by a column and count them",
    "how do closures capture variables",
    "join two tables on a key",
    "what are the rules for variable scoping",
    "how to write a plugin for nushell",
    "open a url and read the response body",
    "split a string into a list of words",
]
#: Queries the default's graph gate lets through (relational phrasing), to time the PPR stage
#: when it runs: the queries above are single-hop, so the default skips it on all of them.
GATED_QUERIES = [
    "which is the command that reads csv files, and can it write them too?",
    "what does the command that sorts a table do with null values",
    "how do I use the output of a command that lists files in a loop",
    "which flags does the command that opens a url accept",
    "what is the type of the value returned by the command that parses json",
]
#: The seed of the clones' noise: the same seed gives the same vectors (see ``noisy_copy``).
CLONE_SEED = 14
#: The held-out queries' seed (another than :data:`CLONE_SEED`).
HELD_OUT_SEED = 1400
CONFIGS: dict[str, list[str] | None] = {
    "default (KB config)": None,
    "hybrid": ["bm25", "dense"],
    "hybrid+expand": ["bm25", "dense", "expand"],
    "hybrid+ppr": ["bm25", "dense", "ppr"],
    "hybrid+ppr-rerank (always on)": ["bm25", "dense", "ppr-rerank"],
    "hybrid+ppr-auto (default: gated)": ["bm25", "dense", "ppr-auto"],
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora/nushell-docs"))
    parser.add_argument("--copies", type=int, default=7)
    parser.add_argument("--chunks", help="comma-separated KB sizes for the cost curve (clones)")
    parser.add_argument("--noise", type=float, default=0.3, help="clone vector noise (σ)")
    parser.add_argument(
        "--mix",
        action="store_true",
        help="clone vectors are mixtures of their own text and another base text (distinct), "
        "not noisy copies (see mixtures)",
    )
    parser.add_argument(
        "--stages",
        default="sync,nochange,pnk,search,mcp",
        help="what to measure per size (comma-separated; an existing KB of the size is reused "
        "without 'sync')",
    )
    parser.add_argument("--pnk-runs", type=int, default=3, help="`pnk sync` runs (median)")
    parser.add_argument(
        "--ann-min-chunks", type=int, help="[scale] ann_min_chunks for the clones (default: KB's)"
    )
    parser.add_argument(
        "--bm25-index-min-chunks",
        type=int,
        help="[scale] bm25_index_min_chunks for the clones (default: KB's)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries")
    parser.add_argument("--workdir", type=Path, help="keep the KB here (default: a temp dir)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "KB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), args.rounds, args.noise, args.mix)
        return
    if args.chunks:
        curve(args)
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pinakes-scale-"))
    root = work / "kb"
    if not (root / "pinakes.toml").exists():
        root.mkdir(parents=True, exist_ok=True)
        KB.init(root, name="scale")
        config = (
            (root / "pinakes.toml")
            .read_text()
            .replace("[sync]\n", "[sync]\nwrite_sidecars = false\n", 1)
        )
        (root / "pinakes.toml").write_text(config)
    kb = KB.open(root)
    timings: dict[str, float] = {}
    for copy in range(args.copies):
        target = root / f"copy{copy}"
        if not target.exists():
            shutil.copytree(
                args.corpus, target, ignore=shutil.ignore_patterns(".pinakes", "*.pnk.yaml")
            )
            target.chmod(0o755)
        t0 = time.perf_counter()
        report = kb.sync()
        timings[f"sync copy {copy}"] = round(time.perf_counter() - t0, 1)
        print(
            f"copy {copy}: {len(report.added)} added, {report.chunks_embedded} embedded, "
            f"{report.chunks_reused} reused, {report.seconds:.1f}s",
            file=sys.stderr,
        )
    status = kb.status()
    results = {}
    for name, channels in CONFIGS.items():
        for q in QUERIES[:3]:
            kb.search(q, channels=channels)  # warm-up: model, matrix, graph cache
        t0 = time.perf_counter()
        kb.search("warm", channels=channels)
        latencies = []
        for _ in range(args.rounds):
            for q in QUERIES:
                start = time.perf_counter()
                kb.search(q, channels=channels)
                latencies.append((time.perf_counter() - start) * 1000)
        results[name] = {
            "p50_ms": round(statistics.median(latencies), 1),
            "p95_ms": round(percentile(latencies, 95), 1),
        }
        if channels and "ppr-auto" in channels:
            gated = []
            for _ in range(args.rounds):
                for q in GATED_QUERIES:
                    start = time.perf_counter()
                    kb.search(q, channels=channels)
                    gated.append((time.perf_counter() - start) * 1000)
            results[name + ", gated queries"] = {
                "p50_ms": round(statistics.median(gated), 1),
                "p95_ms": round(percentile(gated, 95), 1),
            }
    push = ppr_versus_push(kb)
    out = {
        "documents": status.documents,
        "chunks": status.chunks,
        "store_mb": round(status.store_bytes / 1048576, 1),
        "sync_seconds": timings,
        "latency": results,
        "push": push,
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"{status.documents} documents, {status.chunks} chunks, store {out['store_mb']} MB")
    print("| configuration | p50 ms | p95 ms |\n|---|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['p50_ms']} | {r['p95_ms']} |")
    print(
        f"\nPPR on the {push['nodes']:,}-node graph, rerank seeds, {push['queries']} queries: "
        f"power iteration p50 {push['power_ms']} ms, forward push p50 {push['push_ms']} ms; "
        f"top-10 identical in {push['top10_identical']} of {push['queries']}, mean top-50 "
        f"overlap {push['top50_overlap']}, mean L1 distance {push['l1']:.2e}."
    )


def ppr_versus_push(kb: KB) -> dict[str, Any]:
    """Exact PPR (power iteration) against forward push on the KB's graph, rerank-style seeds.

    Seeds as ``ppr-rerank`` builds them: every chunk by cosine (the passage weight) plus 0.8 of
    the mass on the two best dense hits. Times exclude building the transition matrix.
    """
    import numpy as np

    from pinakes_graph.cache import graph_for
    from pinakes_graph.ppr import DAMPING, personalized_pagerank, seed_vector
    from pinakes_graph.push import push_pagerank

    graph = graph_for(kb)
    transition = graph.transition_t()
    chunks = np.flatnonzero(graph.chunk_id >= 0)
    power_ms, push_ms, identical, overlap, l1 = [], [], 0, [], []
    for q in QUERIES:
        ctx = kb.query_context(q, candidates=50)
        seeds = seed_vector(graph, ctx)
        seeds /= max(seeds.sum(), 1e-12)
        seeds *= 0.2
        top = [graph.node_of_chunk[c] for c, _ in ctx.dense()[:2] if c in graph.node_of_chunk]
        for node in top:
            seeds[node] += 0.8 / len(top)
        t0 = time.perf_counter()
        exact = personalized_pagerank(transition, seeds)
        t1 = time.perf_counter()
        pushed = push_pagerank(graph, seeds, damping=DAMPING)
        t2 = time.perf_counter()
        power_ms.append((t1 - t0) * 1000)
        push_ms.append((t2 - t1) * 1000)
        order_exact = chunks[np.argsort(-exact[chunks], kind="stable")]
        order_push = chunks[np.argsort(-pushed[chunks], kind="stable")]
        identical += int(list(order_exact[:10]) == list(order_push[:10]))
        overlap.append(len(set(order_exact[:50]) & set(order_push[:50])) / 50)
        l1.append(float(np.abs(exact - pushed).sum()))
    return {
        "nodes": len(graph),
        "queries": len(QUERIES),
        "power_ms": round(statistics.median(power_ms), 2),
        "push_ms": round(statistics.median(push_ms), 2),
        "top10_identical": identical,
        "top50_overlap": round(float(np.mean(overlap)), 3),
        "l1": float(np.mean(l1)),
    }


# -- the cost curve (--chunks) ---------------------------------------------------------------


def log(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def rss_mb(kind: str = "VmRSS") -> float:
    return proc_memory_mb().get(kind, float("nan"))


def _timed(module: Any, name: str, spent: dict[str, float]) -> None:
    """Wrap ``module.name`` so the seconds spent in it add up in ``spent[name]``."""
    inner = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[name] = round(spent.get(name, 0.0) + time.perf_counter() - t0, 3)

    setattr(module, name, wrapper)


def exact_top(data: Any, queries: Any, k: int = 10) -> Any:
    """The exact top ``k`` row numbers per query (float32 cosines: rows are unit vectors).

    ``data`` is read in blocks of 131,072 rows, so a mapped snapshot is never copied whole.
    """
    import numpy as np

    best = np.full((queries.shape[0], 0), 0, dtype=np.int64)
    scores = np.full((queries.shape[0], 0), -np.inf, dtype=np.float32)
    for start in range(0, data.shape[0], 131072):
        block = np.asarray(data[start : start + 131072]) @ queries.T  # rows × queries
        part = np.argpartition(-block, k - 1, axis=0)[:k].T  # queries × k
        part_scores = np.take_along_axis(block.T, part, axis=1)
        best = np.concatenate([best, part + start], axis=1)
        scores = np.concatenate([scores, part_scores], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        best = np.take_along_axis(best, keep, axis=1)
        scores = np.take_along_axis(scores, keep, axis=1)
    return best


def timed_searches(kb: KB, channels: list[str] | None, rounds: int) -> dict[str, float]:
    """Warm ``KB.search`` over :data:`QUERIES` × ``rounds`` (after one warm-up pass): p50/p95."""
    for q in QUERIES:
        kb.search(q, channels=channels)
    latencies = []
    for _ in range(rounds):
        for q in QUERIES:
            start = time.perf_counter()
            kb.search(q, channels=channels)
            latencies.append((time.perf_counter() - start) * 1000)
    return {
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "load": round(os.getloadavg()[0], 2),
    }


def held_out_recall(kb: KB, queries: Any) -> dict[str, float]:
    """Recall@10 of the dense channel (ANN candidates scored exactly) against exact, per vector.

    Each query is a vector (not a text): the channel runs on it as on an embedded query.
    """
    import numpy as np

    vectors = kb.vectors()
    truth = vectors.chunk_ids[exact_top(vectors.matrix, queries)]
    recalls = []
    for vector, want in zip(queries, truth, strict=True):
        ctx = kb.query_context("held-out vector")
        ctx.__dict__["query_vector"] = np.asarray(vector, dtype=np.float32)
        got = [chunk_id for chunk_id, _ in ctx.dense()[:10]]
        recalls.append(len(set(got) & set(want.tolist())) / 10)
    return {"recall_at_10": round(float(np.mean(recalls)), 4), "queries": len(recalls)}


def worker(kind: str, root: Path, rounds: int, noise: float = 1.0, mix: bool = False) -> None:
    """One measurement in a fresh process; prints a JSON object."""
    out: dict[str, Any] = {}
    if kind == "sync":
        import pinakes_core.index.dense
        import pinakes_core.index.lexical

        spent: dict[str, float] = {}
        _timed(pinakes_core.index.dense, "update_ann", spent)  # the ANN index
        _timed(pinakes_core.index.dense, "load_vectors", spent)  # the vector snapshot
        _timed(pinakes_core.index.lexical, "update_lexical", spent)  # the tantivy index
        t0 = time.perf_counter()
        kb = KB.open(root)
        report = kb.sync()
        memory = proc_memory_mb()
        out = {
            "seconds": round(time.perf_counter() - t0, 3),
            "unchanged": report.unchanged,
            "changed": len(report.added) + len(report.changed) + len(report.removed),
            "embedded": report.chunks_embedded,
            "stages_s": spent,
            "peak_rss_mb": memory["VmHWM"],
            "load": round(os.getloadavg()[0], 2),
        }
    elif kind == "search":
        import numpy as np

        from pinakes_core.config import ScaleConfig

        kb = KB.open(root)
        t0 = time.perf_counter()
        kb.search(QUERIES[0], channels=["bm25", "dense"])
        out["first_search_s"] = round(time.perf_counter() - t0, 3)
        out["ann"] = kb.searcher.ann() is not None
        out["tantivy"] = kb.searcher.lexical() is not None
        out["blas_threads"] = os.environ.get("OPENBLAS_NUM_THREADS")
        hybrid = timed_searches(kb, ["bm25", "dense"], rounds)
        out["hybrid_p50_ms"], out["hybrid_p95_ms"] = hybrid["p50_ms"], hybrid["p95_ms"]
        out["default"] = timed_searches(kb, None, rounds)
        out["hybrid_again"] = timed_searches(kb, ["bm25", "dense"], rounds)
        memory = proc_memory_mb()
        out["rss_mb"], out["peak_rss_mb"] = memory["VmRSS"], memory["VmHWM"]
        if out["ann"]:
            # Recall@10 of the dense channel (ANN candidates, scored exactly) against exact.
            exact = KB.open(root)
            exact.config = exact.config.model_copy(update={"scale": ScaleConfig(ann_min_chunks=0)})
            recalls, exact_ms = [], []
            for q in QUERIES:
                got = [h.chunk_id for h in _dense_hits(kb, q)]
                start = time.perf_counter()
                want = [h.chunk_id for h in _dense_hits(exact, q)]
                exact_ms.append((time.perf_counter() - start) * 1000)
                recalls.append(len(set(got) & set(want)) / max(len(want), 1))
            out["recall_at_10"] = round(float(np.mean(recalls)), 4)
            out["exact_dense_p50_ms"] = round(statistics.median(exact_ms), 1)
            base = root.parent / "base"
            if (base / ".pinakes" / "index.db").exists():
                queries = held_out_queries(read_base_vectors(base), 200, noise, mix)
                out["held_out"] = held_out_recall(kb, queries)
            exact_latencies = []
            for q in QUERIES:
                start = time.perf_counter()
                exact.search(q, channels=["bm25", "dense"])
                exact_latencies.append((time.perf_counter() - start) * 1000)
            out["exact_hybrid_p50_ms"] = round(statistics.median(exact_latencies), 1)
    out["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))


def mcp_server_memory(root: Path, rounds: int = 1) -> dict[str, Any]:
    """The real ``pinakes-mcp`` over stdio on ``root``, as a host starts it: its memory.

    Searches :data:`QUERIES` ``rounds`` times through the MCP client and reads the server
    process's ``VmRSS`` and ``VmHWM`` (:func:`memory.proc_memory_mb`) after start-up and after them.
    """
    import asyncio

    from mcp_latency import measure_server_memory

    return asyncio.run(measure_server_memory(root, QUERIES * rounds))


class _Hit:
    def __init__(self, chunk_id: int) -> None:
        self.chunk_id = chunk_id


def _dense_hits(kb: KB, query: str) -> list[_Hit]:
    """The dense channel's top 10 chunk ids for ``query`` (ANN or exact, as ``kb`` is set)."""
    ctx = kb.query_context(query)
    return [_Hit(chunk_id) for chunk_id, _ in ctx.dense()[:10]]


def run_worker(
    kind: str, root: Path, rounds: int = 1, noise: float = 1.0, mix: bool = False
) -> dict[str, Any]:
    """``worker(kind, root)`` in a fresh interpreter, one BLAS thread as ``pnk`` and MCP run."""
    t0 = time.perf_counter()
    command = [sys.executable, __file__, "--worker", kind, str(root), "--rounds", str(rounds)]
    command += ["--noise", str(noise)] + (["--mix"] if mix else [])
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")},
    )
    if done.returncode != 0:
        raise SystemExit(f"worker {kind} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = round(time.perf_counter() - t0, 3)
    return result


def disk_mb(root: Path) -> dict[str, float]:
    """MB on disk per kind of file in ``.pinakes/`` (a folder, such as tantivy's, summed whole)."""
    sizes: dict[str, float] = {}
    for path in (root / ".pinakes").iterdir():
        name = path.name
        if name.startswith("vectors-"):
            name = "vector snapshot"
        elif name.startswith("index.db"):
            name = "index.db"
        elif name.startswith("ann"):
            name = "ann index"
        elif name.startswith("bm25-tantivy"):
            name = "bm25-tantivy"
        files = [f for f in path.rglob("*") if f.is_file()] if path.is_dir() else [path]
        size = sum(f.stat().st_size for f in files)
        sizes[name] = round(sizes.get(name, 0.0) + size / 1048576, 1)
    return sizes


def build_base(work: Path, corpus: Path, embedder: Any = None) -> Path:
    """One real, fully synced copy of the corpus (the only embedding the curve does).

    ``embedder`` replaces the configured model (``scale_lexical.py`` passes the tests' fake).
    """
    base = work / "base"
    if (base / ".pinakes" / "index.db").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    KB.init(base, name="scale")
    config = (base / "pinakes.toml").read_text()
    (base / "pinakes.toml").write_text(
        config.replace("[sync]\n", "[sync]\nwrite_sidecars = false\n", 1)
    )
    shutil.copytree(corpus, base / "copy0", ignore=shutil.ignore_patterns(".pinakes", "*.pnk.yaml"))
    log("base: real sync of one copy (embeds every chunk)")
    t0 = time.perf_counter()
    KB.open(base, embedder=embedder).sync()
    log(f"base synced in {time.perf_counter() - t0:.0f}s")
    return base


def noisy_copy(base_vectors: Any, noise: float, rng: Any) -> Any:
    """One clone of the base's vectors: each plus Gaussian noise of norm ~``noise``, renormalised.

    ``rng`` is a ``numpy.random.Generator``; called once per copy in order with the same seed,
    it gives the same vectors as :func:`clone` without ``mix`` (see :func:`clone_vectors`).
    """
    import numpy as np

    dim = base_vectors.shape[1]
    noisy = base_vectors + rng.normal(scale=noise / math.sqrt(dim), size=base_vectors.shape)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def mixtures(base: Any, count: int, rng: Any, first: Any = None) -> Any:
    """``count`` distinct texts on the base's own manifold: ``w·a + (1 − w)·b`` of two base rows.

    Clones give every text ~N/base near-identical copies, so a clone KB of 1M vectors is 6.5k
    clusters of ~150 near-ties; a mixture of two texts at a random weight w ∈ [0.5, 1) is a
    text "mostly about a, partly about b", and 1M of them are distinct (6.5k² pairs) while
    staying where real embeddings lie. ``a`` is random, or the rows ``first`` (one per
    mixture: :func:`clone_vectors` gives each cloned chunk a mixture mostly about its own
    text); ``b`` and ``w`` are random. ``rng`` is a ``numpy.random.Generator``.
    """
    import numpy as np

    a = rng.integers(0, base.shape[0], size=count) if first is None else np.asarray(first)
    b = rng.integers(0, base.shape[0], size=count)
    w = rng.uniform(0.5, 1.0, size=(count, 1)).astype(np.float32)
    mixed = w * base[a] + (1.0 - w) * base[b]
    return (mixed / np.linalg.norm(mixed, axis=1, keepdims=True)).astype(np.float32)


def held_out_queries(base_vectors: Any, count: int, noise: float, mix: bool = False) -> Any:
    """``count`` new texts like a clone KB's, in none of its rows (seed :data:`HELD_OUT_SEED`).

    Random base rows with fresh noise of the clones' σ, or with ``mix`` fresh mixtures.
    """
    import numpy as np

    rng = np.random.default_rng(HELD_OUT_SEED)
    if mix:
        return mixtures(base_vectors, count, rng)
    rows = rng.choice(base_vectors.shape[0], size=count, replace=False)
    return noisy_copy(base_vectors[rows], noise, rng)


def clone_vectors(base_vectors: Any, rng: Any, noise: float, mix: bool = False) -> Any:
    """One copy's vectors, row for row with the base: noisy clones, or with ``mix`` mixtures.

    Called once per copy in order with a generator seeded :data:`CLONE_SEED`, it gives the
    vectors :func:`clone` stores (``ann_recall.py`` rebuilds the same rows without a KB).
    """
    if mix:
        return mixtures(
            base_vectors, base_vectors.shape[0], rng, first=range(base_vectors.shape[0])
        )
    return noisy_copy(base_vectors, noise, rng)


def read_base_vectors(base: Path) -> Any:
    """The base KB's chunk vectors (float32, one row per chunk in chunk-id order), as cloned."""
    import numpy as np

    conn = sqlite3.connect(f"file:{base / '.pinakes' / 'index.db'}?mode=ro", uri=True)
    try:
        blobs = conn.execute(
            "SELECT v.vector FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash "
            "ORDER BY c.chunk_id"
        ).fetchall()
    finally:
        conn.close()
    return np.stack([np.frombuffer(b[0], dtype=np.float32) for b in blobs])


def clone(
    base: Path,
    corpus: Path,
    root: Path,
    copies: int,
    noise: float,
    ann_min: int | None,
    mix: bool = False,
    bm25_index_min: int | None = None,
) -> float:
    """Make ``root`` a KB of ``copies`` copies of the base; returns seconds spent."""
    import numpy as np

    from pinakes_core.uri import new_ulid

    t0 = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    shutil.copy2(base / "pinakes.toml", root / "pinakes.toml")
    settings = {"ann_min_chunks": ann_min, "bm25_index_min_chunks": bm25_index_min}
    if any(value is not None for value in settings.values()):
        with (root / "pinakes.toml").open("a") as handle:
            handle.write("\n[scale]\n")
            handle.writelines(f"{k} = {v}\n" for k, v in settings.items() if v is not None)
    (root / ".pinakes").mkdir()
    src = sqlite3.connect(base / ".pinakes" / "index.db")
    dst = sqlite3.connect(root / ".pinakes" / "index.db")
    src.backup(dst)
    src.close()
    shutil.copytree(base / "copy0", root / "copy0")
    conn = dst
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = OFF")
    docs = conn.execute("SELECT * FROM documents").fetchall()
    columns = [d[0] for d in conn.execute("SELECT * FROM documents LIMIT 0").description]
    chunks = conn.execute(
        "SELECT c.chunk_id, c.doc_id, c.ordinal, c.heading_path, c.text, c.embed_hash, "
        "c.start_line, c.end_line, c.tokens, f.title, f.heading, f.text, v.vector "
        "FROM chunks c JOIN chunks_fts f ON f.rowid = c.chunk_id "
        "JOIN vectors v ON v.embed_hash = c.embed_hash ORDER BY c.chunk_id"
    ).fetchall()
    tags = conn.execute("SELECT doc_id, tag FROM doc_tags").fetchall()
    meta = conn.execute("SELECT doc_id, key, value_text, value_num FROM doc_meta").fetchall()
    links = conn.execute(
        "SELECT src_doc, target, kind, dst_kb, dst_doc, rel, origin, reason FROM links"
    ).fetchall()
    step = int(conn.execute("SELECT MAX(chunk_id) FROM chunks").fetchone()[0]) + 1
    rng = np.random.default_rng(CLONE_SEED)
    base_vectors = np.stack([np.frombuffer(c[12], dtype=np.float32) for c in chunks])
    for copy in range(1, copies):
        shutil.copytree(
            corpus, root / f"copy{copy}", ignore=shutil.ignore_patterns(".pinakes", "*.pnk.yaml")
        )
        ids = {d[0]: new_ulid() for d in docs}
        prefix = f"copy{copy}/"
        rows = []
        for d in docs:
            row = dict(zip(columns, d, strict=True))
            row["doc_id"] = ids[row["doc_id"]]
            row["path"] = prefix + row["path"].split("/", 1)[1]
            rows.append(tuple(row[c] for c in columns))
        marks = ",".join("?" * len(columns))
        noisy = clone_vectors(base_vectors, rng, noise, mix)
        with conn:
            conn.executemany(f"INSERT INTO documents({','.join(columns)}) VALUES ({marks})", rows)
            conn.executemany(
                "INSERT INTO doc_tags(doc_id, tag) VALUES (?, ?)", [(ids[t[0]], t[1]) for t in tags]
            )
            conn.executemany(
                "INSERT INTO doc_meta(doc_id, key, value_text, value_num) VALUES (?, ?, ?, ?)",
                [(ids[m[0]], *m[1:]) for m in meta],
            )
            conn.executemany(
                "INSERT INTO links(src_doc, target, kind, dst_kb, dst_doc, rel, origin, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(ids[x[0]], x[1], x[2], x[3], ids.get(x[4], x[4]), *x[5:]) for x in links],
            )
            offset = copy * step
            conn.executemany(
                "INSERT INTO chunks(chunk_id, doc_id, ordinal, heading_path, text, embed_hash, "
                "start_line, end_line, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (c[0] + offset, ids[c[1]], c[2], c[3], c[4], f"{c[5][:24]}{copy:08x}", *c[6:9])
                    for c in chunks
                ],
            )
            conn.executemany(
                "INSERT INTO chunks_fts(rowid, title, heading, text) VALUES (?, ?, ?, ?)",
                [(c[0] + offset, c[9], c[10], c[11]) for c in chunks],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO vectors(embed_hash, vector) VALUES (?, ?)",
                [(f"{c[5][:24]}{copy:08x}", noisy[i].tobytes()) for i, c in enumerate(chunks)],
            )
        if copy % 10 == 0:
            log(f"  cloned {copy + 1}/{copies} copies")
    with conn:
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    conn.close()
    return round(time.perf_counter() - t0, 1)


def pnk_sync_seconds(root: Path, runs: int = 3) -> dict[str, Any]:
    """``pnk sync`` (the real CLI, a fresh process each time) on ``root``: wall seconds."""
    pnk = str(Path(sys.executable).parent / "pnk")
    times, loads = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([pnk, "--kb", str(root), "sync", "--json"], capture_output=True, check=True)
        times.append(round(time.perf_counter() - t0, 3))
        loads.append(round(os.getloadavg()[0], 2))
    return {"median_s": round(statistics.median(times), 3), "runs_s": times, "load": loads}


def curve(args: argparse.Namespace) -> None:
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pinakes-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus.resolve()
    stages = set(args.stages.split(","))
    load_before = os.getloadavg()[0]
    base = build_base(work, corpus)
    base_chunks = KB.open(base).status().chunks
    rows = []
    for target in (int(x) for x in args.chunks.split(",")):
        copies = max(1, math.ceil(target / base_chunks))
        root = work / f"kb-{target}"
        row: dict[str, Any] = {"target": target, "copies": copies}
        if "sync" in stages or not (root / ".pinakes" / "index.db").exists():
            log(f"{target} chunks: cloning {copies} copies{' (mixtures)' if args.mix else ''}")
            row["clone_s"] = clone(
                base,
                corpus,
                root,
                copies,
                args.noise,
                args.ann_min_chunks,
                args.mix,
                args.bm25_index_min_chunks,
            )
            log(f"  cloned in {row['clone_s']}s; first sync (ANN index, tantivy, snapshot)")
            row["first_sync"] = run_worker("sync", root)
            log(f"  first sync {json.dumps(row['first_sync'])}")
        if "nochange" in stages:
            again = [run_worker("sync", root) for _ in range(3)]
            row["nochange_sync"] = again
            row["nochange_sync_s"] = statistics.median(a["seconds"] for a in again)
            row["nochange_sync_process_s"] = statistics.median(a["process_s"] for a in again)
            log(f"  no-change KB.sync {row['nochange_sync_s']}s")
        if "pnk" in stages:
            row["pnk_sync"] = pnk_sync_seconds(root, args.pnk_runs)
            log(f"  pnk sync {json.dumps(row['pnk_sync'])}")
        if "search" in stages:
            log("  search")
            row["search"] = run_worker("search", root, args.rounds, args.noise, args.mix)
            log(f"  search {json.dumps(row['search'])}")
        if "mcp" in stages:
            log("  MCP server over stdio")
            row["mcp"] = mcp_server_memory(root)
            log(f"  mcp {json.dumps(row['mcp'])}")
        status = KB.open(root).status()
        row.update(documents=status.documents, chunks=status.chunks, disk_mb=disk_mb(root))
        rows.append(row)
        log(f"  {json.dumps(rows[-1])}")
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "base_chunks": base_chunks,
        "vectors": "mixtures" if args.mix else f"noisy clones, σ = {args.noise}",
        "rows": rows,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{out['date']}, {out['vectors']}, load average (1 min) before/after {out['load_1min']}\n"
    )
    print(
        "| chunks | documents | first sync (ANN / tantivy) | its peak RSS | no-change sync "
        "(library / process / `pnk sync`) | hybrid p50 / p95 | default p50 | exact hybrid p50 "
        "| recall@10 text / held-out | search RSS (peak) | MCP server RSS (peak) "
        "| disk: index.db / snapshot / ANN / tantivy |"
    )
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        first, s, d, m = (
            r.get("first_sync", {}),
            r.get("search", {}),
            r["disk_mb"],
            r.get("mcp", {}),
        )
        spent = first.get("stages_s", {})
        print(
            f"| {r['chunks']:,} | {r['documents']:,} | {first.get('seconds', '—')} s "
            f"({spent.get('update_ann', '—')} / {spent.get('update_lexical', '—')} s) "
            f"| {first.get('peak_rss_mb', '—')} MB "
            f"| {r.get('nochange_sync_s', '—')} / {r.get('nochange_sync_process_s', '—')} / "
            f"{r.get('pnk_sync', {}).get('median_s', '—')} s "
            f"| {s.get('hybrid_p50_ms', '—')} / {s.get('hybrid_p95_ms', '—')} ms"
            f"{' (ANN)' if s.get('ann') else ''} "
            f"| {s.get('default', {}).get('p50_ms', '—')} ms "
            f"| {s.get('exact_hybrid_p50_ms', '—')} ms "
            f"| {s.get('recall_at_10', '—')} / {s.get('held_out', {}).get('recall_at_10', '—')} "
            f"| {s.get('rss_mb', '—')} ({s.get('peak_rss_mb', '—')}) MB "
            f"| {m.get('rss_after_queries_mb', '—')} ({m.get('peak_rss_mb', '—')}) MB "
            f"| {d.get('index.db', 0):.0f} / {d.get('vector snapshot', 0):.0f} / "
            f"{d.get('ann index', 0):.0f} / {d.get('bm25-tantivy', 0):.0f} MB |"
        )


if __name__ == "__main__":
    main()
