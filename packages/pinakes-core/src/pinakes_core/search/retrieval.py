"""Hybrid retrieval, as a recipe: channels → evidence → weighted fusion → rerankers → hits.

DESIGN §5 with issue 9's changes: channels' scores become comparable evidence and are fused by
a weighted mean whose weights follow the query's shape (:mod:`pinakes_core.search.fusion`); rerankers
(the graph plugin's) reorder that ranking in the same score units, and a *gated* reranker runs
only on queries it says it can help, so every other query costs nothing extra.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.config import RetrievalConfig
from pinakes_core.index.query import quoted_phrases, words
from pinakes_core.models import Hit, RankingInfo, SearchResult
from pinakes_core.search.confidence import Calibration, Ranking, evidence_for, extract_features
from pinakes_core.search.context import QueryContext, Ranked
from pinakes_core.search.fusion import QueryShape, combine, lexical_share, rank_evidence
from pinakes_core.search.hits import GroupBy, build_hits
from pinakes_core.search.registry import channel_registry

__all__ = [
    "AUTO_GRAPH_CHANNEL",
    "RANK_ONLY_WEIGHT",
    "channel_weights",
    "default_channels",
    "fuse_and_build",
    "lift_quoted",
]


#: The graph stage ``graph_channel = "auto"`` adds when a plugin provides it: PPR reranking gated
#: per query (it runs only where the query and the first-stage ranking look multi-hop).
AUTO_GRAPH_CHANNEL = "ppr-auto"
#: Weight of a channel that only ranks (no calibrated evidence), against bm25 + dense's 1.0.
RANK_ONLY_WEIGHT = 0.25
#: A query of at most this many words may be a document's name (its title or an alias).
NAME_WORDS = 8
#: A name more documents than this share ("Overview", "README") names none of them.
NAMED_AT_MOST = 3


def name_key(text: str) -> str:
    """A name as queries and titles are matched by: its words, lower-cased, one space apart.

    NFC first: a title read from a macOS file name is decomposed ("e" + U+0301), the query
    typed to it composed.
    """
    return " ".join(w.lower() for w in words(unicodedata.normalize("NFC", text)))


def document_names(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Every title and alias of at most :data:`NAME_WORDS` words → ids of its documents."""
    names: dict[str, list[str]] = {}
    for doc_id, title, aliases in conn.execute("SELECT doc_id, title, aliases FROM documents"):
        for name in {title, *json.loads(aliases or "[]")}:
            key = name_key(str(name))
            if key and key.count(" ") < NAME_WORDS:
                names.setdefault(key, []).append(str(doc_id))
    return names


def named_documents(ctx: QueryContext) -> list[str]:
    """Ids of the documents the whole query names: its title or an alias, word for word.

    Case and punctuation aside (``obsidian flavored markdown`` names "Obsidian Flavored
    Markdown"); a query longer than :data:`NAME_WORDS` words names nothing, and neither does a
    name more than :data:`NAMED_AT_MOST` documents share. The names come from the KB's table
    of them, kept for its store generation (:meth:`Searcher.document_names
    <pinakes_core.search.searcher.Searcher.document_names>`), so a lookup is one dictionary read.
    """
    key = name_key(ctx.query)
    return _documents_named(ctx, key) if _may_name(key) else []


def _may_name(key: str) -> bool:
    """Whether a query of this :func:`name_key` may be a name: at most :data:`NAME_WORDS` words."""
    return bool(key) and key.count(" ") < NAME_WORDS


def _documents_named(ctx: QueryContext, key: str) -> list[str]:
    table = ctx.names() if ctx.names is not None else document_names(ctx.conn)
    named = sorted(set(table.get(key, ())))
    return named if len(named) <= NAMED_AT_MOST else []


#: A heading more chunks than this carry in their heading paths ("Examples", "Flags") names no
#: section (a section split in pieces carries its heading in each).
SECTION_CHUNKS_AT_MOST = 20


