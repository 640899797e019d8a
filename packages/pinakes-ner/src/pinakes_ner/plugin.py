"""Entry module for the ``pinakes`` entry-point group: the NER plugin's hook implementations.

Core loads this module at start-up, and ``pnk`` on every start-up (``pnk --help`` too), so it
stays light: core's models load only under type checking, and spaCy is imported only when
extraction runs (a sync with new text and ``[ner] enabled = true``, or a query with
``[ner] query_model``). With ``[ner] enabled = false`` (the default) every hook returns at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pinakes_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from pinakes_core.models import DoctorFinding, EntityNeighbour

__all__ = [
    "after_sync",
    "doctor_checks",
    "entity_neighbours",
    "graph_seeds",
    "query_entities",
]


@hookimpl(trylast=True)
def after_sync(
    kb: Any, store: Any, changed: list[str], removed: list[str], relinked: list[str]
) -> None:
    """Extract entities from new chunk texts and rebuild the entity layer if anything changed.

    Runs after the graph plugin's edge derivation (``trylast``), which may have replaced the
    chunk nodes the mention edges attach to.
    """
    from pinakes_ner.layer import derive_layer

    derive_layer(kb, store, changed, removed)


@hookimpl
def graph_seeds(kb: Any, query: str) -> list[tuple[int, float]]:
    """Seed the entity nodes the query names."""
    if not kb.config.ner.enabled:
        return []
    from pinakes_ner.query import seeds_for

    return seeds_for(kb, query)


@hookimpl
def query_entities(kb: Any, query: str) -> list[str]:
    """Names of the KB's entities the query mentions (``KB.search``'s automatic ``entities``)."""
    if not (kb.config.ner.enabled and kb.config.ner.auto_entities):
        return []
    from pinakes_ner.query import entities_in

    return [e.label for e in entities_in(kb, query)]


@hookimpl
def entity_neighbours(kb: Any, doc_id: str) -> list[EntityNeighbour] | None:
    """Documents that mention the same entities as ``doc_id``."""
    if not kb.config.ner.enabled:
        return None
    from pinakes_ner.neighbours import entity_neighbours as shared

    return shared(kb.store().conn, doc_id)


@hookimpl
def doctor_checks(kb: Any, store: Any) -> list[DoctorFinding]:
    """Entity census and glue entities (named by more than 10 % of the documents)."""
    if not kb.config.ner.enabled:
        return []
    from pinakes_ner.doctor import findings

    return findings(store.conn)
