"""Edge derivation: the graph a KB already is (DESIGN §6).

Nodes: ``chunk`` (key ``<doc>:<ordinal>``), ``doc`` (key: doc ULID), ``heading`` (per document,
key ``<doc>#<heading path>``), ``tag`` (KB-wide), ``dir`` (folder path, ``""`` for the root).
Shared-value relations go through a hub node (tag, dir, heading) so they cost one edge per
member instead of one per pair; a hub edge weighs ``[graph] <kind> / hub size``.

Derivation is incremental: a changed document's own nodes and edges are rebuilt, the hubs it
leaves or joins get their weights recomputed, and link edges are re-derived only for documents
whose links (or their resolution) changed.

Each pass runs per batch of :data:`BATCH` documents (or hubs), a fixed number of statements a
batch, not a few statements per node and edge: on PostgreSQL every statement is a round trip.
"""

from __future__ import annotations

import itertools
import json
import logging
import posixpath
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np

from pinakes_core.config import GraphConfig
from pinakes_graph.mentions import derive_mentions
from pinakes_graph.sql import marks

__all__ = ["HUB_KINDS", "LINK_EDGE", "derive_edges", "heading_key"]

log = logging.getLogger(__name__)

#: Edge kind stored for each link origin.
LINK_EDGE = {"sidecar": "authored", "frontmatter": "authored", "reverse-scan": "reverse-scan"}
#: Hub edge kinds and the config weight each multiplies.
HUB_KINDS = {"in-section": "in_section", "co-located": "co_located", "shared-tag": "shared_tag"}
_SEP = " › "


def heading_key(doc_id: str, path: Iterable[str]) -> str:
    """The node key of a document's heading section."""
    return f"{doc_id}#{_SEP.join(path)}"


#: Documents per batch of the per-document stage's statements (hubs per batch of the weight
#: pass, keys per ``IN`` list): the lists stay far under either engine's parameter limit, and
#: one batch's documents, chunks, nodes and edges are all the stage holds in memory.
BATCH = 500

#: A node's identity, ``(kind, key)``: what an edge is planned between before the ids exist.
NodeKey = tuple[str, str]
_T = TypeVar("_T")


def _slices(values: Sequence[_T]) -> Iterator[Sequence[_T]]:
    size = BATCH  # read at each call (tests set a smaller one)
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _put_edges(conn: sqlite3.Connection, rows: Sequence[tuple[int, int, str, float]]) -> None:
    """Insert edges ``(src, dst, kind, weight)``, :data:`BATCH` rows a statement.

    An edge that is there already (or comes twice) keeps the larger weight. Multi-row, not an
    ``executemany``: PostgreSQL runs each row of that as a statement of its own (0.1–0.2 ms a
    row). An upsert may touch a row once there, so repeated edges are folded here first.
    """
    weight: dict[tuple[int, int, str], float] = {}
    for src, dst, kind, value in rows:
        edge = (src, dst, kind)
        if edge not in weight or value > weight[edge]:
            weight[edge] = value
    edges = [(*edge, value) for edge, value in weight.items()]
    for part in _slices(edges):
        conn.execute(
            "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, ?, ?)"
            f"{', (?, ?, ?, ?)' * (len(part) - 1)} "
            "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = CASE WHEN excluded.weight > "
            "edges.weight THEN excluded.weight ELSE edges.weight END",
            [value for edge in part for value in edge],
        )


def _existing(conn: sqlite3.Connection, keys: Iterable[NodeKey]) -> dict[NodeKey, Any]:
    """The nodes among ``keys`` that exist: ``(kind, key) → (node_id, label)``.

    By key through the ``nodes(kind, key)`` unique index, :data:`BATCH` keys a statement: a
    plan that holds however stale the planner's statistics are (a first sync fills the table
    inside its one transaction, so PostgreSQL knows nothing of its rows until it commits).
    """
    wanted = set(keys)
    kinds = sorted({kind for kind, _ in wanted})
    names = sorted({key for _, key in wanted})
    found: dict[NodeKey, Any] = {}
    for part in _slices(names):
        for node_id, kind, key, label in conn.execute(
            "SELECT node_id, kind, key, label FROM nodes "
            f"WHERE kind IN ({marks(kinds)}) AND key IN ({marks(part)})",
            [*kinds, *part],
        ):
            if (kind, key) in wanted:
                found[kind, key] = (int(node_id), label)
    return found


