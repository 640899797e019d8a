"""Self-calibration of confidence at sync, without labels (DESIGN §5; docs/evaluation.md).

A KB nobody labelled still gets a calibration fitted to its own score distributions:

1. **Positives** are pseudo-questions built from the KB's own chunks, whose source document is
   known (:mod:`pinakes_core.search.synthetic` builds them): a cropped key sentence with its answer-like tokens masked, a heading with a cropped
   sentence, a title question. Each is searched with the KB's default pipeline; its label is
   whether the top hit comes from the source document (so wrong top hits count as negatives,
   as they do in evaluation).
2. **Negatives** are the bundled off-topic queries (``data/offtopic.txt``: general knowledge
   and other domains) and near-misses: a positive whose key term is swapped for a word the KB
   never mentions, or whose identifier (``ADR-012``) is changed to one that does not exist.
3. The features of these searches give the KB's **anchors** (each feature's median on the
   off-topic queries and on the correctly answered positives), so features become positions
   between the two instead of raw cosines and BM25 scores.
4. A logistic model over the positions is fitted on the synthetic labels, shrunk toward the
   prior fitted on the labelled golden set, so the golden set's lessons (paraphrases share few
   words with their answer) survive the synthetic queries' bias toward shared vocabulary.

It costs a few hundred searches whatever the KB's size and reruns only when the KB changed
materially (:func:`stale`). Everything is deterministic: the samples are seeded by the KB id.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from pinakes_core.search.confidence import (
    FEATURES,
    READER_FEATURES,
    TOPIC,
    Calibration,
    fit_logistic,
    prior_calibration,
)
from pinakes_core.search.retrieval import default_channels, fuse_and_build
from pinakes_core.search.synthetic import (
    SyntheticQuery,
    offtopic_hash,
    offtopic_queries,
    synthetic_queries,
)

if TYPE_CHECKING:
    from pinakes_core.config import Config, RetrievalConfig
    from pinakes_core.index.embedding import Embedder
    from pinakes_core.index.store import Store
    from pinakes_core.models import Hit
    from pinakes_core.search.context import QueryContext

__all__ = [
    "CALIBRATION_VERSION",
    "Searchable",
    "SyntheticQuery",
    "load_offtopic",
    "offtopic_queries",
    "reader_key",
    "self_calibrate",
    "stale",
    "synthetic_queries",
]

log = logging.getLogger(__name__)

#: Bumped whenever the synthetic recipe or what a feature measures changes: a stored calibration
#: of another version is refitted at the next sync, and serves until then only while its
#: feature names are the current ones (a feature whose meaning changes gets a new name).
CALIBRATION_VERSION = 2
#: Meta keys in the store.
META_SELF = "self_calibration"
META_OFFTOPIC = "offtopic_vectors"
META_DRIFT = "calibration_drift"
#: Set when a KB was too small to self-calibrate: the signature of that attempt, so a no-change
#: sync does not load the model and search the off-topic bank again for the same answer.
META_SKIPPED = "self_calibration_skipped"

#: Off-topic queries searched at least (all of them on a KB with many pseudo-questions).
MIN_OFFTOPIC_SEARCHES = 80
#: Refit once this share of the documents changed since the last fit.
DRIFT_SHARE = 0.1
#: How the synthetic set is weighted: the golden set's mix (four answerable questions for every
#: unanswerable one) so the fitted intercept means the same thing as the prior's.
ANSWERABLE_WEIGHT = 0.8
#: Strength of the pull toward the golden prior, in synthetic-query units (see docs).
PRIOR_STRENGTH = 1000.0

_WORD = re.compile(r"\w+", re.UNICODE)


def _encode(matrix: npt.NDArray[np.float32]) -> str:
    return base64.b64encode(matrix.astype(np.float16).tobytes()).decode("ascii")


def load_offtopic(store: Store, model_id: str | None) -> npt.NDArray[np.float32] | None:
    """The embedded off-topic queries stored by the last self-calibration, if they still match."""
    raw = store.get_meta(META_OFFTOPIC)
    if not raw:
        return None
    head, _, body = raw.partition(":")
    if head != f"{model_id}|{offtopic_hash()}":
        return None
    try:
        flat = np.frombuffer(base64.b64decode(body), dtype=np.float16).astype(np.float32)
    except ValueError:
        return None
    count = len(offtopic_queries())
    if count == 0 or flat.size % count:
        return None
    return flat.reshape(count, -1)


# -- running and fitting --------------------------------------------------------------------------


class Searchable(Protocol):
    """What self-calibration searches with: a KB's store, config, model and query contexts.

    A :class:`~pinakes_core.search.searcher.Searcher` is one (and so is a
    :class:`~pinakes_core.kb.KB`, which hands its work to its searcher); this module imports
    neither.
    """

    @property
    def config(self) -> Config:
        """The KB's configuration."""
        ...

    @property
    def embedder(self) -> Embedder:
        """The embedding model."""
        ...

    def store(self) -> Store:
        """The open store."""
        ...

    def query_context(
        self, query: str, *, embed_query: Callable[[str], npt.NDArray[np.float32]] | None = None
    ) -> QueryContext:
        """The context of one query over the store, its query embedded by ``embed_query``."""
        ...


