"""Entity neighbours: documents that mention the same named entities as a document.

This is what ``pnk links`` / ``KB.links`` / ``pinakes_links`` show beside authored and text
links: two notes that both discuss "Diego Ongaro" are related even when neither links the
other. Each neighbour is scored by the specificity of what it shares — the sum over shared
entities of ``log(documents / documents naming the entity)`` — so sharing a rare name counts
for much and sharing a glue entity (named by more than :data:`~pinakes_ner.layer.GLUE_SHARE`
of the documents) for nothing: those are left out.
"""

from __future__ import annotations

import math
import sqlite3
from collections import defaultdict

from pinakes_core.models import EntityNeighbour
from pinakes_ner.layer import GLUE_MIN_DOCS, GLUE_SHARE

__all__ = ["MAX_ENTITIES_SHOWN", "MAX_NEIGHBOURS", "entity_neighbours"]

MAX_NEIGHBOURS = 10
MAX_ENTITIES_SHOWN = 5
#: Characters of an entity label shown (labels are text from the user's files: bounded).
_LABEL_CHARS = 80


def _doc_of(chunk_key: str) -> str:
    return chunk_key.rsplit(":", 1)[0]


def entity_neighbours(conn: sqlite3.Connection, doc_id: str) -> list[EntityNeighbour]:
    """Documents sharing entities with ``doc_id``, most specific first (at most ten)."""
    total = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    own = conn.execute(
        "SELECT DISTINCT e.src FROM edges e JOIN nodes c ON c.node_id = e.dst "
        "WHERE e.kind = 'mentions' AND c.kind = 'chunk' AND c.key >= ? AND c.key < ?",
        (f"{doc_id}:", f"{doc_id};"),
    ).fetchall()
    if not own or total < 2:
        return []
    entities = [int(r[0]) for r in own]
    marks = ",".join("?" * len(entities))
    docs_of: dict[int, set[str]] = defaultdict(set)
    for entity, key in conn.execute(
        f"SELECT e.src, c.key FROM edges e JOIN nodes c ON c.node_id = e.dst "
        f"WHERE e.kind = 'mentions' AND e.src IN ({marks})",
        entities,
    ):
        docs_of[int(entity)].add(_doc_of(key))
    labels = dict(
        conn.execute(f"SELECT node_id, label FROM nodes WHERE node_id IN ({marks})", entities)
    )
    scores: dict[str, float] = defaultdict(float)
    shared: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for entity, docs in docs_of.items():
        if total >= GLUE_MIN_DOCS and len(docs) > GLUE_SHARE * total:
            continue  # glue: named nearly everywhere, it says nothing about relatedness
        weight = math.log(total / len(docs))
        for other in docs - {doc_id}:
            scores[other] += weight
            shared[other].append((weight, str(labels.get(entity, ""))[:_LABEL_CHARS]))
    best = sorted(scores, key=lambda d: (-scores[d], d))[:MAX_NEIGHBOURS]
    if not best:
        return []
    rows = {
        r[0]: r
        for r in conn.execute(
            f"SELECT doc_id, title, path FROM documents WHERE doc_id IN ({','.join('?' * len(best))})",
            best,
        )
    }
    return [
        EntityNeighbour(
            doc_id=d,
            title=rows[d][1],
            path=rows[d][2],
            entities=[label for _, label in sorted(shared[d], key=lambda x: (-x[0], x[1]))][
                :MAX_ENTITIES_SHOWN
            ],
            score=round(scores[d], 4),
        )
        for d in best
        if d in rows
    ]
