"""Write-back: links between documents an answer used together (DESIGN §9).

(Schema growth — relation *types* the schema lacks — is :mod:`pinakes_core.paid.suggestions`; a
typed link staged here whose relation is outside ``[schema]`` is logged there as well.)

An answer that cites passages of two documents is evidence that the documents are related.
:func:`propose` turns the answers of one operation into typed link suggestions: a relation the
model read in the passages (``depends-on``, ``part-of``…) keeps its type, any other pair cited
together is ``co-cited``. A suggestion's confidence grows with its support — the number of
answers (sub-answers and the final one) citing both documents, plus one when the model typed
the relation: ``1 - 0.5 ** support`` (0.5, 0.75, 0.875, …).

Nothing is written unless asked. :func:`stage` (``--write-suggestions``) appends each new
suggestion to a ``suggested_links:`` list in the source document's sidecar through the same
round-trip writer as ``pnk link``; sync does not index that list, so a staged suggestion is
only a reviewable diff. ``pnk review`` moves an accepted one into ``links:`` (with
``origin: deep``, its confidence and the operation id) or deletes a rejected one. A link that
already exists — in the index, in the sidecar or among the staged ones — is never staged again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from pinakes_core.errors import PinakesError, SidecarError, UnsafeFileError
from pinakes_core.read.resolution import resolver
from pinakes_core.read.sidecar import edit_sidecar, read_sidecar, sidecar_path, write_skeleton
from pinakes_core.uri import SCHEME

if TYPE_CHECKING:
    from pinakes_core.kb import KB
    from pinakes_core.paid.passages import Passage

__all__ = [
    "CO_CITED",
    "SUGGESTED_KEY",
    "LinkSuggestion",
    "ReviewReport",
    "StagedSuggestion",
    "propose",
    "review",
    "stage",
    "staged",
]

SUGGESTED_KEY = "suggested_links"
CO_CITED = "co-cited"
#: At most this many suggestions per operation (the strongest first).
MAX_SUGGESTIONS = 10


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class LinkSuggestion(_Model):
    """A proposed link ``src → dst``."""

    src_doc: str
    src_path: str
    dst_doc: str
    dst_path: str
    rel: str
    confidence: float
    support: int
    operation: str
    status: Literal["proposed", "staged", "duplicate", "failed"] = "proposed"
    note: str | None = None


class StagedSuggestion(_Model):
    """A suggestion waiting in a sidecar's ``suggested_links:`` for review."""

    id: str
    src_doc: str
    src_path: str
    to: str
    dst_path: str | None
    rel: str
    confidence: float | None
    operation: str | None


class ReviewReport(_Model):
    """What ``pnk review --accept/--reject`` did."""

    accepted: list[StagedSuggestion]
    rejected: list[StagedSuggestion]
    unknown: list[str]


def propose(
    answers: Sequence[Sequence[Passage]],
    relations: Sequence[tuple[str, str, str]],
    operation: str,
    min_confidence: float,
) -> list[LinkSuggestion]:
    """Suggest links between documents cited together (see the module doc for the scoring)."""
    paths: dict[str, str] = {}
    support: dict[frozenset[str], int] = {}
    direction: dict[frozenset[str], tuple[str, str]] = {}
    rel: dict[frozenset[str], str] = {}
    for cited in answers:
        docs = list(dict.fromkeys(p.doc_id for p in cited))
        for passage in cited:
            paths.setdefault(passage.doc_id, passage.path)
        for i, a in enumerate(docs):
            for b in docs[i + 1 :]:
                pair = frozenset((a, b))
                support[pair] = support.get(pair, 0) + 1
                direction.setdefault(pair, (a, b))
    for src, dst, typed in relations:
        pair = frozenset((src, dst))
        if pair in support and pair not in rel:
            support[pair] += 1
            direction[pair] = (src, dst)
            rel[pair] = typed
    out = []
    for pair, count in support.items():
        confidence = round(1 - 0.5**count, 3)
        if confidence < min_confidence:
            continue
        src, dst = direction[pair]
        out.append(
            LinkSuggestion(
                src_doc=src,
                src_path=paths[src],
                dst_doc=dst,
                dst_path=paths[dst],
                rel=rel.get(pair, CO_CITED),
                confidence=confidence,
                support=count,
                operation=operation,
            )
        )
    out.sort(key=lambda s: (-s.confidence, s.src_path, s.dst_path))
    return out[:MAX_SUGGESTIONS]