def _embed_all(kb: Searchable, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    embedder = kb.embedder
    batch = getattr(embedder, "embed_queries", None)
    if callable(batch):
        return np.asarray(batch(list(texts)), dtype=np.float32)
    return np.stack([embedder.embed_query(t) for t in texts]).astype(np.float32)


def _constant(vector: npt.NDArray[np.float32]) -> Callable[[str], npt.NDArray[np.float32]]:
    """An ``embed_query`` that returns an already computed vector."""
    return lambda _text: vector


def _features_of(
    kb: Searchable,
    queries: Sequence[SyntheticQuery],
    vectors: npt.NDArray[np.float32],
    offtopic: npt.NDArray[np.float32],
    progress: Callable[[int, int], None],
) -> list[tuple[SyntheticQuery, dict[str, float], bool]]:
    """Search every query with the KB's default pipeline; return its features and label."""
    cfg = kb.config.retrieval
    names = default_channels(cfg, entities=False, concepts=False)
    bank_index = {text: i for i, text in enumerate(offtopic_queries())}
    rows = []
    for number, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
        reference = offtopic
        if query.kind == "offtopic":
            # Leave the query itself out of the reference it is compared with.
            reference = np.delete(offtopic, bank_index[query.text], axis=0)
        ctx = kb.query_context(query.text, embed_query=_constant(vector))
        result = fuse_and_build(
            ctx,
            names,
            k=10,
            rrf_k=cfg.rrf_k,
            explain=True,
            weights=cfg.weights,
            offtopic=reference,
        )
        if result.features is not None and result.hits:
            correct = query.kind == "positive" and result.hits[0].doc_id == query.source_doc
            if correct or not _ambiguous(query, result.hits[0]):
                rows.append((query, result.features, correct))
        progress(number + 1, len(queries))
    return rows


def _ambiguous(query: SyntheticQuery, top: Hit) -> bool:
    """Whether a positive's top hit, from another document, holds every word it was built from.

    Docs repeat themselves (a command's page and its parent's list, a topic note and the
    changelog entry announcing it, two job ads sharing a paragraph): a pseudo-question built
    from such text cannot say which copy is right. Counted as wrong, it would teach the model
    that a top hit holding every query word is often wrong; it is left out instead.
    """
    if query.kind != "positive" or not query.words:
        return False
    held = {
        w.lower() for w in _WORD.findall(f"{top.title} {' '.join(top.heading_path)} {top.text}")
    }
    return {w.lower() for w in query.words} <= held


def anchors(
    rows: Sequence[tuple[SyntheticQuery, dict[str, float], bool]],
    names: Sequence[str] = FEATURES,
) -> tuple[list[float], list[float]]:
    """Per-feature off-topic anchor and scale from labelled synthetic rows (over ``names``)."""
    x = np.array([[f[n] for n in names] for _, f, _ in rows], dtype=np.float64)
    off_rows = np.array([q.kind == "offtopic" for q, _, _ in rows])
    pos_rows = np.array([ok for _, _, ok in rows])
    off = np.median(x[off_rows], axis=0) if off_rows.any() else x.min(axis=0)
    pos = np.median(x[pos_rows], axis=0) if pos_rows.any() else x.max(axis=0)
    # A feature whose two medians coincide (a binary one, say) is scaled by its spread instead.
    scale = np.maximum(np.abs(pos - off), np.maximum(x.std(axis=0), 1e-3))
    return [round(float(v), 6) for v in off], [round(float(v), 6) for v in scale]


def weights_of(
    rows: Sequence[tuple[SyntheticQuery, dict[str, float], bool]],
) -> npt.NDArray[np.float64]:
    """Row weights giving answerable and unanswerable queries the golden set's mix."""
    kinds = np.array([q.kind for q, _, _ in rows])
    w = np.zeros(len(rows))
    groups = {"positive": ANSWERABLE_WEIGHT, "nearmiss": (1 - ANSWERABLE_WEIGHT) / 2}
    groups["offtopic"] = (1 - ANSWERABLE_WEIGHT) / 2
    present = {k: v for k, v in groups.items() if (kinds == k).any()}
    total = sum(present.values())
    for kind, share in present.items():
        mask = kinds == kind
        w[mask] = share / total / mask.sum()
    return w * len(rows)


def _prior_for(prior: Calibration | None, names: Sequence[str]) -> Calibration | None:
    """``prior``, or its base, when it is over exactly ``names``."""
    for candidate in (prior, prior.base if prior is not None else None):
        if candidate is not None and candidate.features == list(names):
            return candidate
    return None


#: Pull toward 0 of a reader coefficient the prior has no value for (synthetic-query units).
READER_L2 = 1.0


def fit_self(
    rows: Sequence[tuple[SyntheticQuery, dict[str, float], bool]],
    prior: Calibration | None,
    model_id: str,
    *,
    strength: float = PRIOR_STRENGTH,
) -> Calibration:
    """Fit a KB's calibration on its synthetic rows, shrunk toward ``prior``'s coefficients.

    When the rows were searched with the reader (their features hold :data:`READER_FEATURES`),
    the calibration reads them too, and keeps the one over :data:`FEATURES` alone, fitted on
    the same rows, as its ``base``; the reader's rows that lack them (the reader did not read
    the top hit) train only the base.
    """
    read = [row for row in rows if all(n in row[1] for n in READER_FEATURES)]
    base_prior = _prior_for(prior, FEATURES)
    base = _fit(rows, base_prior, model_id, FEATURES, strength)
    if not read or not any(q.kind == "offtopic" for q, _, _ in read):
        return base
    names = (*FEATURES, *READER_FEATURES)
    reader_prior = _prior_for(prior, names)
    if reader_prior is None and base_prior is not None:
        # A prior fitted before the reader: its coefficients still hold the golden set's
        # lessons for the other features; the reader's are learnt from the synthetic queries.
        reader_prior = base_prior.model_copy(
            update={"features": list(names), "coef": [*base_prior.coef, 0.0, 0.0]}
        )
        weights = [strength] * len(FEATURES) + [READER_L2] * len(READER_FEATURES)
        return _fit(read, reader_prior, model_id, names, weights).model_copy(update={"base": base})
    return _fit(read, reader_prior, model_id, names, strength).model_copy(update={"base": base})


def _fit(
    rows: Sequence[tuple[SyntheticQuery, dict[str, float], bool]],
    prior: Calibration | None,
    model_id: str,
    names: Sequence[str],
    strength: float | Sequence[float],
) -> Calibration:
    off, scale = anchors(rows, names)
    x = np.array([[f[n] for n in names] for _, f, _ in rows], dtype=np.float64)
    y = np.array([1.0 if ok else 0.0 for _, _, ok in rows])
    z = (x - np.array(off)) / np.array(scale)
    center = prior.coef if prior is not None else None
    coef, intercept = fit_logistic(
        z, y, names=names, weights=weights_of(rows), center=center, l2=strength if center else 1.0
    )
    kinds = [q.kind for q, _, _ in rows]
    gate = fit_gate(rows)
    return Calibration(
        model_id=model_id,
        kind="self",
        features=list(names),
        off=off,
        scale=scale,
        coef=[round(float(c), 6) for c in coef],
        intercept=round(intercept, 6),
        fitted_on=(
            f"self-calibration v{CALIBRATION_VERSION}: {kinds.count('positive')} pseudo-questions, "
            f"{kinds.count('nearmiss')} near-misses, {kinds.count('offtopic')} off-topic queries"
        ),
        n=len(rows),
        gate=gate,
    )


def fit_gate(rows: Sequence[tuple[SyntheticQuery, dict[str, float], bool]]) -> list[float]:
    """The off-topic gate: a logistic on ``topic_margin``, pseudo-questions vs off-topic queries.

    Both groups weigh the same, so the gate says 0.5 where a query is as typical of one as of
    the other. Empty when either group is missing.
    """
    on = np.array([q.kind == "positive" for q, _, _ in rows])
    off = np.array([q.kind == "offtopic" for q, _, _ in rows])
    if not on.any() or not off.any():
        return []
    keep = on | off
    x = np.array([[f.get(TOPIC, 0.0)] for _, f, _ in rows])[keep]
    y = on[keep].astype(np.float64)
    w = np.where(y == 1, ANSWERABLE_WEIGHT / on.sum(), (1 - ANSWERABLE_WEIGHT) / off.sum()) * len(y)
    mean, std = float(x.mean()), float(x.std()) or 1.0
    coef, intercept = fit_logistic((x - mean) / std, y, names=[TOPIC], weights=w, l2=1.0)
    slope = float(coef[0]) / std
    return [round(slope, 6), round(intercept - slope * mean, 6)]


def run_synthetic(
    kb: Searchable, *, progress: Callable[[int, int], None] | None = None, seed: str | None = None
) -> tuple[list[tuple[SyntheticQuery, dict[str, float], bool]], npt.NDArray[np.float32]]:
    """Build and search the KB's synthetic queries.

    Args:
        kb: what searches: a :class:`~pinakes_core.search.searcher.Searcher` (or a KB).
        progress: called with (done, total) as the queries are searched.
        seed: what seeds the samples instead of the KB id (the sample another KB with the same
            documents would draw; ``benchmarks/fit_calibration.py`` cross-validates over them).

    Returns:
        The labelled rows ``(query, features, top hit correct)`` and the embedded off-topic
        queries.
    """
    store = kb.store()
    seed = kb.config.kb.id if seed is None else seed
    # The store's text index counts the near-misses' words (FTS5, or PostgreSQL's postings).
    queries = synthetic_queries(store.conn, seed, text_index=kb.query_context("").text_index)
    bank = offtopic_queries()
    vectors = _embed_all(kb, [*(q.text for q in queries), *bank])
    offtopic = vectors[len(queries) :]
    # Every off-topic query is embedded (the off-topic feature compares with all of them), but
    # a small KB searches only a sample: its few pseudo-questions need no more to be placed.
    wanted = min(len(bank), max(MIN_OFFTOPIC_SEARCHES, 2 * len(queries)))
    sample = sorted(random.Random(seed).sample(range(len(bank)), wanted))
    searched = [*queries, *(SyntheticQuery(bank[i], "offtopic") for i in sample)]
    searched_vectors = np.concatenate([vectors[: len(queries)], offtopic[sample]])
    rows = _features_of(kb, searched, searched_vectors, offtopic, progress or (lambda d, t: None))
    return rows, offtopic


def self_calibrate(
    kb: Searchable, *, progress: Callable[[int, int], None] | None = None
) -> Calibration | None:
    """Fit and store the KB's own calibration from synthetic queries; return it.

    Returns ``None`` (and stores nothing) when the KB is too small to sample from or no
    synthetic query found a correct top hit.
    """
    started = time.perf_counter()
    store = kb.store()
    reader = reader_key(kb.config.retrieval)
    model_id = store.get_meta("model_id") or kb.embedder.model_id
    rows, offtopic = run_synthetic(kb, progress=progress)
    if not any(ok for _, _, ok in rows) or not any(q.kind == "offtopic" for q, _, _ in rows):
        attempt = {**_signature(store, reader), "model": model_id}
        with store.transaction() as conn:
            store.set_meta(conn, META_SKIPPED, json.dumps(attempt, sort_keys=True))
            store.set_meta(conn, META_DRIFT, "0")
        log.info("Pinakes: too little text to self-calibrate; confidence uses the prior.")
        return None
    calibration = fit_self(rows, prior_calibration(), model_id).model_copy(
        update={"signature": _signature(store, reader)}
    )
    with store.transaction() as conn:
        conn.execute("DELETE FROM meta WHERE key = ?", (META_SKIPPED,))
        store.set_meta(conn, META_SELF, calibration.model_dump_json())
        store.set_meta(conn, META_OFFTOPIC, f"{model_id}|{offtopic_hash()}:{_encode(offtopic)}")
        store.set_meta(conn, META_DRIFT, "0")
    log.info(
        "Pinakes: self-calibrated confidence on %d synthetic queries in %.1f s.",
        len(rows),
        time.perf_counter() - started,
    )
    return calibration


def _prior_digest() -> int:
    prior = prior_calibration()
    text = prior.model_dump_json() if prior is not None else ""
    return int(hashlib.blake2b(text.encode(), digest_size=4).hexdigest(), 16)


def reader_key(retrieval: RetrievalConfig) -> int:
    """What a calibration must have been fitted with for searches of this configuration.

    0 when they do not read; else a number that changes with the reader model and with how it
    reranks (``reader_top_n``, ``reader_weight``): either changes the top hits the synthetic
    queries' labels come from.
    """
    if not retrieval.reader:
        return 0
    from pinakes_core.search.reader import (
        reader_signature,  # its module only: no model, no onnxruntime
    )

    key = f"{reader_signature()}|{retrieval.reader_top_n}|{retrieval.reader_weight:.4f}"
    return int(hashlib.blake2b(key.encode(), digest_size=4).hexdigest(), 16) or 1


def _signature(store: Store, reader: int) -> dict[str, int]:
    conn = store.conn
    return {
        "version": CALIBRATION_VERSION,
        "prior": _prior_digest(),
        # The reader model the calibration read with (0: none), so a new model refits it.
        "reader": reader,
        "documents": int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]),
        "chunks": int(conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]),
    }