def _named_sections(
    ctx: QueryContext, key: str, fused: list[tuple[int, float]], rows: dict[int, tuple[str, str]]
) -> dict[str, int]:
    """The best candidate of each document with a section the whole query names, by document.

    A query that is a heading word for word (``build.assetsInlineLimit``, the option a
    reference page documents under its own heading) asks for that section, as a title asks
    for its page; a release note that only mentions the option in a longer heading does not
    name it. Nothing when the heading is common: carried by more than
    :data:`SECTION_CHUNKS_AT_MOST` chunks in the KB, or by candidates of more than
    :data:`NAMED_AT_MOST` documents.
    """
    best: dict[str, int] = {}
    for chunk, _ in fused:
        doc, path = rows.get(chunk, ("", "[]"))
        heading = (json.loads(path or "[]") or [""])[-1]
        if doc and doc not in best and name_key(str(heading)) == key:
            best[doc] = chunk
    if not best or len(best) > NAMED_AT_MOST:
        return {}
    carried = ctx.text_index.heading_count(key, SECTION_CHUNKS_AT_MOST + 1)
    if carried is None:  # a phrase the index cannot read names nothing it could count
        return {}
    return best if carried <= SECTION_CHUNKS_AT_MOST else {}


def lift_named(
    ctx: QueryContext, fused: list[tuple[int, float]]
) -> tuple[list[tuple[int, float]], str]:
    """Put the best passage of each document the query names (:func:`named_documents`) first.

    Typing a note's title is asking for that note: a page that only mentions the name (a
    section "## Tags" in a long reference page) must not take its place. The named
    documents' best candidates move to the top, in their fused order, at the top score (the
    strongest evidence the query found), so scores stay in [0, 1] and never rise with rank.
    A query that names no document may name a section (:func:`_named_sections`): that
    section's best passage moves up the same way. Only candidates the first stage found
    move: filters hold. Returns the ranking and what ``explain`` shows.
    """
    key = name_key(ctx.query)
    if not fused or not _may_name(key):
        return fused, "skipped: the query is too long to be a name"
    named = set(_documents_named(ctx, key))
    ids = [c for c, _ in fused]
    marks = ",".join("?" * len(ids))
    # Each candidate's document and heading path, in one read (the path only for a section).
    rows = {
        chunk: (doc, path)
        for chunk, doc, path in ctx.conn.execute(
            f"SELECT chunk_id, doc_id, heading_path FROM chunks WHERE chunk_id IN ({marks})", ids
        )
    }
    best: dict[str, int] = {}
    for chunk, _ in fused:
        doc = rows.get(chunk, ("", ""))[0]
        if doc in named and doc not in best:
            best[doc] = chunk
    what = f"the title or an alias of {len(best)} document(s)"
    if not named:
        best = _named_sections(ctx, key, fused, rows)
        if not best:
            return fused, "skipped: the query is no document's title or alias, nor a heading"
        what = f"the heading of a section in {len(best)} document(s)"
    if not best:
        return fused, "skipped: the documents the query names are not among the candidates"
    top = fused[0][1]
    lifted = set(best.values())
    head = [(chunk, top) for chunk, _ in fused if chunk in lifted]
    return head + [(c, s) for c, s in fused if c not in lifted], f"ran: the query is {what}"


def lift_quoted(
    ctx: QueryContext, fused: list[tuple[int, float]]
) -> tuple[list[tuple[int, float]], str]:
    """Rank the candidates holding every quoted phrase of the query before the others.

    Quotes ask for the words together (``"error budget"``): a passage holding the phrase must
    not fall below one holding neither word because its title or its meaning is close (issue
    35). The lexical channel already scores the phrase (:func:`~pinakes_core.index.query.fts_phrases`);
    here the holders keep their fused order and scores, and every other candidate follows in
    its own order with its score capped at the last holder's, so scores never rise with rank.
    FTS5 decides what holds a phrase (its tokenizer and stemmer: ``"error budgets"`` holds
    ``"error budget"``). Nothing moves when the query quotes no span of two words or more, or
    when no candidate holds the phrases. Returns the ranking and what ``explain`` shows.
    """
    phrases = quoted_phrases(ctx.query)
    if not fused or not phrases:
        return fused, "skipped: the query quotes no phrase"
    held = ctx.text_index.holders(phrases, [c for c, _ in fused])
    if not held:
        return fused, "skipped: no candidate holds the quoted phrase(s)"
    head = [(c, s) for c, s in fused if c in held]
    last = head[-1][1]
    tail = [(c, min(s, last)) for c, s in fused if c not in held]
    return head + tail, f"ran: {len(head)} candidate(s) hold the quoted phrase(s)"


