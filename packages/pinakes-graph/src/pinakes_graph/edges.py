"""Edge derivation: the graph a KB already is (DESIGN §6).

Nodes: ``chunk`` (key ``<doc>:<ordinal>``), ``doc`` (key: doc ULID), ``heading`` (per document,
key ``<doc>#<heading path>``), ``tag`` (KB-wide), ``dir`` (folder path, ``""`` for the root).
Shared-value relations go through a hub node (tag, dir, heading) so they cost one edge per
member instead of one per pair; a hub edge weighs ``[graph] <kind> / hub size``.

Derivation is incremental: a changed document's own nodes and edges are rebuilt, the hubs it
leaves or joins get their weights recomputed, and link edges are re-derived only for documents
whose links (or their resolution) changed.
"""

from __future__ import annotations

import itertools
import json
import logging
import posixpath
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from pinakes_core.config import GraphConfig
from pinakes_graph.mentions import derive_mentions

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


def _node(conn: sqlite3.Connection, kind: str, key: str, label: str) -> int:
    row = conn.execute(
        "SELECT node_id, label FROM nodes WHERE kind = ? AND key = ?", (kind, key)
    ).fetchone()
    if row is not None:
        if row[1] != label:  # a retitled document keeps its node but not its old label
            conn.execute("UPDATE nodes SET label = ? WHERE node_id = ?", (label, row[0]))
        return int(row[0])
    inserted = conn.execute(
        "INSERT INTO nodes(kind, key, label) VALUES (?, ?, ?) RETURNING node_id", (kind, key, label)
    ).fetchall()  # read to the end: SQLite finishes the statement only then
    return int(inserted[0][0])


def _edge(conn: sqlite3.Connection, src: int, dst: int, kind: str, weight: float) -> None:
    conn.execute(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = CASE WHEN excluded.weight > "
        "edges.weight THEN excluded.weight ELSE edges.weight END",
        (src, dst, kind, weight),
    )


def _hubs_of(conn: sqlite3.Connection, doc_node: int) -> set[int]:
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT src FROM edges WHERE dst = ? AND kind IN ('co-located', 'shared-tag')",
            (doc_node,),
        )
    }


def _drop_document(conn: sqlite3.Connection, doc_id: str, *, keep_doc_node: bool) -> set[int]:
    """Delete a document's own nodes (edges cascade); return the tag/dir hubs it belonged to."""
    row = conn.execute(
        "SELECT node_id FROM nodes WHERE kind = 'doc' AND key = ?", (doc_id,)
    ).fetchone()
    hubs = _hubs_of(conn, int(row[0])) if row else set()
    conn.execute(
        "DELETE FROM nodes WHERE (kind = 'chunk' AND key >= ? AND key < ?) "
        "OR (kind = 'heading' AND key >= ? AND key < ?)",
        (f"{doc_id}:", f"{doc_id};", f"{doc_id}#", f"{doc_id}$"),
    )
    if row is not None:
        if keep_doc_node:
            conn.execute(
                "DELETE FROM edges WHERE dst = ? AND kind IN ('co-located', 'shared-tag')",
                (row[0],),
            )
        else:
            conn.execute("DELETE FROM nodes WHERE node_id = ?", (row[0],))
    return hubs