def stored(store: Store) -> Calibration | None:
    """The KB's stored self-calibration, or ``None`` (absent, or over other features).

    One fitted by an earlier recipe (another :data:`CALIBRATION_VERSION`) over the same
    features still serves, off-topic gate included, until the next sync refits it
    (:func:`stale`): falling back to the prior would drop the gate in between.
    """
    raw = store.get_meta(META_SELF)
    if not raw:
        return None
    try:
        calibration = Calibration.model_validate_json(raw)
    except ValidationError:
        return None
    if calibration.features not in (list(FEATURES), [*FEATURES, *READER_FEATURES]):
        return None
    return calibration


def add_drift(store: Store, changed: int) -> None:
    """Count ``changed`` documents (added, changed or removed) toward the next refit."""
    if changed <= 0:
        return
    drift = int(store.get_meta(META_DRIFT) or 0) + changed
    with store.transaction() as conn:
        store.set_meta(conn, META_DRIFT, str(drift))


def _skipped(store: Store) -> dict[str, object] | None:
    raw = store.get_meta(META_SKIPPED)
    try:
        return dict(json.loads(raw)) if raw else None
    except (ValueError, TypeError):
        return None


def stale(store: Store, *, reader: int = 0) -> bool:
    """Whether the KB needs a (new) self-calibration.

    True when there is none, it is of another version or model, it was fitted with another
    ``reader`` key (:func:`reader_key`: the reader on or off, its model, N or weight), or more than
    :data:`DRIFT_SHARE` of the documents changed since it was fitted (at least one document
    on a small KB). A KB found too small to self-calibrate is not retried until a document
    changes (or the version, prior or model does).
    """
    calibration = stored(store)
    if calibration is None:
        return _skipped(store) != {
            **_signature(store, reader),
            "model": store.get_meta("model_id"),
        } or (int(store.get_meta(META_DRIFT) or 0) > 0)
    if calibration.model_id != store.get_meta("model_id"):
        return True
    if calibration.signature.get("version") != CALIBRATION_VERSION:
        return True
    if calibration.signature.get("prior") != _prior_digest():
        return True
    if calibration.signature.get("reader", 0) != reader:
        return True
    if load_offtopic(store, calibration.model_id) is None:
        return True
    drift = int(store.get_meta(META_DRIFT) or 0)
    return drift > DRIFT_SHARE * max(calibration.signature.get("documents", 0), 10)