def _put_nodes(conn: sqlite3.Connection, nodes: dict[NodeKey, str]) -> dict[NodeKey, int]:
    """Ids of ``nodes`` (``(kind, key) → label``, in the order first needed), made where missing.

    The chunk and heading nodes among ``nodes`` are all new (the caller dropped the old ones).

    A doc, dir or tag node that exists keeps its id (other rows and readers' caches refer to
    it) and takes the label given; missing nodes are inserted in the order given, so a full
    derivation numbers them as one document at a time did.
    """
    found = _existing(conn, (k for k in nodes if k[0] in ("doc", "dir", "tag")))
    relabel = [(nodes[k], node_id) for k, (node_id, label) in found.items() if label != nodes[k]]
    if relabel:  # a retitled document keeps its node but not its old label
        conn.executemany("UPDATE nodes SET label = ? WHERE node_id = ?", relabel)
    ids = {k: node_id for k, (node_id, _) in found.items()}
    missing = [(kind, key, label) for (kind, key), label in nodes.items() if (kind, key) not in ids]
    if not missing:
        return ids
    conn.executemany("INSERT INTO nodes(kind, key, label) VALUES (?, ?, ?)", missing)
    made = _existing(conn, ((kind, key) for kind, key, _ in missing))
    ids.update((k, node_id) for k, (node_id, _) in made.items())
    return {k: ids[k] for k in nodes}


def _drop_documents(
    conn: sqlite3.Connection, doc_ids: Sequence[str], *, keep_doc_nodes: bool
) -> set[int]:
    """Drop what ``doc_ids`` (≤ :data:`BATCH`) own; return the tag and dir hubs they were in.

    Their chunk and heading nodes go (their edges cascade), and their doc nodes too unless
    ``keep_doc_nodes``; kept doc nodes lose their tag and dir memberships. A document's chunk
    and heading nodes are those in its key ranges (``<doc>:…``, ``<doc>#…``), found from its
    doc node: the graph makes them with it and removes them with it (the NER layer adds chunk
    nodes only where this plugin is not installed, and installing it derives everything from an
    emptied table). Documents without a doc node (all of them in a full derivation) own nothing.
    """
    docs = [
        int(r[0])
        for r in conn.execute(
            f"SELECT node_id FROM nodes WHERE kind = 'doc' AND key IN ({marks(doc_ids)})",
            doc_ids,
        )
    ]
    if not docs:
        return set()
    hubs = {
        int(r[0])
        for r in conn.execute(
            "DELETE FROM edges WHERE kind IN ('co-located', 'shared-tag') "
            f"AND dst IN ({marks(docs)}) RETURNING src",
            docs,
        ).fetchall()  # read to the end: SQLite finishes the statement only then
    }
    conn.execute(
        "DELETE FROM nodes WHERE node_id IN (SELECT n.node_id FROM nodes d JOIN nodes n "
        "ON n.kind = 'chunk' AND n.key >= (d.key || ':') AND n.key < (d.key || ';') "
        f"WHERE d.node_id IN ({marks(docs)}) "
        "UNION ALL SELECT n.node_id FROM nodes d JOIN nodes n "
        "ON n.kind = 'heading' AND n.key >= (d.key || '#') AND n.key < (d.key || '$') "
        f"WHERE d.node_id IN ({marks(docs)}))",
        [*docs, *docs],
    )
    if not keep_doc_nodes:
        conn.execute(f"DELETE FROM nodes WHERE node_id IN ({marks(docs)})", docs)
    return hubs


