"""ANN recall against exact search, per index setting (issue 14, docs/scaling.md).

A fast stand-alone sweep over the ``[scale]`` index settings, without syncing a KB of the size:
the vectors are those of ``benchmarks/scale.py``'s clone KB — a real synced base (nushell-docs,
embedded with the configured model; ``scale.build_base``) plus noisy copies of it
(``scale.clone_vectors``, same seed, so the rows are the very vectors ``scale.py --chunks``
gives the store) — and each index is built by ``pinakes_core.index.dense.new_index``, the function
sync uses, from a ``ScaleConfig``, fed in the batches sync feeds it.

Per size and setting: build time, index size (the saved file), and over held-out queries:

- **recall@10**: the dense channel's path — ``ann_oversample × candidates`` ids from the index
  (``AnnIndex.search``, ef raised as search raises it), scored exactly in float32, top 10 —
  against the exact top 10 over all rows; also with 2× and 4× that many candidates, to tell
  the index's limit from the candidate count's;
- **raw recall@10**: the index's own top 10 (its quantised distances, no rescoring);
- **near-tie recall@10**: the share of the returned top 10 whose cosine is within
  :data:`NEAR_TIE` of the exact 10th best, and the median gap between the exact and the
  returned 10th best cosine: whether a miss is a different, worse passage or one of many
  near-identical copies (a clone KB's texts have ~N/base copies each);
- the median latency of one ``AnnIndex.search`` call, per candidate count.

``--mix`` replaces the clones by mixtures of two base texts (``scale.mixtures``): distinct
vectors on the real embeddings' manifold, where a clone KB of 1M rows is ~150 near-identical
copies of each base text.

Queries: ``--queries`` held-out chunks (base rows plus fresh noise of the same σ: new texts
like the KB's, not in the index; with ``--mix``, fresh mixtures) and scale.py's 20 text
queries embedded with the model.

    uv run python benchmarks/ann_recall.py --sizes 200000 --workdir /tmp/pinakes-scale
    uv run python benchmarks/ann_recall.py --sizes 1000000 --workdir /tmp/pinakes-scale \\
        --settings f16:16:128,i8:32:256
    uv run python benchmarks/ann_recall.py --sizes 1000000 --mix --workdir /tmp/pinakes-scale \\
        --settings i8:16:128

``--workdir`` holds the synced base (``<workdir>/base``, shared with ``scale.py``); the
first run embeds it (minutes). A setting is ``dtype:connectivity:expansion_add``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale
from pinakes_core import KB
from pinakes_core.config import ScaleConfig
from pinakes_core.index.dense import AnnIndex, new_index

#: dtype:M:ef_add, in the order that tells most first: today's default, each axis alone, then
#: the combinations (every one of i8/f16 × 16/24/32 × 128/256).
GRID = [
    "i8:16:128",
    "f16:16:128",
    "i8:32:128",
    "i8:16:256",
    "f16:32:128",
    "i8:32:256",
    "f16:32:256",
    "f16:16:256",
    "i8:24:128",
    "f16:24:128",
    "i8:24:256",
    "f16:24:256",
]
#: A returned row within this cosine of the exact 10th best counts as a near-tie hit: on a
#: clone KB a text has ~150 copies at nearly the same cosine, and which ten of them come back
#: is not a difference a reader of the results can see (docs/scaling.md).
NEAR_TIE = 0.01


def log(message: str) -> None:
    print(f"[ann {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def dataset(
    base: npt.NDArray[np.float32], size: int, noise: float, mix: bool = False
) -> npt.NDArray[np.float32]:
    """The rows of scale.py's clone KB of ``size`` chunks: the base, then each copy in order.

    Each copy is ``scale.clone_vectors`` (noisy clones, or with ``mix`` mixtures of two base
    texts), so these are the very vectors ``scale.py --chunks`` (``--mix``) gives the store.
    """
    rng = np.random.default_rng(scale.CLONE_SEED)
    copies = max(1, math.ceil(size / base.shape[0]))
    out = np.empty((copies * base.shape[0], base.shape[1]), dtype=np.float32)
    out[: base.shape[0]] = base
    for copy in range(1, copies):
        rows = slice(copy * base.shape[0], (copy + 1) * base.shape[0])
        out[rows] = scale.clone_vectors(base, rng, noise, mix)
    return out


def exact_top(
    data: npt.NDArray[np.float32], queries: npt.NDArray[np.float32], k: int = 10
) -> npt.NDArray[np.int64]:
    """The exact top ``k`` row numbers per query (float32 cosines: rows are unit vectors)."""
    best = np.full((queries.shape[0], 0), 0, dtype=np.int64)
    scores = np.full((queries.shape[0], 0), -np.inf, dtype=np.float32)
    for start in range(0, data.shape[0], 131072):
        block = data[start : start + 131072] @ queries.T  # rows × queries
        part = np.argpartition(-block, k - 1, axis=0)[:k].T  # queries × k
        part_scores = np.take_along_axis(block.T, part, axis=1)
        best = np.concatenate([best, part + start], axis=1)
        scores = np.concatenate([scores, part_scores], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        best = np.take_along_axis(best, keep, axis=1)
        scores = np.take_along_axis(scores, keep, axis=1)
    return best


def build(
    data: npt.NDArray[np.float32], config: ScaleConfig, path: Path
) -> tuple[Any, float, float]:
    """An index over ``data`` (keys = row numbers) built as sync builds it; seconds and MB."""
    t0 = time.perf_counter()
    index = new_index(data.shape[1], config)
    for start in range(0, data.shape[0], 65536):  # update_ann's batches
        end = min(start + 65536, data.shape[0])
        index.add(np.arange(start, end, dtype=np.uint64), data[start:end])
    seconds = time.perf_counter() - t0
    index.save(str(path))
    return index, seconds, path.stat().st_size / 1048576


def measure(
    index: Any,
    config: ScaleConfig,
    data: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
    truth: npt.NDArray[np.int64],
    candidates: int,
) -> dict[str, Any]:
    ann = AnnIndex(index, config.ann_expansion_search)
    asked = math.ceil(candidates * config.ann_oversample)
    out: dict[str, Any] = {}
    for factor in (1, 2, 4):
        hits, latencies, near, gaps = [], [], [], []
        for query, want in zip(queries, truth, strict=True):
            start = time.perf_counter()
            found = ann.search(query, asked * factor)
            latencies.append((time.perf_counter() - start) * 1000)
            rows = found[(found >= 0) & (found < data.shape[0])]
            scores = data[rows] @ query  # the exact rescoring of the dense channel
            order = np.argsort(-scores, kind="stable")[:10]
            top = rows[order]
            hits.append(len(set(top.tolist()) & set(want.tolist())) / 10)
            tenth = float(data[want[-1]] @ query)  # the exact 10th best cosine
            near.append(float(np.mean(scores[order] >= tenth - NEAR_TIE)))
            gaps.append(tenth - float(scores[order][-1]))
        out[f"recall@10 x{factor}"] = round(float(np.mean(hits)), 4)
        out[f"search_ms_p50 x{factor}"] = round(statistics.median(latencies), 2)
        if factor == 1:
            out["near-tie recall@10"] = round(float(np.mean(near)), 4)
            out["10th cosine gap p50"] = round(float(statistics.median(gaps)), 4)
    index.expansion_search = config.ann_expansion_search
    raw = [
        len(set(np.asarray(index.search(q, 10).keys).tolist()) & set(w.tolist())) / 10
        for q, w in zip(queries, truth, strict=True)
    ]
    out["raw recall@10"] = round(float(np.mean(raw)), 4)
    return out


def text_queries(base_root: Path) -> npt.NDArray[np.float32]:
    """scale.py's text queries embedded with the base KB's model."""
    kb = KB.open(base_root)
    try:
        return np.stack([np.asarray(kb.query_context(q).query_vector) for q in scale.QUERIES])
    finally:
        kb.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/corpora/nushell-docs"))
    parser.add_argument("--workdir", type=Path, help="holds the synced base (default: temp dir)")
    parser.add_argument("--sizes", default="200000", help="comma-separated vector counts")
    parser.add_argument("--noise", type=float, default=1.0, help="clone vector noise (σ)")
    parser.add_argument("--settings", default=",".join(GRID), help="dtype:M:ef_add,…")
    parser.add_argument(
        "--base-rows",
        type=int,
        help="use only the first N base vectors (more clones of each at a size: 1M's "
        "clones-per-text at a smaller size)",
    )
    parser.add_argument(
        "--mix",
        action="store_true",
        help="rows past the base are mixtures of two base texts (distinct), not noisy clones",
    )
    parser.add_argument("--queries", type=int, default=200, help="held-out chunk queries")
    parser.add_argument("--candidates", type=int, default=50, help="[retrieval] candidates")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="pinakes-ann-"))
    work.mkdir(parents=True, exist_ok=True)
    base_root = scale.build_base(work, args.corpus.resolve())
    base = scale.read_base_vectors(base_root)[: args.base_rows]
    sets = {
        "held-out": scale.held_out_queries(base, args.queries, args.noise, args.mix),
        "text": text_queries(base_root).astype(np.float32),
    }
    log(f"base {base.shape[0]} vectors × {base.shape[1]}; load {os.getloadavg()[0]:.1f}")
    defaults = ScaleConfig()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{'mixtures of two texts' if args.mix else f'clones, σ = {args.noise}'}, "
        f"{args.queries} held-out + {len(scale.QUERIES)} text queries, candidates "
        f"{defaults.ann_oversample:g} × {args.candidates}, ef_search ≥ "
        f"{defaults.ann_expansion_search}, load (1 min) {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if not args.json:
        print(
            "\n| vectors | dtype | M | ef_add | build s | index MB | recall@10 held-out "
            "(×1 / ×2 / ×4 candidates) | raw recall@10 | recall@10 text | near-tie recall@10 "
            "held-out / text | 10th cosine gap p50 | search ms p50 (×1 / ×2 / ×4) | load |\n"
            "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
            flush=True,
        )
    for size in (int(x) for x in args.sizes.split(",")):
        data = dataset(base, size, args.noise, args.mix)
        truth = {name: exact_top(data, q) for name, q in sets.items()}
        log(f"{data.shape[0]} vectors, exact top 10 done")
        for setting in args.settings.split(","):
            dtype, connectivity, expansion = setting.split(":")
            config = ScaleConfig(
                ann_dtype=dtype,  # type: ignore[arg-type]
                ann_connectivity=int(connectivity),
                ann_expansion_add=int(expansion),
            )
            path = work / f"ann-sweep-{os.getpid()}.usearch"
            try:
                index, seconds, megabytes = build(data, config, path)
            finally:
                path.unlink(missing_ok=True)
            held = measure(
                index, config, data, sets["held-out"], truth["held-out"], args.candidates
            )
            text = measure(index, config, data, sets["text"], truth["text"], args.candidates)
            del index
            row = {
                "vectors": int(data.shape[0]),
                "dtype": dtype,
                "connectivity": int(connectivity),
                "expansion_add": int(expansion),
                "build_s": round(seconds, 1),
                "index_mb": round(megabytes, 1),
                "held_out": held,
                "text": text,
                "load": round(os.getloadavg()[0], 1),
            }
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            print(
                f"| {row['vectors']:,} | {dtype} | {connectivity} | {expansion} "
                f"| {row['build_s']} | {row['index_mb']:.0f} "
                f"| {held['recall@10 x1']:.3f} / {held['recall@10 x2']:.3f} / "
                f"{held['recall@10 x4']:.3f} | {held['raw recall@10']:.3f} "
                f"| {text['recall@10 x1']:.3f} | {held['near-tie recall@10']:.3f} / "
                f"{text['near-tie recall@10']:.3f} | {held['10th cosine gap p50']:.4f} "
                f"| {held['search_ms_p50 x1']} / {held['search_ms_p50 x2']} / "
                f"{held['search_ms_p50 x4']} | {row['load']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
