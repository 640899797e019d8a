"""The graph's per-document stage in batches gives the graph one document at a time gave (issue 38).

``derive_edges`` once ran some 37 statements per document (a node lookup and insert per node, an
insert per edge): round trips on PostgreSQL. It now runs a fixed number per batch of documents.
The per-document functions it replaced are kept here, as the reference only, and two KBs of the
same files go through the same edits, one derived each way, on both backends: nodes, edges and
float weights must be equal, compared through the nodes' ``(kind, key)``.
"""

from __future__ import annotations

import itertools
import json
import posixpath
import shutil
import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, make_kb, set_config, write_files
from pinakes_core import KB
from pinakes_core.config import GraphConfig
from pinakes_core.uri import new_ulid
from pinakes_graph import edges as graph_edges
from pinakes_graph.edges import LINK_EDGE, heading_key

_SEP = " › "


# --- REFERENCE ONLY: the per-document derivation as it was before issue 38's batching ---------


def reference_node(conn: sqlite3.Connection, kind: str, key: str, label: str) -> int:
    """REFERENCE ONLY: one node looked up (and inserted or relabelled) per call."""
    row = conn.execute(
        "SELECT node_id, label FROM nodes WHERE kind = ? AND key = ?", (kind, key)
    ).fetchone()
    if row is not None:
        if row[1] != label:
            conn.execute("UPDATE nodes SET label = ? WHERE node_id = ?", (label, row[0]))
        return int(row[0])
    inserted = conn.execute(
        "INSERT INTO nodes(kind, key, label) VALUES (?, ?, ?) RETURNING node_id", (kind, key, label)
    ).fetchall()
    return int(inserted[0][0])


def reference_edge(conn: sqlite3.Connection, src: int, dst: int, kind: str, weight: float) -> None:
    """REFERENCE ONLY: one edge upserted per call (the larger weight wins)."""
    conn.execute(
        "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(src, dst, kind) DO UPDATE SET weight = CASE WHEN excluded.weight > "
        "edges.weight THEN excluded.weight ELSE edges.weight END",
        (src, dst, kind, weight),
    )


def reference_drop_document(
    conn: sqlite3.Connection, doc_id: str, *, keep_doc_node: bool
) -> set[int]:
    """REFERENCE ONLY: a document's own nodes deleted; the tag/dir hubs it belonged to."""
    row = conn.execute(
        "SELECT node_id FROM nodes WHERE kind = 'doc' AND key = ?", (doc_id,)
    ).fetchone()
    hubs = (
        {
            int(r[0])
            for r in conn.execute(
                "SELECT src FROM edges WHERE dst = ? AND kind IN ('co-located', 'shared-tag')",
                (row[0],),
            )
        }
        if row
        else set()
    )
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