def _plan_document(
    doc_id: str,
    doc: Any,
    chunks: list[tuple[int, str]],
    weights: GraphConfig,
    nodes: dict[NodeKey, str],
    edges: list[tuple[NodeKey, NodeKey, str, float]],
) -> list[NodeKey]:
    """Plan a document's nodes and structural edges; return the tag and dir hubs it joins.

    Nodes go to ``nodes`` in the order they are first needed, edges (between node keys) to
    ``edges``.
    """
    path, title, tags = doc
    doc_node = ("doc", doc_id)
    nodes[doc_node] = title
    chunk_nodes: list[NodeKey] = []
    paths: list[tuple[str, ...]] = []
    first_of: dict[tuple[str, ...], NodeKey] = {}
    for ordinal, heading_path in chunks:
        node = ("chunk", f"{doc_id}:{ordinal}")
        nodes[node] = ""
        heading = tuple(json.loads(heading_path))
        chunk_nodes.append(node)
        paths.append(heading)
        first_of.setdefault(heading, node)
        edges.append((doc_node, node, "membership", weights.membership))
    edges += [(a, b, "sibling", weights.sibling) for a, b in itertools.pairwise(chunk_nodes)]
    # Parent/child: each chunk hangs under the first chunk of its nearest enclosing section.
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(len(heading) - 1, -1, -1):
            parent = first_of.get(heading[:cut])
            if parent is not None and parent != node:
                edges.append((parent, node, "parent-child", weights.parent_child))
                break
    # In-section: a heading hub per section, linking every chunk within it (subsections too).
    members: dict[tuple[str, ...], list[NodeKey]] = {}
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(1, len(heading) + 1):
            members.setdefault(heading[:cut], []).append(node)
    for section, inside in members.items():
        hub = ("heading", heading_key(doc_id, section))
        nodes[hub] = f"{title}{_SEP}{_SEP.join(section)}"
        edges += [(hub, node, "in-section", weights.in_section / len(inside)) for node in inside]
    folder = posixpath.dirname(path)
    labels = {("dir", folder): folder or "/"} | {("tag", tag): tag for tag in json.loads(tags)}
    for hub, label in labels.items():
        nodes[hub] = label
        edges.append((hub, doc_node, "co-located" if hub[0] == "dir" else "shared-tag", 0.0))
    return list(labels)


def _build_documents(
    conn: sqlite3.Connection, doc_ids: Sequence[str], weights: GraphConfig
) -> set[int]:
    """Create the nodes and structural edges of ``doc_ids``; return the hubs they joined.

    ``doc_ids`` (≤ :data:`BATCH`) had their old nodes dropped; a batch takes a fixed number of
    statements whatever its size.
    """
    docs = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute(
            f"SELECT doc_id, path, title, tags FROM documents WHERE doc_id IN ({marks(doc_ids)})",
            doc_ids,
        )
    }
    chunks: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for doc_id, ordinal, heading_path in conn.execute(
        "SELECT doc_id, ordinal, heading_path FROM chunks "
        f"WHERE doc_id IN ({marks(doc_ids)}) ORDER BY doc_id, ordinal",
        doc_ids,
    ):
        chunks[doc_id].append((ordinal, heading_path))
    nodes: dict[NodeKey, str] = {}
    planned: list[tuple[NodeKey, NodeKey, str, float]] = []
    joined: list[NodeKey] = []
    built = [d for d in doc_ids if d in docs]
    for doc_id in built:
        joined += _plan_document(
            doc_id, docs[doc_id], chunks.get(doc_id, []), weights, nodes, planned
        )
    ids = _put_nodes(conn, nodes)
    _put_edges(conn, [(ids[s], ids[d], kind, weight) for s, d, kind, weight in planned])
    return {ids[hub] for hub in joined}


def _relink(conn: sqlite3.Connection, doc_ids: Iterable[str], weights: GraphConfig) -> None:
    """Re-derive the link edges leaving ``doc_ids`` from the resolved ``links`` rows.

    A ``DELETE``, a ``SELECT`` and an ``executemany`` per batch of documents.
    """
    value = {"authored": weights.authored, "reverse-scan": weights.reverse_scan}
    for part in _slices(list(dict.fromkeys(doc_ids))):
        conn.execute(
            "DELETE FROM edges WHERE kind IN ('authored', 'reverse-scan') AND src IN "
            f"(SELECT node_id FROM nodes WHERE kind = 'doc' AND key IN ({marks(part)}))",
            part,
        )
        links = conn.execute(
            "SELECT s.node_id, l.origin, n.node_id FROM links l "
            "JOIN nodes s ON s.kind = 'doc' AND s.key = l.src_doc "
            "JOIN nodes n ON n.kind = 'doc' AND n.key = l.dst_doc "
            f"WHERE l.src_doc IN ({marks(part)}) AND l.reason IS NULL AND l.dst_doc != l.src_doc",
            part,
        ).fetchall()
        _put_edges(
            conn,
            [(int(s), int(d), LINK_EDGE[o], value[LINK_EDGE[o]]) for s, o, d in links],
        )