def _in_vocabulary(kb: KB, suggestion: LinkSuggestion) -> tuple[LinkSuggestion, bool]:
    """The suggestion with its relation in the KB's ``[schema]`` words, and whether it is one.

    The model's verb is matched like ``pnk link --rel`` matches the user's ("relies on" →
    ``depends-on``; an inverse such as ``cited-by`` is kept as written). ``co-cited`` is
    Pinakes' own relation and is left alone.
    """
    if suggestion.rel == CO_CITED:
        return suggestion, True
    from pinakes_core.config import normalise_rel
    from pinakes_core.manage.schema import match_relation

    match = match_relation(kb.config.schema_, lambda: kb.embedder, suggestion.rel)
    types = kb.config.schema_.relation_types
    inverse = types[match.rel].inverse if match.inverted and match.rel in types else None
    rel = normalise_rel(inverse) if inverse else match.rel
    return suggestion.model_copy(update={"rel": rel}), match.in_schema


def _existing(kb: KB, src_doc: str, src_path: str) -> set[tuple[str, str]]:
    """``(dst_doc, rel)`` of every link ``src_doc`` has: indexed, authored or staged."""
    conn = kb.store().conn
    found = {
        (r[0], r[1])
        for r in conn.execute(
            "SELECT dst_doc, rel FROM links WHERE src_doc = ? AND dst_doc IS NOT NULL", (src_doc,)
        )
    }
    side = sidecar_path(kb.root / src_path)
    if side.exists():
        resolve = resolver(conn, kb.config.kb.id, kb.config.kb.name)
        for link in read_sidecar(side).links:
            dst = resolve(src_path, link.to)
            if dst:
                found.add((dst, link.rel))
        for entry in _staged_entries(side):
            dst = resolve(src_path, str(entry.get("to", "")))
            if dst:
                found.add((dst, str(entry.get("rel", ""))))
    return found


def _is_duplicate(kb: KB, suggestion: LinkSuggestion) -> bool:
    forward = _existing(kb, suggestion.src_doc, suggestion.src_path)
    if suggestion.rel != CO_CITED:
        return (suggestion.dst_doc, suggestion.rel) in forward
    backward = _existing(kb, suggestion.dst_doc, suggestion.dst_path)
    # "Cited together" adds nothing where the pair is already linked in either direction.
    return any(dst == suggestion.dst_doc for dst, _ in forward) or any(
        dst == suggestion.src_doc for dst, _ in backward
    )