def reference_build_document(
    conn: sqlite3.Connection, doc_id: str, weights: GraphConfig
) -> set[int]:
    """REFERENCE ONLY: a document's nodes and structural edges, one statement at a time."""
    doc = conn.execute(
        "SELECT path, title, tags FROM documents WHERE doc_id = ?", (doc_id,)
    ).fetchone()
    if doc is None:
        return set()
    path, title = doc["path"], doc["title"]
    doc_node = reference_node(conn, "doc", doc_id, title)
    chunks = conn.execute(
        "SELECT ordinal, heading_path FROM chunks WHERE doc_id = ? ORDER BY ordinal", (doc_id,)
    ).fetchall()
    chunk_nodes: list[int] = []
    paths: list[tuple[str, ...]] = []
    first_of: dict[tuple[str, ...], int] = {}
    for row in chunks:
        node = reference_node(conn, "chunk", f"{doc_id}:{row['ordinal']}", "")
        heading = tuple(json.loads(row["heading_path"]))
        chunk_nodes.append(node)
        paths.append(heading)
        first_of.setdefault(heading, node)
        reference_edge(conn, doc_node, node, "membership", weights.membership)
    for a, b in itertools.pairwise(chunk_nodes):
        reference_edge(conn, a, b, "sibling", weights.sibling)
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(len(heading) - 1, -1, -1):
            parent = first_of.get(heading[:cut])
            if parent is not None and parent != node:
                reference_edge(conn, parent, node, "parent-child", weights.parent_child)
                break
    members: dict[tuple[str, ...], list[int]] = {}
    for node, heading in zip(chunk_nodes, paths, strict=True):
        for cut in range(1, len(heading) + 1):
            members.setdefault(heading[:cut], []).append(node)
    for section, nodes in members.items():
        hub = reference_node(
            conn, "heading", heading_key(doc_id, section), f"{title}{_SEP}{_SEP.join(section)}"
        )
        for node in nodes:
            reference_edge(conn, hub, node, "in-section", weights.in_section / len(nodes))
    folder = posixpath.dirname(path)
    joined = {reference_node(conn, "dir", folder, folder or "/")}
    joined |= {reference_node(conn, "tag", tag, tag) for tag in json.loads(doc["tags"])}
    for hub in joined:
        kind = conn.execute("SELECT kind FROM nodes WHERE node_id = ?", (hub,)).fetchone()[0]
        reference_edge(conn, hub, doc_node, "co-located" if kind == "dir" else "shared-tag", 0.0)
    return joined


def reference_relink(
    conn: sqlite3.Connection, doc_ids: Iterable[str], weights: GraphConfig
) -> None:
    """REFERENCE ONLY: link edges re-derived one document at a time."""
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
            "SELECT l.origin, n.node_id FROM links l "
            "JOIN nodes n ON n.kind = 'doc' AND n.key = l.dst_doc "
            "WHERE l.src_doc = ? AND l.reason IS NULL AND l.dst_doc != l.src_doc",
            (doc_id,),
        ).fetchall():
            kind = LINK_EDGE[origin]
            weight = weights.authored if kind == "authored" else weights.reverse_scan
            reference_edge(conn, int(src[0]), int(dst), kind, weight)


def reference_reweigh(conn: sqlite3.Connection, hubs: set[int], weights: GraphConfig) -> None:
    """REFERENCE ONLY: hub weights recomputed one hub at a time; empty hubs dropped."""
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


def reference_derive_structure_per_document(
    conn: sqlite3.Connection,
    changed: list[str],
    removed: list[str],
    relinked: list[str],
    weights: GraphConfig,
    report: Callable[[str, int, int], None],
) -> None:
    """REFERENCE ONLY: the per-document loop of ``derive_edges`` before issue 38's batching."""
    hubs: set[int] = set()
    total = len(removed) + len(changed)
    for done, doc_id in enumerate(removed, 1):
        hubs |= reference_drop_document(conn, doc_id, keep_doc_node=False)
        report("graph", done, total)
    for done, doc_id in enumerate(changed, len(removed) + 1):
        hubs |= reference_drop_document(conn, doc_id, keep_doc_node=True)
        hubs |= reference_build_document(conn, doc_id, weights)
        report("graph", done, total)
    report("graph links", 0, 0)
    reference_relink(conn, [*changed, *relinked], weights)
    reference_reweigh(conn, hubs, weights)


# --- the comparison ---------------------------------------------------------------------------

Graph = tuple[
    set[tuple[str, str, str]],  # (kind, key, label) of every node
    dict[tuple[str, str, str, str, str], float],  # (src kind, src key, dst kind, dst key, kind)
    dict[tuple[str, str], int],  # (kind, key) -> node_id
]