def _reweigh(conn: sqlite3.Connection, hubs: set[int], weights: GraphConfig) -> None:
    """Recompute ``value / size`` on every edge of the given tag/dir hubs; drop empty hubs.

    Per batch of hubs: their kinds, their sizes (one ``GROUP BY``), one ``DELETE`` of the
    emptied ones and one ``executemany`` of the new weights.
    """
    for part in _slices(sorted(hubs)):
        kinds = {
            int(r[0]): r[1]
            for r in conn.execute(
                f"SELECT node_id, kind FROM nodes WHERE node_id IN ({marks(part)})", part
            )
        }
        sizes = {
            int(r[0]): int(r[1])
            for r in conn.execute(
                f"SELECT src, COUNT(*) FROM edges WHERE src IN ({marks(part)}) GROUP BY src", part
            )
        }
        empty = [hub for hub in kinds if hub not in sizes]
        if empty:
            conn.execute(f"DELETE FROM nodes WHERE node_id IN ({marks(empty)})", empty)
        weighed = [
            ((weights.co_located if kind == "dir" else weights.shared_tag) / sizes[hub], hub)
            for hub, kind in kinds.items()
            if hub in sizes
        ]
        if weighed:
            conn.executemany("UPDATE edges SET weight = ? WHERE src = ?", weighed)


def _derive_structure(
    conn: sqlite3.Connection,
    changed: list[str],
    removed: list[str],
    relinked: list[str],
    weights: GraphConfig,
    report: Callable[[str, int, int], None],
) -> None:
    """Derive the nodes and edges of documents, their links and their hubs' weights.

    The removed documents' nodes go, the changed ones' are rebuilt, the link edges of those and
    the relinked are re-derived and the hubs left or joined reweighed: per batch of
    :data:`BATCH` documents, not per document (issue 38).

    On PostgreSQL each statement is a round trip: one document at a time this took ~37
    statements per document (205 s of a 10k-note first sync); a batch of 500 takes a few dozen
    (33 for 500 synthetic notes: its nodes in one ``executemany``, its edges 500 a statement).
    """
    removed, changed = list(dict.fromkeys(removed)), list(dict.fromkeys(changed))
    hubs: set[int] = set()
    total = len(removed) + len(changed)
    done = 0
    if total:  # a tick per batch, and this one when the pass begins
        report("graph", done, total)
    for part in _slices(removed):
        hubs |= _drop_documents(conn, part, keep_doc_nodes=False)
        done += len(part)
        report("graph", done, total)
    for part in _slices(changed):
        hubs |= _drop_documents(conn, part, keep_doc_nodes=True)
        hubs |= _build_documents(conn, part, weights)
        done += len(part)
        report("graph", done, total)
    report("graph links", 0, 0)
    _relink(conn, [*changed, *relinked], weights)
    _reweigh(conn, hubs, weights)


