"""Entry module for the ``pinakes`` entry-point group: the graph plugin's hook implementations.

Core loads this module through pluggy, and ``pnk`` on every start-up (``pnk --help`` too), so
it imports nothing but pluggy's marker: each hook imports what it needs when it first runs
(numpy, core's models, the edge and traversal modules), and scipy loads inside the graph
channels when they first run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pinakes_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from pinakes_core.models import DoctorFinding, LinksResult

__all__ = ["after_sync", "doctor_checks", "kb_links", "register_channels"]


@hookimpl
def register_channels() -> list[Any]:
    """The graph channels: bounded expansion and Personalized PageRank."""
    from pinakes_graph.expand import ExpandChannel
    from pinakes_graph.ppr import HEAD_DOCUMENTS, PprChannel, PprRerank
    from pinakes_graph.rerank import LinkRerank, Salience

    return [
        ExpandChannel(),
        PprChannel(),
        PprRerank("ppr-auto", head=HEAD_DOCUMENTS, gated=True, document_tail=True),
        PprRerank("ppr-rerank", head=HEAD_DOCUMENTS),
        PprRerank("ppr-rank", head=0),
        LinkRerank(),
        Salience(),
    ]


@hookimpl
def after_sync(
    kb: Any,
    store: Any,
    changed: list[str],
    removed: list[str],
    relinked: list[str],
    progress: Any,
) -> None:
    """Derive nodes and edges for what the sync changed, reporting progress as it goes."""
    from pinakes_graph import edges

    edges.derive_edges(kb, store, changed, removed, relinked, progress=progress)


@hookimpl
def kb_links(
    kb: Any, doc_id: str, rel: str | None, direction: str, depth: int, query: str | None
) -> LinksResult:
    """Answer ``KB.links``."""
    from pinakes_graph import traverse

    return traverse.links(kb, doc_id, rel, direction, depth, query)


@hookimpl
def doctor_checks(kb: Any, store: Any) -> list[DoctorFinding]:
    """Report the edge census and the highest-degree hubs (a tag that became glue)."""
    from pinakes_core.models import DoctorFinding

    conn = store.conn
    census = conn.execute("SELECT kind, COUNT(*) FROM edges GROUP BY kind ORDER BY kind").fetchall()
    docs = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] or 1
    hubs = conn.execute(
        "SELECT n.kind, n.label, COUNT(*) AS degree FROM edges e JOIN nodes n ON n.node_id = e.src "
        "WHERE n.kind IN ('tag', 'dir') GROUP BY e.src, n.kind, n.label "
        "ORDER BY degree DESC, n.label LIMIT 5"
    ).fetchall()
    findings = [
        DoctorFinding(
            check="graph-edges",
            severity="info",
            message="Graph edges by kind: " + ", ".join(f"{k} {n}" for k, n in census)
            if census
            else "The graph is empty.",
        )
    ]
    if hubs:
        glue = [h for h in hubs if h[2] / docs > 0.5 and docs >= 10]
        findings.append(
            DoctorFinding(
                check="hubs",
                severity="warning" if glue else "info",
                message=(
                    f"The {hubs[0][0]} {hubs[0][1]!r} joins {hubs[0][2]} of {docs} documents: such a hub links "
                    "everything to everything, so its edges weigh almost nothing."
                    if glue
                    else "Highest-degree hubs (tag/folder: documents)."
                ),
                items=[f"{k} {label}: {degree}" for k, label, degree in hubs],
            )
        )
    return findings
