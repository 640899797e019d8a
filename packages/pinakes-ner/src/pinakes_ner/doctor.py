"""``pnk doctor`` checks of the entity layer: its size and the entities that became glue."""

from __future__ import annotations

import sqlite3

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
    # Documents naming each entity: chunk keys are "<doc id>:<ordinal>".
    rows = conn.execute(
        "SELECT n.label, COUNT(DISTINCT substr(c.key, 1, instr(c.key, ':') - 1)) AS docs "
        "FROM edges e JOIN nodes n ON n.node_id = e.src JOIN nodes c ON c.node_id = e.dst "
        "WHERE e.kind = 'mentions' GROUP BY e.src HAVING docs > ? ORDER BY docs DESC, n.label "
        "LIMIT ?",
        (GLUE_SHARE * docs, _LIST + 1),
    ).fetchall()
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