def _embed_labels(
    store: Any,
    conn: sqlite3.Connection,
    embedder: Callable[[], Any],
    progress: Callable[[str, int, int], None] | None = None,
) -> int:
    """Embed labels of tag and heading nodes that have no vector yet; return how many."""
    import hashlib

    # NOT EXISTS, not NOT IN (SELECT …): past work_mem PostgreSQL runs NOT IN as a scan of the
    # materialised vectors per node (350k nodes × 623k vectors at 100k notes: minutes to hours,
    # 1.3 s as NOT EXISTS), as it did the sync's vector removal.
    rows = conn.execute(
        "SELECT n.node_id, n.label FROM nodes n LEFT JOIN node_vectors nv USING (node_id) "
        "WHERE n.kind IN ('tag', 'heading') AND (nv.node_id IS NULL OR NOT EXISTS "
        "(SELECT 1 FROM vectors v WHERE v.embed_hash = nv.embed_hash))"
    ).fetchall()
    if not rows:
        return 0
    hashes = [hashlib.blake2b(f"label:{r[1]}".encode(), digest_size=16).hexdigest() for r in rows]
    known = set()
    for part in _slices(hashes):
        known |= {
            r[0]
            for r in conn.execute(
                f"SELECT embed_hash FROM vectors WHERE embed_hash IN ({marks(part)})", part
            )
        }
    todo = {h: r[1] for h, r in zip(hashes, rows, strict=True) if h not in known}
    if todo:
        done = 0

        def tick(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                progress("labels", done, len(todo))

        vectors = np.asarray(
            embedder().embed_documents(list(todo.values()), progress=tick), dtype=np.float32
        )
        store.put_vectors(conn, {h: vectors[i] for i, h in enumerate(todo)})
    conn.executemany(
        "INSERT INTO node_vectors(node_id, embed_hash) VALUES (?, ?) "
        "ON CONFLICT (node_id) DO UPDATE SET embed_hash = excluded.embed_hash",
        [(r[0], h) for r, h in zip(rows, hashes, strict=True)],
    )
    return len(todo)


def derive_edges(
    kb: Any,
    store: Any,
    changed: list[str],
    removed: list[str],
    relinked: list[str],
    *,
    progress: Callable[[str, int, int], None] | None = None,
) -> None:
    """Bring nodes and edges up to date after a sync (the ``after_sync`` hook's work).

    ``progress(stage, done, total)`` hears stage ``graph`` per document, ``graph links`` for the
    link, weight and title-mention passes (total 0: unknown length) and ``labels`` while tag and
    heading labels are embedded.

    Runs in one transaction: a crash leaves the previous graph intact, and the next sync (which
    sees the graph out of date through ``meta.graph_serial``) derives it again.
    """
    weights: GraphConfig = kb.config.graph
    conn: sqlite3.Connection = store.conn
    report = progress or (lambda stage, done, total: None)
    serial = int(store.get_meta("sync_serial") or 0)
    # The graph is current if the previous sync derived it with the same [graph] settings;
    # otherwise (first run, a sync made while the plugin was not installed, an interrupted
    # derivation, changed weights) derive everything.
    settings = weights.model_dump_json()
    built = (
        store.get_meta("graph_serial") == str(serial - 1)
        and store.get_meta("graph_settings") == settings
    )
    if built and not (changed or removed or relinked):
        # Nothing to derive: move the stamp on without bumping the store generation, so a
        # no-change sync leaves readers' caches valid (issue 14).
        with store._tx(conn):
            store.set_meta(conn, "graph_serial", str(serial))
        return
    if not built:
        changed = [r[0] for r in conn.execute("SELECT doc_id FROM documents")]
        removed = []
    with store.transaction() as tx:
        if not built:
            tx.execute("DELETE FROM nodes")
        _derive_structure(tx, changed, removed, relinked, weights, report)
        if weights.title_mention > 0:
            titles = {r[0] for r in tx.execute("SELECT title FROM documents")}
            retitled = titles != set(json.loads(store.get_meta("graph_titles") or "[]"))
            derive_mentions(
                tx,
                changed,
                everything=not built or retitled or bool(removed),
                weight=weights.title_mention,
            )
            store.set_meta(tx, "graph_titles", json.dumps(sorted(titles)))
        else:
            tx.execute("DELETE FROM edges WHERE kind = 'title-mention'")
        report("graph links", 1, 1)
        embedded = _embed_labels(
            store, tx, lambda: kb.embedder, report
        )  # loads the model only if needed
        store.set_meta(tx, "graph_serial", str(serial))
        store.set_meta(tx, "graph_settings", settings)
    log.info(
        "graph: %d changed, %d removed, %d relinked, %d labels embedded",
        len(changed),
        len(removed),
        len(relinked),
        embedded,
    )