def stage(kb: KB, suggestions: Sequence[LinkSuggestion]) -> list[LinkSuggestion]:
    """Append each new suggestion to its source sidecar's ``suggested_links:``.

    Returns the suggestions with their status: ``staged``, ``duplicate`` (not written) or
    ``failed`` (the sidecar does not parse; it is left untouched).
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    from pinakes_core.manage.schema import GENERIC_REL
    from pinakes_core.paid.suggestions import record_schema_suggestion

    out = []
    for proposed in suggestions:
        suggestion, in_schema = _in_vocabulary(kb, proposed)
        side = sidecar_path(kb.root / suggestion.src_path)
        try:
            if _is_duplicate(kb, suggestion):
                out.append(suggestion.model_copy(update={"status": "duplicate"}))
                continue
            if not side.exists():
                write_skeleton(side, suggestion.src_doc)
            entry = CommentedMap(
                [
                    ("to", f"{SCHEME}{kb.config.kb.id}/{suggestion.dst_doc}"),
                    ("rel", suggestion.rel),
                    ("origin", "deep"),
                    ("confidence", suggestion.confidence),
                    ("operation", suggestion.operation),
                ]
            )

            def change(data: Any, entry: CommentedMap = entry) -> Any:
                data = CommentedMap() if data is None else data
                if data.get(SUGGESTED_KEY) is None:
                    data[SUGGESTED_KEY] = CommentedSeq()
                data[SUGGESTED_KEY].append(entry)
                return data

            edit_sidecar(side, change, root=kb.root.resolve())  # no write through a link out
            out.append(suggestion.model_copy(update={"status": "staged"}))
            if not in_schema and suggestion.rel not in (CO_CITED, GENERIC_REL):
                record_schema_suggestion(
                    kb.root,
                    "relation",
                    suggestion.rel,
                    source=suggestion.src_path,
                    confidence=suggestion.confidence,
                    run=suggestion.operation,
                    origin="deep",
                )
        except SidecarError as exc:
            out.append(suggestion.model_copy(update={"status": "failed", "note": exc.message}))
    return out


def _staged_entries(side: Path) -> list[dict[str, Any]]:
    """The suggestion entries staged in one sidecar; none from one too big or unsafe to read.

    Read like every sidecar: within the YAML size limit, never a FIFO, and checked for alias
    bombs before it is loaded.
    """
    from ruamel.yaml.error import YAMLError

    from pinakes_core.intake import (
        MAX_YAML_BYTES,
        YamlLimitError,
        check_yaml,
        read_limited,
        yaml_loader,
    )

    try:
        raw = read_limited(side, limit=MAX_YAML_BYTES)
    except (OSError, UnsafeFileError):
        return []
    if SUGGESTED_KEY.encode() not in raw:
        return []
    try:
        text = raw.decode("utf-8")
        check_yaml(text)
        data = yaml_loader().load(text)
    except (YAMLError, YamlLimitError, UnicodeDecodeError):
        return []
    entries = data.get(SUGGESTED_KEY) if isinstance(data, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _entry_id(src_doc: str, entry: dict[str, Any]) -> str:
    key = f"{src_doc}\0{entry.get('to')}\0{entry.get('rel')}"
    return hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]


def staged(kb: KB) -> list[StagedSuggestion]:
    """Every suggestion staged in the KB's sidecars, in path order."""
    conn = kb.store().conn
    resolve = resolver(conn, kb.config.kb.id, kb.config.kb.name)
    by_id = dict(conn.execute("SELECT doc_id, path FROM documents").fetchall())
    out = []
    for doc_id, path in sorted(by_id.items(), key=lambda item: item[1]):
        side = sidecar_path(kb.root / path)
        if not side.is_file():
            continue
        for entry in _staged_entries(side):
            to = str(entry.get("to", ""))
            dst = resolve(path, to)
            confidence = entry.get("confidence")
            out.append(
                StagedSuggestion(
                    id=_entry_id(doc_id, entry),
                    src_doc=doc_id,
                    src_path=path,
                    to=to,
                    dst_path=by_id.get(dst) if dst else None,
                    rel=str(entry.get("rel", "")),
                    confidence=float(confidence) if isinstance(confidence, int | float) else None,
                    operation=str(entry["operation"]) if entry.get("operation") else None,
                )
            )
    return out


def review(kb: KB, *, accept: Sequence[str] = (), reject: Sequence[str] = ()) -> ReviewReport:
    """Accept (move into ``links:``) or reject (delete) staged suggestions by id.

    Raises:
        PinakesError: if an id is both accepted and rejected.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    both = set(accept) & set(reject)
    if both:
        raise PinakesError(
            f"Suggestion {sorted(both)[0]} is both accepted and rejected.", "Pick one."
        )
    items = {s.id: s for s in staged(kb)}
    accepted: list[StagedSuggestion] = []
    rejected: list[StagedSuggestion] = []
    wanted = {**{i: True for i in accept}, **{i: False for i in reject}}
    unknown = [i for i in wanted if i not in items]
    by_file: dict[str, list[StagedSuggestion]] = {}
    for ident in wanted:
        if ident in items:
            by_file.setdefault(items[ident].src_path, []).append(items[ident])
    for path, chosen in by_file.items():
        ids = {s.id: wanted[s.id] for s in chosen}
        src_doc = chosen[0].src_doc

        def change(data: Any, ids: dict[str, bool] = ids, src_doc: str = src_doc) -> Any:
            seq = data.get(SUGGESTED_KEY) or []
            for entry in list(seq):
                verdict = (
                    ids.get(_entry_id(src_doc, dict(entry))) if isinstance(entry, dict) else None
                )
                if verdict is None:
                    continue
                seq.remove(entry)
                if verdict:
                    if data.get("links") is None:
                        data["links"] = CommentedSeq()
                    present = any(
                        isinstance(link, dict)
                        and link.get("to") == entry.get("to")
                        and link.get("rel") == entry.get("rel")
                        for link in data["links"]
                    )
                    if not present:
                        data["links"].append(CommentedMap(entry))
            if SUGGESTED_KEY in data and not seq:
                del data[SUGGESTED_KEY]
            return data

        edit_sidecar(sidecar_path(kb.root / path), change, root=kb.root.resolve())
        for suggestion in chosen:
            (accepted if wanted[suggestion.id] else rejected).append(suggestion)
    return ReviewReport(accepted=accepted, rejected=rejected, unknown=unknown)
