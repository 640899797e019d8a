"""The seed schema at work: relation matching and the doctor's schema check (DESIGN §9).

``[schema] relation_types`` names the KB's typed relations, each with an optional inverse and
aliases. A relation someone types — ``pnk link --rel "relies on"``, ``links(rel="cited by")`` —
maps to a schema relation by, in order: its exact (lower-kebab) name, an alias, the inverse
(which follows the relation backwards), then label-embedding cosine over all of those. A
relation outside the schema is allowed; ``pnk doctor`` lists the ones in use.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pinakes_core.config import SchemaConfig, normalise_rel
from pinakes_core.models import DoctorFinding

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder, Vectors

__all__ = [
    "GENERIC_REL",
    "REL_MARGIN",
    "REL_THRESHOLD",
    "RelationMatch",
    "match_relation",
    "relation_label",
    "relation_vocabulary",
    "schema_findings",
    "schema_text",
]

#: The relation of an untyped link (a Markdown link in the text, a sidecar link without rel).
GENERIC_REL = "links-to"
#: A free-text relation maps to a typed one only above this cosine, and only if it beats the
#: runner-up by this margin (measured with all-MiniLM-L6-v2 on sentence-embedded relations:
#: "relies on" → depends-on 0.87, "replaces" → supersedes 0.80, "eats" ties at 0.80).
REL_THRESHOLD = 0.80
REL_MARGIN = 0.01
# Relations are embedded inside a sentence: a bare verb ("relies on") carries too little for the
# model, "this document relies on that document" carries the relation.
_REL_SENTENCE = "this document {} that document"
_LIST_CAP = 20

Via = Literal["exact", "alias", "inverse", "embedding", "none"]


class RelationMatch(BaseModel):
    """What a typed relation text matched.

    Attributes:
        asked: the text as given.
        rel: the relation to store or follow (lower-kebab). For ``via="none"`` it is the
            normalised text itself.
        via: how it matched: ``exact``, ``alias``, ``inverse``, ``embedding``, or ``none``.
        inverted: ``True`` when the text named the inverse: follow ``rel`` backwards.
        score: the cosine for an embedding match, else ``None``.
        in_schema: whether ``rel`` is a relation type of ``[schema]``.
    """

    model_config = ConfigDict(frozen=True)

    asked: str
    rel: str
    via: Via
    inverted: bool = False
    score: float | None = None
    in_schema: bool = Field(default=False)


def relation_vocabulary(
    schema: SchemaConfig, also: Iterable[str] = ()
) -> dict[str, tuple[str, Via, bool]]:
    """Map every word for a relation to ``(relation, via, inverted)``.

    Schema names come first, then inverses and aliases, then ``also`` (relations in use) as
    their own names. Keys are lower-kebab.
    """
    vocab: dict[str, tuple[str, Via, bool]] = {}
    for name in schema.relation_types:
        vocab[name] = (name, "exact", False)
    for name, rel in schema.relation_types.items():
        if rel.inverse:
            vocab.setdefault(normalise_rel(rel.inverse), (name, "inverse", True))
        for alias in rel.aliases:
            vocab.setdefault(normalise_rel(alias), (name, "alias", False))
    for name in also:
        vocab.setdefault(normalise_rel(name), (normalise_rel(name), "exact", False))
    return vocab


def relation_label(word: str) -> str:
    """The sentence a relation word is embedded in (``depends-on`` → "this document depends on …")."""
    return _REL_SENTENCE.format(word.replace("-", " "))


_CACHE_LOCK = threading.Lock()
_LABEL_CACHE: dict[tuple[str, tuple[str, ...]], Vectors] = {}


def embed_labels(embedder: Embedder, labels: Sequence[str]) -> Vectors:
    """Embed type labels, cached per model and label set (the schema rarely changes)."""
    key = (embedder.model_id, tuple(labels))
    with _CACHE_LOCK:
        cached = _LABEL_CACHE.get(key)
    if cached is None:
        cached = np.asarray(embedder.embed_documents(list(labels)), dtype=np.float32)
        with _CACHE_LOCK:
            if len(_LABEL_CACHE) > 32:
                _LABEL_CACHE.clear()
            _LABEL_CACHE[key] = cached
    return cached


def match_relation(
    schema: SchemaConfig,
    embedder: Callable[[], Embedder],
    text: str,
    *,
    also: Iterable[str] = (),
) -> RelationMatch:
    """Map a relation name or free-text verb to a schema relation (or one in ``also``).

    Exact names, aliases and inverses need no model; otherwise every word for every relation is
    embedded in a sentence and the best relation wins if its cosine is at least
    :data:`REL_THRESHOLD` and beats the runner-up relation by :data:`REL_MARGIN`. Nothing is
    written and nothing raises: an unmatched text comes back with ``via="none"``.

    Args:
        schema: the KB's ``[schema]``.
        embedder: gives the KB's embedding model; called only when no exact word matches.
        text: the relation as someone typed it.
        also: more relation names to match (e.g. the ones in use).
    """
    wanted = normalise_rel(text)
    vocab = relation_vocabulary(schema, also)
    if wanted in vocab:
        rel, via, inverted = vocab[wanted]
        return RelationMatch(
            asked=text,
            rel=rel,
            via=via,
            inverted=inverted,
            in_schema=rel in schema.relation_types,
        )
    if not vocab:
        return RelationMatch(asked=text, rel=wanted, via="none")
    words = list(vocab)
    model = embedder()
    vectors = embed_labels(model, [relation_label(w) for w in words])
    query = np.asarray(model.embed_query(relation_label(text.strip())), dtype=np.float32)
    scores = vectors @ query
    best: dict[tuple[str, bool], float] = {}
    for word, score in zip(words, scores.tolist(), strict=True):
        rel, _, inverted = vocab[word]
        best[(rel, inverted)] = max(best.get((rel, inverted), -1.0), float(score))
    ranked = sorted(best.items(), key=lambda item: -item[1])
    (rel, inverted), top = ranked[0]
    margin = top - ranked[1][1] if len(ranked) > 1 else 1.0
    if top >= REL_THRESHOLD and margin >= REL_MARGIN:
        return RelationMatch(
            asked=text,
            rel=rel,
            via="embedding",
            inverted=inverted,
            score=round(top, 4),
            in_schema=rel in schema.relation_types,
        )
    return RelationMatch(asked=text, rel=wanted, via="none", score=round(top, 4))


def schema_text(schema: SchemaConfig) -> str:
    """The seed schema as plain text, for an extraction or write-back prompt (DESIGN §9).

    One line per type: ``entity person: A named individual.``,
    ``relation depends-on (inverse required-by; also: relies on, needs): X needs Y.``.
    Empty when the KB has no schema.
    """
    lines = [f"entity {name}: {text}".rstrip(": ") for name, text in schema.entity_types.items()]
    for name, rel in schema.relation_types.items():
        extra = [f"inverse {rel.inverse}"] if rel.inverse else []
        extra += [f"also: {', '.join(rel.aliases)}"] if rel.aliases else []
        head = f"relation {name}" + (f" ({'; '.join(extra)})" if extra else "")
        lines.append(f"{head}: {rel.description}".rstrip(": "))
    lines += [
        f"attribute {name}: {text}".rstrip(": ") for name, text in schema.attribute_types.items()
    ]
    return "\n".join(lines)


def schema_findings(schema: SchemaConfig, conn: sqlite3.Connection) -> list[DoctorFinding]:
    """Doctor findings: relations in use (in the store ``conn``) that the schema lacks, or aliases.

    Silent when the KB has no relation types in ``[schema]`` (it opted out of a schema).
    """
    if not schema.relation_types:
        return []
    vocab = relation_vocabulary(schema)
    rows = conn.execute(
        "SELECT l.rel, COUNT(*), MIN(d.path) FROM links l JOIN documents d ON d.doc_id = l.src_doc "
        "WHERE l.origin != 'reverse-scan' GROUP BY l.rel ORDER BY COUNT(*) DESC, l.rel"
    ).fetchall()
    outside, aliased = [], []
    for rel, count, example in rows:
        entry = vocab.get(rel)
        if rel == GENERIC_REL or (entry is not None and entry[1] != "alias"):
            continue  # untyped, a schema relation, or its inverse
        if entry is not None:
            aliased.append(f"{rel} → {entry[0]}: {count} link(s), e.g. in {example}")
        else:
            outside.append(f"{rel}: {count} link(s), e.g. in {example}")
    findings = []
    if outside:
        findings.append(
            DoctorFinding(
                check="relations-outside-schema",
                severity="info",
                message=f"{len(outside)} relation(s) in use are not among the schema's relation "
                "types in pinakes.toml; that is allowed. `pnk schema review` proposes frequent "
                "ones, or add them by hand.",
                items=outside[:_LIST_CAP],
            )
        )
    if aliased:
        findings.append(
            DoctorFinding(
                check="relation-aliases",
                severity="info",
                message=f"{len(aliased)} relation(s) in use are aliases of a schema relation; "
                "they match it in links(rel=…), writing the relation's own name is clearer.",
                items=aliased[:_LIST_CAP],
            )
        )
    return findings