#: The reranker ``[retrieval] reader = true`` adds (:mod:`pinakes_core.search.reading`).
READER = "reader"


def default_channels(
    config: RetrievalConfig, *, entities: bool, concepts: bool, reader: bool | None = None
) -> list[str]:
    """The channels a query runs when the caller does not name them.

    ``reader`` overrides ``[retrieval] reader`` (``--no-reader``); the reader runs last, on the
    ranking every other stage made.
    """
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
    if config.reader if reader is None else reader:
        names.append(READER)
    return list(dict.fromkeys(names))


def channel_weights(
    shape: QueryShape, channels: Mapping[str, Any], user: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Each channel's weight in the fused score for a query of this ``shape``.

    Lexical channels share :func:`~pinakes_core.search.fusion.lexical_share` of the weight, semantic
    ones the rest, rank-only channels :data:`RANK_ONLY_WEIGHT`; ``user`` weights (``[retrieval]
    weights``) multiply these.
    """
    lexical = lexical_share(shape)
    weights = {}
    for name, channel in channels.items():
        kind = getattr(channel, "kind", None)
        base = lexical if kind == "lexical" else 1.0 - lexical if kind == "semantic" else None
        if base is None:
            base = RANK_ONLY_WEIGHT
        weights[name] = round(base * (1.0 if user is None else user.get(name, 1.0)), 6)
    return weights


def _evidence(
    ctx: QueryContext, channels: Mapping[str, Any], lists: Mapping[str, Ranked], rrf_k: int
) -> dict[str, dict[int, float]]:
    """Per channel, evidence in [0, 1] for every candidate any list holds."""
    candidates = sorted({c for ranked in lists.values() for c, _ in ranked})
    evidence: dict[str, dict[int, float]] = {}
    for name, ranked in lists.items():
        channel = channels[name]
        if hasattr(channel, "evidence"):
            evidence[name] = channel.evidence(ctx, ranked, candidates)
        else:
            evidence[name] = {c: rank_evidence(r, rrf_k) for r, (c, _) in enumerate(ranked, 1)}
    return evidence


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
    features = extract_features(ctx.query, ranking, evidence)
    if ctx.read:
        from pinakes_core.search.reading import reader_features

        features.update(reader_features(ctx.read, top_chunk))
    return features


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
    min_score: float | None = None,
    group_by: GroupBy = "chunk",
) -> SearchResult:
    """Run ``channels`` on ``ctx``, fuse their evidence and return the top ``k`` hits.

    Each hit's ``score`` is the weighted mean of its evidence in [0, 1] (see
    :mod:`pinakes_core.search.fusion`), after any reranker; hits are sorted by it. ``confidence`` is
    computed with ``calibration`` when one is given and the features' inputs exist (the bm25
    and dense channels both ran and found something); otherwise it is ``None``. With
    ``explain`` the result also carries the confidence features and how the query was ranked
    (``ranking``).

    Args:
        ctx: the query context.
        channels: channel and reranker names to run.
        k: number of hits.
        rrf_k: the RRF constant used for the evidence of rank-only lists.
        explain: add per-channel scores, features and the ranking decisions.
        weights: per-channel multipliers of the adaptive weights (``[retrieval] weights``).
        calibration: the confidence calibration, if any.
        abstain_below: confidence under which the result says ``abstain``.
        offtopic: the embedded off-topic reference queries the off-topic feature compares the
            query with.
        min_score: drop hits scoring below this.
        group_by: ``"document"`` for k distinct documents, each with its best passages.

    Raises:
        PluginMissingError: if a channel is not installed.
    """
    started = time.perf_counter()
    registry = channel_registry(list(channels))
    lists: dict[str, Ranked] = {}
    timings: dict[str, float] = {}
    shape = ctx.shape
    # Channels that start from the fused result of the others (graph expansion, PPR) run in a
    # second stage, with the first stage's fusion as their seeds; rerankers reorder at the end.
    rerankers = {n: c for n, c in registry.items() if hasattr(c, "rerank")}
    listing = {n: c for n, c in registry.items() if n not in rerankers}
    first = {n: c for n, c in listing.items() if not getattr(c, "after_fusion", False)}
    second = {n: c for n, c in listing.items() if getattr(c, "after_fusion", False)}
    mix = channel_weights(shape, listing, weights)
    if "dense" in first:  # its query embedding and row scan overlap the BM25 channel
        ctx.start_dense()
    for channel in registry.values():
        # A channel or reranker may start query-only work now (``prepare(ctx)``, e.g. on the
        # dense worker through ``ctx.on_worker``), so it overlaps the first stage.
        prepare = getattr(channel, "prepare", None)
        if prepare is not None:
            prepare(ctx)
    fused: list[tuple[int, float]] = []
    for stage in (first, second):
        if not stage and fused:
            continue
        if stage is second:
            ctx.seeds = fused
        for name, channel in stage.items():
            t0 = time.perf_counter()
            lists[name] = channel.run(ctx)
            timings[name] = round((time.perf_counter() - t0) * 1000, 3)
        t0 = time.perf_counter()
        fused = combine(_evidence(ctx, registry, lists, rrf_k), mix)
        timings["fuse"] = round(timings.get("fuse", 0.0) + (time.perf_counter() - t0) * 1000, 3)

    stages: dict[str, str] = {}
    for name, reranker in rerankers.items():
        t1 = time.perf_counter()
        # A gated reranker (``gated = True``) has ``wanted(ctx, fused) -> (bool, reason)`` and
        # runs only when it says it can help this query.
        gate = getattr(reranker, "wanted", None) if getattr(reranker, "gated", False) else None
        if gate is not None:
            wanted, why = gate(ctx, fused)
            stages[name] = ("ran: " if wanted else "skipped: ") + why
            if not wanted:
                continue
        fused = reranker.rerank(ctx, fused)
        timings[name] = round((time.perf_counter() - t1) * 1000, 3)
        if name == READER:
            stages[name] = f"ran: read {len(ctx.read)} passages with the query"
    t0 = time.perf_counter()
    fused, stages["phrases"] = lift_quoted(ctx, fused)
    fused, stages["names"] = lift_named(ctx, fused)
    timings["names"] = round((time.perf_counter() - t0) * 1000, 3)
    t0 = time.perf_counter()
    if min_score is not None:
        fused = [(c, s) for c, s in fused if round(s, 6) >= min_score]  # as hits show it
    read = {
        c: round(1.0 / (1.0 + math.exp(-max(min(v, 40.0), -40.0))), 4)
        for c, (_, v) in ctx.read.items()
    }
    hits = build_hits(
        ctx.conn, fused, lists, k=k, explain=explain, group_by=group_by, reader=read or None
    )
    timings["hits"] = round((time.perf_counter() - t0) * 1000, 3)
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
        ranking=RankingInfo(
            shape={
                "identifiers": list(shape.identifiers),
                "quoted": list(shape.quoted),
                "code": shape.code,
                "exact_share": shape.exact_share,
                "cjk_share": shape.cjk_share,
                "question": shape.question,
            },
            weights={n: w for n, w in mix.items() if n in lists},
            stages=stages,
        )
        if explain
        else None,
    )
