"""The entity layer of the graph, derived at sync (DESIGN §6, §7).

Two steps, each cheap when nothing changed:

1. **Extraction** runs the spaCy pipeline on the embedded texts (``title › headings`` + chunk
   text) that have no entry in ``ner_texts`` yet, keyed by the chunk's ``embed_hash``: an
   unchanged chunk, a chunk whose text another document already has, or a re-sync costs no
   model call. Results are committed a group at a time, so an interrupted sync keeps its work.
2. **The layer** (entity nodes, ``entity_aliases``, ``mentions`` edges, label vectors) is
   rebuilt from ``ner_texts`` whenever documents changed, in one transaction. Rebuilding it
   whole keeps the near-duplicate merge consistent (a new "Michelle Obama" makes "Obama"
   ambiguous for every chunk that says it) and costs a fraction of a second per thousand
   documents. Only the labels the near-duplicate merge compares are embedded (every label
   when queries match labels by embedding, :func:`embeds_every_label`), and only those not
   in the store yet.

Entity nodes are keyed by the normalised surface form (:func:`~pinakes_ner.normalise.entity_key`).
A mention edge runs from the entity node to the chunk node and weighs ``count / entity mentions
in the chunk`` (DESIGN §6) × ``1 / documents mentioning the entity``: the same hub damping
tags get, so an entity every page names ("Nushell" in its own manual) carries almost no mass
into the walk — glue, not signal (``pnk doctor`` lists such entities).

The graph plugin's own derivation runs first (this hook is ``trylast``). It never writes
``mentions`` edges; when it rebuilds the graph from scratch it deletes every node, entities
included, which this module notices (the entity count no longer matches what it wrote) and
answers by rebuilding the layer from ``ner_texts`` — without running the model again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.index.writer import stored_embed_text
from pinakes_ner import extract
from pinakes_ner.normalise import contains, entity_key

__all__ = [
    "GLUE_SHARE",
    "containment_candidates",
    "derive_layer",
    "drop_layer",
    "embeds_every_label",
    "label_hash",
    "merge_near_duplicates",
]

log = logging.getLogger(__name__)

#: Texts extracted per transaction (a crash loses at most this much work).
GROUP = 512
#: An entity named by more than this share of the documents (in a KB of at least
#: :data:`GLUE_MIN_DOCS`) is reported as glue by ``pnk doctor``.
GLUE_SHARE = 0.1
GLUE_MIN_DOCS = 20
#: Bumped when the layer's derivation changes, so stores rebuild their layer once.
LAYER_VERSION = "1"
_TITLE_SEP = " › "


def label_hash(label: str) -> str:
    """The ``vectors`` key of an embedded node label (the graph plugin's scheme for tags)."""
    return hashlib.blake2b(f"label:{label}".encode(), digest_size=16).hexdigest()


def _ner_text(row: Any) -> str:
    """The text the recogniser reads: the embedded text with its breadcrumb line split.

    ``Title › Heading`` followed by the chunk would read as one sentence; one line per part
    keeps the recogniser from running a title into the chunk's first words.
    """
    first, _, rest = stored_embed_text(row).partition("\n")
    return first.replace(_TITLE_SEP, ".\n") + ".\n\n" + rest


def _extract_new(store: Any, model: str) -> int:
    """Run the recogniser on every embedded text not in ``ner_texts``; return how many."""
    conn: sqlite3.Connection = store.conn
    if store.get_meta("ner_model") != model:
        with store.transaction() as tx:
            tx.execute("DELETE FROM ner_texts")
            store.set_meta(tx, "ner_model", model)
    rows = conn.execute(
        "SELECT c.embed_hash, d.title, c.heading_path, c.text, c.ordinal, c.start_line, "
        "c.end_line, c.tokens FROM chunks c JOIN documents d USING (doc_id) "
        "LEFT JOIN ner_texts n ON n.embed_hash = c.embed_hash WHERE n.embed_hash IS NULL"
    ).fetchall()
    todo = {r["embed_hash"]: r for r in rows}
    if not todo:
        return 0
    hashes = list(todo)
    for start in range(0, len(hashes), GROUP):
        part = hashes[start : start + GROUP]
        found = extract.extract(_ner_text(todo[h]) for h in part)
        results = [
            (h, json.dumps(ents, ensure_ascii=False)) for h, ents in zip(part, found, strict=True)
        ]
        with store.transaction() as tx:
            tx.executemany(
                "INSERT INTO ner_texts(embed_hash, entities) VALUES (?, ?) "
                "ON CONFLICT (embed_hash) DO UPDATE SET entities = excluded.entities",
                results,
            )
    return len(hashes)


@dataclass
class _Mentions:
    """Entity mentions of the KB after the type filter, by key."""

    chunks: dict[tuple[str, int], Counter[str]] = field(default_factory=dict)
    surfaces: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    types: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def label(self, key: str) -> str:
        return self.surfaces[key].most_common(1)[0][0]


def _mentions(conn: sqlite3.Connection, types: Iterable[str]) -> _Mentions:
    allowed = set(types)
    found = _Mentions()
    for doc_id, ordinal, payload in conn.execute(
        "SELECT c.doc_id, c.ordinal, n.entities FROM chunks c JOIN ner_texts n USING (embed_hash)"
    ):
        counts: Counter[str] = Counter()
        for surface, kind, n in json.loads(payload):
            key = entity_key(surface) if kind in allowed else None
            if key is not None:
                counts[key] += n
                found.surfaces[key][surface] += n
                found.types[key][kind] += n
        if counts:
            found.chunks[doc_id, ordinal] = counts
    return found


def _label_vectors(
    store: Any, conn: sqlite3.Connection, labels: list[str], embedder: Callable[[], Any]
) -> npt.NDArray[np.float32]:
    """Unit vectors of ``labels`` (rows in order), embedding only labels never seen before."""
    hashes = [label_hash(label) for label in labels]
    known: dict[str, bytes] = {}
    unique = list(dict.fromkeys(hashes))
    for i in range(0, len(unique), 500):
        part = unique[i : i + 500]
        known.update(
            conn.execute(
                f"SELECT embed_hash, vector FROM vectors WHERE embed_hash IN ({','.join('?' * len(part))})",
                part,
            ).fetchall()
        )
    todo = {h: label for h, label in zip(hashes, labels, strict=True) if h not in known}
    if todo:
        fresh = np.asarray(embedder().embed_documents(list(todo.values())), dtype=np.float32)
        store.put_vectors(conn, {h: fresh[i] for i, h in enumerate(todo)})
        known.update((h, fresh[i].tobytes()) for i, h in enumerate(todo))
    if not labels:
        return np.zeros((0, 1), dtype=np.float32)
    return np.stack([np.frombuffer(known[h], dtype=np.float32) for h in hashes])


def containment_candidates(keys: Iterable[str]) -> dict[str, list[str]]:
    """Map each key that longer keys contain as whole words to those keys, in ``keys`` order.

    These are the only pairs :func:`merge_near_duplicates` ever compares, so they are the only
    labels whose embeddings the merge needs ("obama" → ["barack obama", "michelle obama"]).
    """
    keys = list(keys)
    by_word: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        for word in set(key.split()):
            by_word[word].append(key)
    found: dict[str, list[str]] = {}
    for short in keys:
        # The rarest word's keys hold every key containing ``short``.
        pool = min((by_word[w] for w in short.split()), key=len)
        longer = [k for k in pool if contains(short, k)]
        if longer:
            found[short] = longer
    return found


def merge_near_duplicates(
    keys: list[str],
    similarity: Callable[[str, list[str]], npt.NDArray[np.float64]],
    threshold: float,
    candidates: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Map each key to the key of the entity it is a near-duplicate of (itself if none).

    A key merges into a longer key that contains it as whole words ("obama" → "barack obama",
    "raft" → "raft paper") when their label similarity is at least ``threshold``. A key that
    would merge into two different entities ("obama" with both "barack obama" and "michelle
    obama" in the KB) is ambiguous and stays on its own: merging is never transitive through a
    shared short form.

    Args:
        keys: the entity keys.
        similarity: ``similarity(key, others)`` → label cosine of ``key`` to each of ``others``;
            called only for the pairs of ``candidates``.
        threshold: the minimum label cosine to merge.
        candidates: :func:`containment_candidates` of ``keys`` when the caller has them.
    """
    if candidates is None:
        candidates = containment_candidates(keys)
    parent: dict[str, str] = {}
    # Longest first, so a longer key's own merge is known before shorter keys resolve to it.
    for short in sorted(candidates, key=lambda k: (-len(k), k)):
        longer = candidates[short]
        scores = similarity(short, longer)
        targets = {_root(parent, k) for k, s in zip(longer, scores, strict=True) if s >= threshold}
        if len(targets) == 1:
            parent[short] = targets.pop()
    return {key: _root(parent, key) for key in keys}


def _root(parent: dict[str, str], key: str) -> str:
    while key in parent:
        key = parent[key]
    return key


def drop_layer(store: Any) -> bool:
    """Remove entity nodes, aliases and mention edges (NER turned off); return whether any were."""
    conn: sqlite3.Connection = store.conn
    if conn.execute("SELECT 1 FROM nodes WHERE kind = 'entity' LIMIT 1").fetchone() is None and (
        store.get_meta("ner_settings") is None
    ):
        return False
    with store.transaction() as tx:
        tx.execute("DELETE FROM nodes WHERE kind = 'entity'")
        tx.execute("DELETE FROM meta WHERE key IN ('ner_settings', 'ner_serial', 'ner_nodes')")
    return True


def derive_layer(kb: Any, store: Any, changed: list[str], removed: list[str]) -> None:
    """Bring the entity layer up to date after a sync (the ``after_sync`` hook's work)."""
    cfg = kb.config.ner
    if not cfg.enabled:
        if drop_layer(store):
            log.info("ner: disabled; entity layer removed")
        return
    conn: sqlite3.Connection = store.conn
    serial = int(store.get_meta("sync_serial") or 0)
    settings = json.dumps(
        {
            "types": sorted(cfg.types),
            "near_duplicate": cfg.near_duplicate,
            "every_label": embeds_every_label(cfg),
            "v": LAYER_VERSION,
        }
    )
    extracted = _extract_new(store, extract.model_id())
    nodes = conn.execute("SELECT COUNT(*) FROM nodes WHERE kind = 'entity'").fetchone()[0]
    current = (
        store.get_meta("ner_serial") == str(serial - 1)
        and store.get_meta("ner_settings") == settings
        and store.get_meta("ner_nodes") == str(nodes)
    )
    if current and not (changed or removed or extracted):
        with store.transaction() as tx:
            store.set_meta(tx, "ner_serial", str(serial))
        return
    with store.transaction() as tx:
        written = _rebuild(store, tx, kb, cfg)
        # Texts no chunk has any more (edited away) are forgotten, as their vectors are. NOT
        # EXISTS (an anti join), not NOT IN (SELECT …), which PostgreSQL runs as a rescan of
        # the chunks' hashes per text once they outgrow work_mem (> 120 s at 274k, 0.16 s so).
        tx.execute(
            "DELETE FROM ner_texts WHERE NOT EXISTS "
            "(SELECT 1 FROM chunks c WHERE c.embed_hash = ner_texts.embed_hash)"
        )
        store.set_meta(tx, "ner_serial", str(serial))
        store.set_meta(tx, "ner_settings", settings)
        store.set_meta(tx, "ner_nodes", str(written))
    log.info("ner: %d texts extracted, %d entities", extracted, written)


def _rebuild(store: Any, conn: sqlite3.Connection, kb: Any, cfg: Any) -> int:
    """Rewrite the whole entity layer from ``ner_texts``; return the number of entity nodes."""
    conn.execute("DELETE FROM nodes WHERE kind = 'entity'")  # aliases, edges, vectors cascade
    found = _mentions(conn, cfg.types)
    keys = sorted(found.surfaces)
    labels = {key: found.label(key) for key in keys}
    candidates = containment_candidates(keys)
    embedded = keys if embeds_every_label(cfg) else _paired(keys, candidates)
    vectors = _label_vectors(store, conn, [labels[k] for k in embedded], lambda: kb.embedder)
    row = {key: i for i, key in enumerate(embedded)}

    def similarity(key: str, others: list[str]) -> npt.NDArray[np.float64]:
        rows = vectors[[row[o] for o in others]]
        return np.asarray(rows @ vectors[row[key]], dtype=np.float64)

    canonical = merge_near_duplicates(keys, similarity, cfg.near_duplicate, candidates)
    # Chunk nodes exist when the graph plugin derived them; otherwise this layer adds them.
    chunk_node = {
        key: int(node)
        for node, key in conn.execute("SELECT node_id, key FROM nodes WHERE kind = 'chunk'")
    }
    per_chunk: dict[int, Counter[str]] = {}
    docs: dict[str, set[str]] = defaultdict(set)
    for (doc_id, ordinal), counts in found.chunks.items():
        node_key = f"{doc_id}:{ordinal}"
        node = chunk_node.get(node_key)
        if node is None:
            node = int(
                conn.execute(
                    "INSERT INTO nodes(kind, key, label) VALUES ('chunk', ?, '') RETURNING node_id",
                    (node_key,),
                ).fetchall()[0][0]  # read to the end: SQLite finishes the statement only then
            )
        merged: Counter[str] = Counter()
        for key, n in counts.items():
            merged[canonical[key]] += n
            docs[canonical[key]].add(doc_id)
        per_chunk[node] = merged
    entity_node: dict[str, int] = {}
    for key in sorted(docs):
        entity_node[key] = int(
            conn.execute(
                "INSERT INTO nodes(kind, key, label) VALUES ('entity', ?, ?) RETURNING node_id",
                (key, labels[key]),
            ).fetchall()[0][0]
        )
    conn.executemany(
        "INSERT INTO entity_aliases(alias, node_id) VALUES (?, ?)",
        [(key, entity_node[canonical[key]]) for key in keys if canonical[key] in entity_node],
    )
    edges = []
    for chunk, counts in per_chunk.items():
        total = sum(counts.values())
        for key, n in counts.items():
            edges.append((entity_node[key], chunk, n / total / len(docs[key])))
    conn.executemany(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'mentions', ?)", edges
    )
    conn.executemany(
        "INSERT INTO node_vectors(node_id, embed_hash) VALUES (?, ?)",
        [(node, label_hash(labels[key])) for key, node in entity_node.items() if key in row],
    )
    return len(entity_node)


def embeds_every_label(cfg: Any) -> bool:
    """Whether every entity label is embedded, not only those the near-duplicate merge compares.

    Only the query side's embedding match (``query_model``, used when entities seed PPR or
    become ``entities=``) looks for the closest of *all* labels; at the defaults nothing does,
    and embedding each label of a large KB costs more than the rest of the layer together.
    """
    return bool(cfg.query_model and (cfg.seed_mass > 0 or cfg.auto_entities))


def _paired(keys: list[str], candidates: dict[str, list[str]]) -> list[str]:
    """The keys in at least one containment pair, in ``keys`` order."""
    paired = set(candidates).union(*candidates.values())
    return [key for key in keys if key in paired]
