"""Entities named in a query: PPR seeds and the automatic ``entities=`` list (DESIGN §6, §7).

Two matchers, merged:

* **the KB's own labels**: the query's word n-grams looked up among every alias of every entity
  node (``entity_aliases``), longest match first. It needs no model and finds entities a
  lower-case query names ("who directed the raft paper"); a one-word alias matches only a word
  the query writes with a capital or a digit, so "apply" in "how do I apply a filter" is not
  the noise entity "Apply".
* **the spaCy pipeline** (``[ner] query_model``): entities it finds in the query that are not
  aliases are matched to the closest entity label by embedding cosine, at the near-duplicate
  threshold ("Obama" → "Barack Obama" when only the long form is in the KB).

Seeds weigh ``match / chunks the entity is mentioned in`` (HippoRAG 2's node specificity),
scaled so together they carry ``[ner] seed_mass`` of the personalisation.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_ner.normalise import MAX_WORDS, entity_key

__all__ = ["QueryEntity", "entities_in", "seeds_for"]

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_MAX_ENTITIES = 5
_CACHE_QUERIES = 64


@dataclass(frozen=True)
class QueryEntity:
    """An entity node a query names."""

    node_id: int
    label: str
    score: float  # 1.0 for an alias match, the label cosine for an embedding match
    chunks: int  # chunks mentioning it


@dataclass
class _Index:
    aliases: dict[str, int]
    labels: dict[int, str]
    chunks: dict[int, int]
    nodes: npt.NDArray[np.int64]
    vectors: npt.NDArray[np.float32]
    answers: OrderedDict[str, list[QueryEntity]]


_INDEX: weakref.WeakKeyDictionary[Any, tuple[int, _Index]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _build(conn: Any) -> _Index:
    aliases = {str(a): int(n) for a, n in conn.execute("SELECT alias, node_id FROM entity_aliases")}
    labels = {
        int(n): str(label)
        for n, label in conn.execute("SELECT node_id, label FROM nodes WHERE kind = 'entity'")
    }
    chunks = {
        int(n): int(c)
        for n, c in conn.execute(
            "SELECT src, COUNT(*) FROM edges WHERE kind = 'mentions' GROUP BY src"
        )
    }
    rows = conn.execute(
        "SELECT nv.node_id, v.vector FROM node_vectors nv JOIN nodes n USING (node_id) "
        "JOIN vectors v USING (embed_hash) WHERE n.kind = 'entity' ORDER BY nv.node_id"
    ).fetchall()
    nodes = np.array([r[0] for r in rows], dtype=np.int64)
    vectors = (
        np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
        if rows
        else np.zeros((0, 1), dtype=np.float32)
    )
    return _Index(aliases, labels, chunks, nodes, vectors, OrderedDict())


def _index(kb: Any) -> _Index:
    store = kb.store()
    generation = store.generation()
    with _LOCK:
        cached = _INDEX.get(kb)
        if cached is None or cached[0] != generation:
            cached = (generation, _build(store.conn))
            _INDEX[kb] = cached
        return cached[1]


def _alias_matches(query: str, index: _Index) -> dict[int, float]:
    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(query)]
    words = [t.casefold() for t, _ in tokens]
    found: dict[int, float] = {}
    i = 0
    while i < len(words):
        for n in range(min(MAX_WORDS, len(words) - i), 0, -1):
            node = index.aliases.get(" ".join(words[i : i + n]))
            if node is None:
                continue
            surface = tokens[i][0]
            if n == 1 and (surface.islower() or words[i] in _ARTICLE_LIKE):
                continue  # a plain lower-case word is a word, not a name
            found.setdefault(node, 1.0)
            i += n - 1
            break
        i += 1
    return found


#: One-word aliases never matched from a query, whatever their case (sentence-initial words).
_ARTICLE_LIKE = frozenset({"who", "what", "which", "when", "where", "how", "why", "is", "are"})


def _model_matches(kb: Any, query: str, index: _Index, known: dict[int, float]) -> None:
    from pinakes_ner import extract

    allowed = set(kb.config.ner.types)
    (entities,) = list(extract.extract([query]))
    surfaces = [s for s, kind, _ in entities if kind in allowed]
    missing = []
    for surface in surfaces:
        key = entity_key(surface)
        if key is None:
            continue
        node = index.aliases.get(key)
        if node is not None:
            known.setdefault(node, 1.0)
        else:
            missing.append(surface)
    if missing and index.nodes.size and index.vectors.shape[1] > 1:
        threshold = kb.config.ner.near_duplicate
        for surface in missing:
            vector = np.asarray(kb.embedder.embed_query(surface), dtype=np.float32)
            if vector.shape[0] != index.vectors.shape[1]:
                return
            scores = index.vectors @ vector
            best = int(np.argmax(scores))
            if scores[best] >= threshold:
                node = int(index.nodes[best])
                known[node] = max(known.get(node, 0.0), float(scores[best]))


def entities_in(kb: Any, query: str) -> list[QueryEntity]:
    """The entity nodes ``query`` names, best first (at most five); empty without NER."""
    if not kb.config.ner.enabled or not query.strip():
        return []
    index = _index(kb)
    if not index.aliases:
        return []
    cached = index.answers.get(query)
    if cached is not None:
        return cached
    found = _alias_matches(query, index)
    if kb.config.ner.query_model:
        _model_matches(kb, query, index, found)
    ranked = sorted(
        (
            QueryEntity(node, index.labels.get(node, ""), score, index.chunks.get(node, 0))
            for node, score in found.items()
            if index.chunks.get(node, 0) > 0
        ),
        key=lambda e: (-e.score, e.chunks, e.label),
    )[:_MAX_ENTITIES]
    with _LOCK:
        index.answers[query] = ranked
        while len(index.answers) > _CACHE_QUERIES:
            index.answers.popitem(last=False)
    return ranked


def seeds_for(kb: Any, query: str) -> list[tuple[int, float]]:
    """PPR seeds for ``query``: ``(node_id, mass)`` summing to ``[ner] seed_mass``, or empty."""
    mass = kb.config.ner.seed_mass
    entities = entities_in(kb, query) if mass > 0 else []
    if not entities:
        return []
    weights = np.array([e.score / max(e.chunks, 1) for e in entities], dtype=np.float64)
    weights *= mass / weights.sum()
    return [(e.node_id, float(w)) for e, w in zip(entities, weights, strict=True)]
