"""Shaping core results for agents: merging KBs, token budgets, the search frontier.

No ranking of its own happens here: several KBs' result lists are merged by core's fleet merge
(:func:`~pinakes_core.manage.fleet.merge_hits`, on comparable scores), and each KB's ordering and
confidence are kept as core made them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from pinakes_core import DocumentNotFoundError, Hit, SearchResult
from pinakes_core.manage.fleet import merge_hits
from pinakes_core.read.sections import approx_tokens, truncate
from pinakes_mcp.models import FrontierDoc, SearchHit
from pinakes_mcp.served import Registry, ServedKB

__all__ = ["cap_rows", "fit_lists", "frontier", "merge"]

log = logging.getLogger(__name__)


def _served_hit(hit: Hit, kb: str | None) -> SearchHit:
    return SearchHit.model_validate({**hit.model_dump(exclude={"kb", "kb_id"}), "kb": kb})


def merge(
    results: Sequence[tuple[ServedKB, SearchResult]], *, k: int, multi: bool
) -> tuple[list[SearchHit], float | None, bool | None]:
    """Merge per-KB results into one ranking of at most ``k`` hits.

    One KB's result is passed through unchanged. Several are merged by core's fleet merge
    (:func:`~pinakes_core.manage.fleet.merge_hits`): on each hit's comparable ``score``, ties to the KB
    whose own confidence is higher, each KB's own order kept. The merged ``confidence``/
    ``abstain`` are those of the KB holding the top hit, because core's confidence is the
    probability that *its* top hit answers, and that hit is now on top.

    Returns:
        The hits (``kb`` set on each when ``multi``), the confidence and the abstain flag.
    """
    if len(results) == 1:
        served, result = results[0]
        hits = [_served_hit(h, served.name if multi else None) for h in result.hits]
        return hits, result.confidence, result.abstain
    merged, confidence, abstain, _ = merge_hits(
        [(served.name, served.kb_id, result) for served, result in results], k
    )
    return [_served_hit(h, h.kb) for h in merged], confidence, abstain


def _shorten_text(row: SearchHit, budget: int) -> SearchHit:
    """Cut ``row``'s text so that the whole hit's JSON fits ``budget`` approximate tokens."""
    room = budget - approx_tokens(row.model_copy(update={"text": ""}).model_dump_json()) - 16
    text = row.text
    while True:
        text, _ = truncate(text, max(room, 1))
        cut = row.model_copy(update={"text": text, "text_truncated": True})
        over = approx_tokens(cut.model_dump_json()) - budget
        if over <= 0 or not text.strip():
            return cut
        room -= max(over, room // 4)  # JSON escapes made it longer than its characters


def cap_rows(rows: list[SearchHit], budget: int) -> tuple[list[SearchHit], bool]:
    """Keep leading hits while their JSON fits ``budget`` approximate tokens.

    The first hit is always kept; if it alone is over budget, its text is cut to fit and the
    hit says ``text_truncated: true``.

    Returns:
        The kept hits and whether anything was dropped or cut.
    """
    kept: list[SearchHit] = []
    used = 0
    for row in rows:
        cost = approx_tokens(row.model_dump_json())
        if kept and used + cost > budget:
            return kept, True
        if not kept and cost > budget:
            return [_shorten_text(row, budget)], True
        kept.append(row)
        used += cost
    return kept, False


_M = TypeVar("_M", bound=BaseModel)


def fit_lists(model: _M, budget: int, fields: Sequence[str]) -> tuple[_M, list[str]]:
    """Drop items from the end of ``model``'s list (or mapping) ``fields`` until it fits ``budget``.

    Fields are shortened in the order given, each only as far as needed (a binary search over
    how many items to keep); a mapping loses its last keys.

    Returns:
        The model (a copy when anything was dropped) and one note per shortened field.
    """
    notes: list[str] = []
    for name in fields:
        if approx_tokens(model.model_dump_json()) <= budget:
            break
        value = getattr(model, name)
        items = list(value.items()) if isinstance(value, dict) else list(value)
        rebuild = dict if isinstance(value, dict) else list

        def trial(count: int, items: list[Any] = items, rebuild: Any = rebuild) -> Any:
            return rebuild(items[:count])

        lo, hi = 0, len(items)  # the most items that fit lies in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            candidate = model.model_copy(update={name: trial(mid)})
            if approx_tokens(candidate.model_dump_json()) <= budget:
                lo = mid
            else:
                hi = mid - 1
        model = model.model_copy(update={name: trial(lo)})
        notes.append(
            f"{len(items) - lo} of {len(items)} {name} were left out to stay under "
            f"~{budget} tokens."
        )
    return model, notes


def frontier(registry: Registry, hits: Sequence[SearchHit], *, limit: int) -> list[FrontierDoc]:
    """Return up to ``limit`` documents the hits' documents link to, in hit order.

    Only links that resolved to a document (``dst_doc``) in a served KB count; documents that
    are already hits are left out. Each document's links and title come from its KB's index
    (:meth:`~pinakes_core.kb.KB.outlinks`, no file read), under its lock, one at a time.
    """
    served_by_name = {served.name: served for served in registry}
    only = next(iter(served_by_name))  # single-KB hits carry no kb name
    seen = {(hit.kb or only, hit.doc_id) for hit in hits}
    sources = list(dict.fromkeys((hit.kb or only, hit.doc_id) for hit in hits))
    found: list[FrontierDoc] = []
    for kb_name, doc_id in sources:
        served = served_by_name[kb_name]
        with registry.using(served) as kb:
            try:
                links = kb.outlinks(doc_id)[1]
            except DocumentNotFoundError:  # deleted since the search
                continue
        for link in links:
            if link.dst_doc is None:
                continue
            dst_kb = getattr(link, "dst_kb", None)
            target = registry.find(dst_kb) if dst_kb else served
            if target is None or (target.name, link.dst_doc) in seen:
                continue
            seen.add((target.name, link.dst_doc))
            with registry.using(target) as kb:
                try:
                    title = kb.outlinks(link.dst_doc)[0]
                except DocumentNotFoundError:
                    continue
            found.append(
                FrontierDoc(
                    doc_id=link.dst_doc, title=title, rel=link.rel, kb=target.name, via=doc_id
                )
            )
            if len(found) >= limit:
                return found
    return found