def graph_of(kb: KB) -> Graph:
    """Every node and edge of ``kb``'s store, edges named through their nodes' ``(kind, key)``.

    Keys name documents by path, not id: two KBs of the same files give their documents
    different ids (derived from each KB's own id).
    """
    conn = kb.store().conn
    paths = {r[0]: r[1] for r in conn.execute("SELECT doc_id, path FROM documents")}

    def named(kind: str, key: str) -> str:
        if kind in ("doc", "chunk", "heading") and key[:26] in paths:
            return paths[key[:26]] + key[26:]
        return key

    nodes = [
        (int(r[0]), r[1], named(r[1], r[2]), r[3])
        for r in conn.execute("SELECT node_id, kind, key, label FROM nodes")
    ]
    edges = conn.execute(
        "SELECT s.kind, s.key, d.kind, d.key, e.kind, e.weight FROM edges e "
        "JOIN nodes s ON s.node_id = e.src JOIN nodes d ON d.node_id = e.dst"
    ).fetchall()
    return (
        {(kind, key, label) for _, kind, key, label in nodes},
        {(r[0], named(r[0], r[1]), r[2], named(r[2], r[3]), r[4]): r[5] for r in edges},
        {(kind, key): node_id for node_id, kind, key, _ in nodes},
    )


def _long(word: str, n: int = 40) -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def kb_files(ids: dict[str, str]) -> dict[str, str]:
    """Folders three deep, tags (shared, single-member), nested headings, a preamble, long
    sections (several chunks each), and links of every origin, one of them dangling."""
    return {
        "index.md": (
            "---\ntags: [guide, shared]\n---\n# Index\n\nSee [[Alpha]], [beta](notes/beta.md) "
            "and [[Later]] (not written yet).\n\n## Usage\n\nShort usage notes.\n"
        ),
        "notes/alpha.md": (
            "---\ntags: [shared, solo]\nlinks:\n  - to: beta.md\n    rel: cites\n---\n"
            f"# Alpha\n\n{_long('a')}\n\n## One\n\n{_long('b')}\n\n### Deep\n\n{_long('c')}\n\n"
            f"## Two\n\n{_long('d')}\n\nMentions Gamma Notes by name.\n"
        ),
        "notes/beta.md": "# Beta\n\nBack to the [[Index]].\n",
        "notes/beta.md.pnk.yaml": f"id: {ids['beta']}\nlinks:\n  - to: deep/gamma.md\n",
        "notes/deep/gamma.md": (
            "---\ntags: [shared]\n---\n# Gamma Notes\n\n" + _long("g") + "\n\n## Under\n\nBody.\n"
        ),
        "notes/deep/delta.md": f"# Delta\n\n{_long('e', 80)}\n",
        "misc/epsilon.md": "# Epsilon\n\nAlone in its folder; see [alpha](../notes/alpha.md).\n",
        "misc/epsilon.md.pnk.yaml": f"id: {ids['epsilon']}\ntags: [loner]\n",
        "zeta.md": f"A preamble before any heading.\n\n# Zeta\n\n{_long('z')}\n",
    }


def steps(root: Path, ids: dict[str, str]) -> dict[str, Callable[[], None]]:
    """The edits a KB at ``root`` goes through after its first sync, by name, in order."""

    def edit(rel: str, old: str, new: str) -> None:
        path = root / rel
        path.write_text(path.read_text().replace(old, new))

    def bodies() -> None:  # a section added (new chunks and heading hubs), a link dropped
        edit("notes/alpha.md", "Mentions", f"## Three\n\n{_long('f')}\n\nMentions")
        write_files(root, {"notes/beta.md": "# Beta\n\nNo link any more.\n"})

    def retitle() -> None:  # the doc node keeps its id; its and its headings' labels change
        edit("notes/deep/gamma.md", "# Gamma Notes", "# Gamma Prime")

    def tags() -> None:  # alpha leaves "solo" (emptied: its hub goes), delta joins "shared",
        edit("notes/alpha.md", "[shared, solo]", "[shared]")  # beta takes a new tag
        edit("notes/deep/delta.md", "# Delta", "---\ntags: [shared]\n---\n# Delta")
        write_files(root, {"notes/beta.md.pnk.yaml": f"id: {ids['beta']}\ntags: [brand-new]\n"})

    def move() -> None:  # epsilon moves, its sidecar keeping its identity; "misc" is emptied
        (root / "archive").mkdir()
        for name in ("epsilon.md", "epsilon.md.pnk.yaml"):
            shutil.move(root / "misc" / name, root / "archive" / name)

    def remove_and_add() -> None:  # one the dangling [[Later]] now resolves to
        (root / "notes/deep/delta.md").unlink()
        write_files(
            root,
            {
                "later.md": "---\ntags: [fresh]\n---\n# Later\n\nWritten at last; names Alpha.\n",
                "new/thing.md": "# Thing\n\n## Part\n\nA new folder, linking [[Zeta]].\n",
            },
        )

    return {
        "bodies": bodies,
        "retitle": retitle,
        "tags": tags,
        "move": move,
        "remove and add": remove_and_add,
        "no change": lambda: None,
    }


