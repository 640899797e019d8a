"""Hybrid retrieval: run the selected channels, fuse them with RRF, build the hits (DESIGN §5)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from pinakes_core.channels import QueryContext, Ranked
from pinakes_core.confidence import Calibration, Ranking, evidence_for, extract_features
from pinakes_core.config import RetrievalConfig
from pinakes_core.fusion import rrf
from pinakes_core.models import Hit, SearchResult
from pinakes_core.plugins import channel_registry

__all__ = ["default_channels", "fuse_and_build"]


#: The graph channel ``graph_channel = "auto"`` adds when a plugin provides it.
AUTO_GRAPH_CHANNEL = "ppr-rerank"


def default_channels(config: RetrievalConfig, *, entities: bool, concepts: bool) -> list[str]:
    """The channels a query runs when the caller does not name them."""
    names = list(config.channels)
    if config.graph_channel == "auto":
        if AUTO_GRAPH_CHANNEL in channel_registry():
            names.append(AUTO_GRAPH_CHANNEL)
    elif config.graph_channel != "off":
        names.append(config.graph_channel)
    if entities:
        names.append("entities")
    if concepts:
        names.append("concepts")
    return list(dict.fromkeys(names))


def _hits(
    conn: sqlite3.Connection,
    fused: list[tuple[int, float]],
    lists: dict[str, Ranked],
    explain: bool,
) -> list[Hit]:
    if not fused:
        return []
    ids = [cid for cid, _ in fused]
    marks = ",".join("?" * len(ids))
    rows = {
        r["chunk_id"]: r
        for r in conn.execute(
            "SELECT c.chunk_id, c.doc_id, c.ordinal, c.heading_path, c.text, c.start_line, c.end_line, "
            "c.page_start, c.page_end, d.source_type, "
            f"d.path, d.title FROM chunks c JOIN documents d USING (doc_id) WHERE c.chunk_id IN ({marks})",
            ids,
        )
    }
    ranks = {
        name: {cid: i for i, (cid, _) in enumerate(ranked, 1)} for name, ranked in lists.items()
    }
    raw = {name: dict(ranked) for name, ranked in lists.items()}
    hits = []
    for cid, score in fused:
        row = rows.get(cid)
        if row is None:  # deleted by a concurrent sync between ranking and fetch
            continue
        hits.append(
            Hit(
                doc_id=row["doc_id"],
                chunk=row["ordinal"],
                path=row["path"],
                title=row["title"],
                heading_path=json.loads(row["heading_path"]),
                text=row["text"],
                score=round(score, 6),
                lines=(row["start_line"], row["end_line"]),
                source_type=row["source_type"],
                page_start=row["page_start"],
                page_end=row["page_end"],
                ranks={name: r.get(cid) for name, r in ranks.items()},
                channel_scores={name: round(s[cid], 6) for name, s in raw.items() if cid in s}
                if explain
                else None,
            )
        )
    return hits


def _features(
    ctx: QueryContext,
    lists: dict[str, Ranked],
    top: Hit | None,
    top_chunk: int | None,
    offtopic: npt.NDArray[np.float32] | None,
) -> dict[str, float] | None:
    """The confidence features of the top hit (``None`` unless bm25 and dense both ran)."""
    if "bm25" not in lists or "dense" not in lists:
        return None
    if top is None or top_chunk is None:
        return None
    bm25, dense = lists["bm25"], lists["dense"]
    ids = list({cid for cid, _ in bm25} | {cid for cid, _ in dense})
    doc_of: dict[int, str] = {top_chunk: top.doc_id}
    if ids:
        marks = ",".join("?" * len(ids))
        doc_of.update(
            (int(r[0]), str(r[1]))
            for r in ctx.conn.execute(
                f"SELECT chunk_id, doc_id FROM chunks WHERE chunk_id IN ({marks})", ids
            )
        )
    offtopic_best = None
    if offtopic is not None and len(offtopic) and ctx.query.strip():
        offtopic_best = float(np.max(offtopic @ ctx.query_vector))
    ranking = Ranking(
        bm25=bm25,
        dense=dense,
        doc_of=doc_of,
        top_chunk=top_chunk,
        top_doc=top.doc_id,
        top_head=f"{top.title} {' '.join(top.heading_path)}",
        top_text=top.text,
        offtopic_best=offtopic_best,
    )
    evidence = evidence_for(ctx.query, ctx.term_evidence(top_chunk))
    return extract_features(ctx.query, ranking, evidence)


def fuse_and_build(
    ctx: QueryContext,
    channels: Sequence[str],
    *,
    k: int,
    rrf_k: int,
    explain: bool = False,
    weights: Mapping[str, float] | None = None,
    calibration: Calibration | None = None,
    abstain_below: float = 0.0,
    offtopic: npt.NDArray[np.float32] | None = None,
) -> SearchResult:
    """Run ``channels`` on ``ctx``, fuse with RRF and return the top ``k`` hits.

    ``confidence`` is computed with ``calibration`` when one is given and the features' inputs
    exist (the bm25 and dense channels both ran and found something); otherwise it is ``None``.
    ``offtopic`` holds the embedded off-topic reference queries the off-topic feature compares
    the query with. With ``explain`` the result also carries the confidence features.

    Raises:
        PluginMissingError: if a channel is not installed.
    """
    started = time.perf_counter()
    registry = channel_registry(list(channels))
    lists: dict[str, Ranked] = {}
    timings: dict[str, float] = {}
    # Channels that start from the fused result of the others (graph expansion, PPR) run in a
    # second stage, with the first stage's fusion as their seeds.
    rerankers = {n: c for n, c in registry.items() if hasattr(c, "rerank")}
    stages = [
        {
            n: c
            for n, c in registry.items()
            if n not in rerankers and not getattr(c, "after_fusion", False)
        },
        {
            n: c
            for n, c in registry.items()
            if n not in rerankers and getattr(c, "after_fusion", False)
        },
    ]
    for number, stage in enumerate(stages):
        if number == 1 and stage:
            ctx.seeds = rrf(
                {name: [cid for cid, _ in ranked] for name, ranked in lists.items()},
                k=rrf_k,
                weights=weights,
            )
        for name, channel in stage.items():
            t0 = time.perf_counter()
            lists[name] = channel.run(ctx)
            timings[name] = round((time.perf_counter() - t0) * 1000, 3)
    t0 = time.perf_counter()
    fused = rrf(
        {name: [cid for cid, _ in ranked] for name, ranked in lists.items()},
        k=rrf_k,
        weights=weights,
    )

    # Rerankers (a registered name whose object has ``rerank``) reorder the fused list.
    for name in rerankers:
        t1 = time.perf_counter()
        fused = rerankers[name].rerank(ctx, fused)
        timings[name] = round((time.perf_counter() - t1) * 1000, 3)
    fused = fused[:k]
    hits = _hits(ctx.conn, fused, lists, explain)
    timings["fuse"] = round((time.perf_counter() - t0) * 1000, 3)
    features = _features(
        ctx, lists, hits[0] if hits else None, fused[0][0] if hits else None, offtopic
    )
    confidence = None
    if calibration is not None and features is not None:
        confidence = round(calibration.predict(features), 4)
    timings["total"] = round((time.perf_counter() - started) * 1000, 3)
    return SearchResult(
        query=ctx.query,
        hits=hits,
        confidence=confidence,
        abstain=None if confidence is None else confidence < abstain_below,
        timings_ms=timings,
        features=features if explain else None,
    )
