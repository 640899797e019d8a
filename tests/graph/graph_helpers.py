"""Shared fixture KB and independent expectations for the graph-layer tests."""

from __future__ import annotations

import itertools
import json
import posixpath
from collections import defaultdict
from pathlib import Path

from conftest import db, make_kb, set_config
from pinakes_core.uri import new_ulid

SEP = " › "


def para(word: str, n: int = 25) -> str:
    return " ".join(f"{word}{i}" for i in range(n))


def fixture_files(ids: dict[str, str]) -> dict[str, str]:
    """Three documents in two folders: headings, long sections, tags, links of every origin."""
    return {
        "intro.md": (
            "A preamble paragraph before any heading.\n\n"
            "# Intro\n\nSee the [guide](guide/a.md) and [[Gamma]].\n\n"
            "## Usage\n\nShort usage notes.\n"
        ),
        "intro.md.pnk.yaml": f"id: {ids['intro']}\ntags: [shared, Beta]\n",
        "guide/a.md": (
            "---\ntags: [Alpha, '#shared']\nlinks:\n  - to: ../intro.md\n    rel: Depends On\n---\n"
            "# Alpha\n\nAlpha intro text.\n\n"
            "## Part one\n\n"
            + "\n\n".join(para(f"w{i}x") for i in range(4))
            + "\n\n### Deep\n\nDeep text.\n\n## Part two\n\nClosing words.\n"
        ),
        "guide/a.md.pnk.yaml": (
            f"id: {ids['a']}\n# authored links\nlinks:\n  - to: c.md\n    rel: cites\n"
        ),
        "guide/c.md": "# Gamma\n\nGamma body text.\n",
        "guide/c.md.pnk.yaml": f"id: {ids['c']}\ntags: [shared]\n",
    }


def build_fixture(root: Path, graph: str | None = None) -> dict[str, str]:
    """Init the fixture KB at ``root`` (not synced); return name → doc id."""
    ids = {"intro": new_ulid(), "a": new_ulid(), "c": new_ulid()}
    make_kb(root, fixture_files(ids))
    set_config(root, "sync", "chunk_tokens = 32")
    if graph:
        set_config(root, "graph", graph)
    return ids


def edge_map(root: Path) -> dict[tuple[str, str, str], float]:
    """``(kind, src key, dst key) → weight`` for every stored edge."""
    conn = db(root)
    try:
        rows = conn.execute(
            "SELECT e.kind, s.key, d.key, e.weight FROM edges e "
            "JOIN nodes s ON s.node_id = e.src JOIN nodes d ON d.node_id = e.dst"
        ).fetchall()
    finally:
        conn.close()
    return {(r[0], r[1], r[2]): r[3] for r in rows}


def node_ids(root: Path, prefix: str | None = None) -> dict[tuple[str, str], int]:
    """``(kind, key) → node_id``; with ``prefix``, only keys starting with it."""
    conn = db(root)
    try:
        rows = conn.execute("SELECT node_id, kind, key FROM nodes").fetchall()
    finally:
        conn.close()
    return {(r[1], r[2]): r[0] for r in rows if prefix is None or str(r[2]).startswith(prefix)}


def expected_structural(root: Path, weights: dict[str, float] | None = None) -> dict:
    """Structural and hub edges computed from the documents and chunks tables."""
    w = {
        "membership": 1.0,
        "sibling": 1.0,
        "parent_child": 1.0,
        "in_section": 1.0,
        "co_located": 1.0,
        "shared_tag": 1.0,
    }
    w.update(weights or {})
    conn = db(root)
    try:
        docs = conn.execute("SELECT doc_id, path, tags FROM documents").fetchall()
        chunks = conn.execute(
            "SELECT doc_id, ordinal, heading_path FROM chunks ORDER BY doc_id, ordinal"
        ).fetchall()
    finally:
        conn.close()
    by_doc: dict[str, list[tuple[int, tuple[str, ...]]]] = defaultdict(list)
    for c in chunks:
        by_doc[c[0]].append((c[1], tuple(json.loads(c[2]))))
    out: dict[tuple[str, str, str], float] = {}
    for doc_id, items in by_doc.items():
        key = {o: f"{doc_id}:{o}" for o, _ in items}
        for o, _ in items:
            out["membership", doc_id, key[o]] = w["membership"]
        for (o1, _), (o2, _) in itertools.pairwise(items):
            out["sibling", key[o1], key[o2]] = w["sibling"]
        for o, heading in items:
            for cut in range(len(heading) - 1, -1, -1):
                firsts = [x for x, h in items if h == heading[:cut]]
                if firsts:
                    out["parent-child", key[min(firsts)], key[o]] = w["parent_child"]
                    break
        sections = {h[:n] for _, h in items for n in range(1, len(h) + 1)}
        for section in sections:
            inside = [o for o, h in items if h[: len(section)] == section]
            for o in inside:
                out["in-section", f"{doc_id}#{SEP.join(section)}", key[o]] = w["in_section"] / len(
                    inside
                )
    dirs: dict[str, list[str]] = defaultdict(list)
    tags: dict[str, list[str]] = defaultdict(list)
    for d in docs:
        dirs[posixpath.dirname(d[1])].append(d[0])
        for t in json.loads(d[2]):
            tags[t].append(d[0])
    for folder, members in dirs.items():
        for m in members:
            out["co-located", folder, m] = w["co_located"] / len(members)
    for tag, members in tags.items():
        for m in members:
            out["shared-tag", tag, m] = w["shared_tag"] / len(members)
    return out


def only(edges: dict, *kinds: str) -> dict:
    return {k: v for k, v in edges.items() if k[0] in kinds}