def test_batched_graph_equals_the_per_document_reference(
    tmp_path: Path, kb_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches of 2 documents, so each sync's documents, links and hubs take several.
    monkeypatch.setattr(graph_edges, "BATCH", 2)
    ids = {"beta": new_ulid(), "epsilon": new_ulid()}
    roots = {name: make_kb(tmp_path / name, kb_files(ids)) for name in ("batched", "reference")}
    for root in roots.values():
        set_config(root, "sync", "chunk_tokens = 32")
        set_config(root, "store", f'backend = "{kb_backend}"')
    kbs = {name: KB.open(root, embedder=FakeHashEmbedder()) for name, root in roots.items()}
    ticks: list[tuple[int, int]] = []
    doc_paths = [p for p in kb_files(ids) if p.endswith(".md")]
    try:

        def sync_both() -> Graph:
            found = {}
            for name, kb in kbs.items():
                with monkeypatch.context() as patch:
                    if name == "reference":
                        derive = reference_derive_structure_per_document
                        patch.setattr(graph_edges, "_derive_structure", derive)
                    ticks.clear()
                    kb.sync(
                        progress=lambda stage, done, total: (
                            ticks.append((done, total)) if stage == "graph" else None
                        )
                    )
                    if name == "batched" and ticks:
                        assert ticks[-1][0] == ticks[-1][1]  # every document counted
                        if ticks[-1][1] == len(doc_paths):  # a full derivation: a tick as it
                            # begins, then one per batch of BATCH documents
                            assert len(ticks) == 1 + -(-len(doc_paths) // graph_edges.BATCH)
                found[name] = graph_of(kb)
            batched, reference = found["batched"], found["reference"]
            assert batched[0] == reference[0]  # same (kind, key, label) nodes
            assert batched[1] == reference[1]  # same edges, same float weights
            return batched

        first = sync_both()
        # A first sync is a full derivation: the nodes are numbered alike, too.
        assert first[2] == graph_of(kbs["reference"])[2]
        kinds = {kind for kind, _, _ in first[0]}
        assert {"doc", "chunk", "heading", "dir", "tag"} <= kinds
        assert ("tag", "solo", "solo") in first[0] and ("dir", "misc", "misc") in first[0]
        doc_ids = {
            r[0] for r in kbs["batched"].store().conn.execute("SELECT doc_id FROM documents")
        }
        assert len(doc_ids) > 2 * graph_edges.BATCH  # several batches
        edge_kinds = {key[4] for key in first[1]}
        assert {
            "authored",
            "reverse-scan",
            "in-section",
            "parent-child",
            "shared-tag",
        } <= edge_kinds

        for name in steps(roots["batched"], ids):
            for root in roots.values():
                steps(root, ids)[name]()
            after = sync_both()
            if name == "tags":
                assert not any(k == ("tag", "solo") for k in after[2])  # emptied hub dropped
                assert ("tag", "brand-new", "brand-new") in after[0]
            if name == "move":
                assert not any(k == ("dir", "misc") for k in after[2])
                assert ("dir", "archive", "archive") in after[0]
            if name == "remove and add":
                assert ("doc", "index.md", "doc", "later.md", "reverse-scan") in after[1]
    finally:
        for kb in kbs.values():
            kb.close()
