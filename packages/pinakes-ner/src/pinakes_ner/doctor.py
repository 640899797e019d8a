"""``pnk doctor`` checks of the entity layer: its size and the entities that became glue."""

from __future__ import annotations

import sqlite3
from collections import defaultdict

from pinakes_core.models import DoctorFinding
from pinakes_ner.layer import GLUE_MIN_DOCS, GLUE_SHARE

__all__ = ["findings"]

_LIST = 10
_LABEL_CHARS = 80


def findings(conn: sqlite3.Connection) -> list[DoctorFinding]:
    """The entity census, and a warning listing glue entities when there are any."""
    entities = int(conn.execute("SELECT COUNT(*) FROM nodes WHERE kind = 'entity'").fetchone()[0])
    mentions = int(conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'mentions'").fetchone()[0])
    aliases = int(conn.execute("SELECT COUNT(*) FROM entity_aliases").fetchone()[0])
    docs = int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])
    out = [
        DoctorFinding(
            check="ner-entities",
            severity="info",
            message=(
                f"NER: {entities} entities ({aliases - entities} near-duplicate forms merged), "
                f"{mentions} mention edges."
                if entities
                else "NER is enabled but found no entities (run `pnk sync`)."
            ),
        )
    ]
    if not entities or docs < GLUE_MIN_DOCS:
        return out
    rows = _glue(conn, GLUE_SHARE * docs)[: _LIST + 1]
    if rows:
        out.append(
            DoctorFinding(
                check="ner-glue",
                severity="warning",
                message=(
                    f"{len(rows) if len(rows) <= _LIST else 'More than ' + str(_LIST)} entities are "
                    f"named by more than {GLUE_SHARE:.0%} of the {docs} documents: they link "
                    "everything to everything, so their mention edges are damped to almost "
                    "nothing and entity neighbours ignore them. Remove a type from [ner] types "
                    "if they are all of one kind."
                ),
                items=[f"{str(label)[:_LABEL_CHARS]}: {n} documents" for label, n in rows[:_LIST]],
            )
        )
    return out


def _glue(conn: sqlite3.Connection, above: float) -> list[tuple[str, int]]:
    """``(label, documents)`` of the entities named by more than ``above`` documents.

    Most documents first, then by label. Chunk keys are ``"<doc id>:<ordinal>"``; the document
    part is cut in Python, so the statement is plain SQL on SQLite and PostgreSQL alike.
    """
    named: defaultdict[int, set[str]] = defaultdict(set)
    for row in conn.execute(
        "SELECT e.src, c.key FROM edges e JOIN nodes c ON c.node_id = e.dst "
        "WHERE e.kind = 'mentions'"
    ):
        doc, colon, _ = str(row[1]).partition(":")
        named[int(row[0])].add(doc if colon else "")
    glue = {src: len(docs) for src, docs in named.items() if len(docs) > above}
    labels: dict[int, str] = {}
    ids = list(glue)
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        labels.update(
            (int(r[0]), str(r[1]))
            for r in conn.execute(
                f"SELECT node_id, label FROM nodes WHERE node_id IN ({','.join('?' * len(part))})",
                part,
            )
        )
    return sorted(((labels[src], n) for src, n in glue.items()), key=lambda r: (-r[1], r[0]))