def _build_document(conn: sqlite3.Connection, doc_id: str, weights: GraphConfig) -> set[int]:
    """Create a document's nodes and structural edges; return the hubs it joined."""
    doc = conn.execute(
        "SELECT path, title, tags FROM documents WHERE doc_id = ?", (doc_id,)
    ).fetchone()
    if doc is None:
        return set()
    path, title = doc["path"], doc["title"]
    doc_node = _node(conn, "doc", doc_id, title)
    chunks = conn.execute(
        "SELECT ordinal, heading_path FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
    ).fetchall()
    chunk_nodes: list[int] = []
    paths: list[tuple[str, ...]] = []
    first_of: dict[tuple[str, ...], int] = {}
    for row in chunks:
        node = _node(conn, "chunk", f"{doc_id}:{row['ordinal']}", "")
        heading = tuple(json.loads(row["heading_path"]))
        chunk_nodes.append(node)
        paths.append(heading)
        first_of.setdefault(heading, node)
        _edge(conn, doc_node, node, "membership", weights.membership)
    for a, b in itertools.pairwise(chunk_nodes):
        _edge(conn, a, b, "sibling", weights.sibling)
    # Parent/child: each chunk hangs under the first chunk of its nearest enclosing section.
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(len(heading) - 1, -1, -1):
            parent = first_of.get(heading[:cut])
            if parent is not None and parent != node:
                _edge(conn, parent, node, "parent-child", weights.parent_child)
                break
    # In-section: a heading hub per section, linking every chunk within it (subsections too).
    members: dict[tuple[str, ...], list[int]] = {}
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(1, len(heading) + 1):
            members.setdefault(heading[:cut], []).append(node)
    for section, nodes in members.items():
        hub = _node(
            conn, "heading", heading_key(doc_id, section), f"{title}{_SEP}{_SEP.join(section)}"
        )
        for node in nodes:
            _edge(conn, hub, node, "in-section", weights.in_section / len(nodes))
    joined = {_node(conn, "dir", posixpath.dirname(path), posixpath.dirname(path) or "/")}
    joined |= {_node(conn, "tag", tag, tag) for tag in json.loads(doc["tags"])}
    for hub in joined:
        kind = conn.execute("SELECT kind FROM nodes WHERE node_id = ?", (hub,)).fetchone()[0]
        _edge(conn, hub, doc_node, "co-located" if kind == "dir" else "shared-tag", 0.0)
    return joined


def _relink(conn: sqlite3.Connection, doc_ids: Iterable[str], weights: GraphConfig) -> None:
    """Re-derive the link edges leaving ``doc_ids`` from the resolved ``links`` rows."""
    for doc_id in doc_ids:
        src = conn.execute(
            "SELECT node_id FROM nodes WHERE kind = 'doc' AND key = ?", (doc_id,)
        ).fetchone()
        if src is None:
            continue
        conn.execute(
            "DELETE FROM edges WHERE src = ? AND kind IN ('authored', 'reverse-scan')", (src[0],)
        )
        for origin, dst in conn.execute(
            "SELECT l.origin, n.node_id FROM links l JOIN nodes n ON n.kind = 'doc' AND n.key = l.dst_doc "
            "WHERE l.src_doc = ? AND l.reason IS NULL AND l.dst_doc != l.src_doc",
            (doc_id,),
        ).fetchall():
            kind = LINK_EDGE[origin]
            weight = weights.authored if kind == "authored" else weights.reverse_scan
            _edge(conn, int(src[0]), int(dst), kind, weight)


def _reweigh(conn: sqlite3.Connection, hubs: set[int], weights: GraphConfig) -> None:
    """Recompute ``value / size`` on every edge of the given tag/dir hubs; drop empty hubs."""
    for hub in hubs:
        row = conn.execute("SELECT kind FROM nodes WHERE node_id = ?", (hub,)).fetchone()
        if row is None:
            continue
        size = conn.execute("SELECT COUNT(*) FROM edges WHERE src = ?", (hub,)).fetchone()[0]
        if size == 0:
            conn.execute("DELETE FROM nodes WHERE node_id = ?", (hub,))
            continue
        value = weights.co_located if row[0] == "dir" else weights.shared_tag
        conn.execute("UPDATE edges SET weight = ? WHERE src = ?", (value / size, hub))


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
    for i in range(0, len(hashes), 500):
        part = hashes[i : i + 500]
        known |= {
            r[0]
            for r in conn.execute(
                f"SELECT embed_hash FROM vectors WHERE embed_hash IN ({','.join('?' * len(part))})",
                part,
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
        hubs: set[int] = set()
        total = len(removed) + len(changed)
        for done, doc_id in enumerate(removed, 1):
            hubs |= _drop_document(tx, doc_id, keep_doc_node=False)
            report("graph", done, total)
        for done, doc_id in enumerate(changed, len(removed) + 1):
            hubs |= _drop_document(tx, doc_id, keep_doc_node=True)
            hubs |= _build_document(tx, doc_id, weights)
            report("graph", done, total)
        report("graph links", 0, 0)
        _relink(tx, [*changed, *relinked], weights)
        _reweigh(tx, hubs, weights)
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
