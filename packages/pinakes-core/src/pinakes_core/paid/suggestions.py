"""Schema growth as a reviewed diff (DESIGN §9).

Anything that meets a type the schema lacks — ``pnk link`` with an unknown relation today,
``ask --deep`` write-back and frequent NER labels later — calls
:func:`record_schema_suggestion`, which appends one JSON line to
``.pinakes/schema-suggestions.jsonl``. Nothing changes the schema at run time. ``pnk schema
review`` (:func:`review_schema`) proposes the suggestions that pass every threshold of
``[schema.review]`` — seen in ≥ 5 runs, from ≥ 3 sources, mean confidence > 0.7, and not within
0.85 cosine of an existing type — and :func:`promote` writes one into ``pinakes.toml`` with the
round-trip TOML writer, keeping the user's comments. The thresholds follow ctxgraph's
schema-review job; unlike Youtu-GraphRAG's write-back, nothing is promoted without review.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tomlkit.toml_document import TOMLDocument

from pinakes_core.config import CONFIG_FILE, SchemaConfig, normalise_rel
from pinakes_core.derived import open_nofollow, store_dir
from pinakes_core.errors import PinakesError
from pinakes_core.manage._toml import edit_config, set_path, unified_diff
from pinakes_core.manage.schema import embed_labels, relation_label, relation_vocabulary
from pinakes_core.uri import new_ulid

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder

__all__ = [
    "SUGGESTIONS_FILE",
    "Candidate",
    "SchemaReview",
    "SchemaSuggestion",
    "promote",
    "read_suggestions",
    "record_schema_suggestion",
    "review_schema",
]

SUGGESTIONS_FILE = "schema-suggestions.jsonl"
Kind = Literal["relation", "entity", "attribute"]
#: The ``[schema]`` table each kind of suggestion is promoted into.
TABLES: dict[str, str] = {
    "relation": "relation_types",
    "entity": "entity_types",
    "attribute": "attribute_types",
}
_MAX_NAME = 64
_MAX_TEXT = 300
_MAX_LINE = 4096
#: Candidates compared by embedding at most (the most-seen first); a log is never trusted in size.
_MAX_CANDIDATES = 200


class SchemaSuggestion(BaseModel):
    """One logged observation of a type the schema lacks.

    Attributes:
        kind: ``relation``, ``entity`` or ``attribute``.
        name: the type's name, lower-kebab.
        source: where it was seen (a document path), counted for ``min_sources``.
        run: the run that saw it (one ``pnk link``, one ``ask --deep``, one sync), counted for
            ``min_runs``.
        confidence: how sure the caller was, in [0, 1] (a user typing it: 1.0).
        origin: who suggested it: ``link``, ``deep``, ``ner``…
        at: UNIX time.
        note: an optional short remark (e.g. the sentence it came from).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: Kind
    name: str = Field(min_length=1, max_length=_MAX_NAME)
    source: str = Field(max_length=_MAX_TEXT)
    run: str = Field(min_length=1, max_length=_MAX_TEXT)
    confidence: float = Field(ge=0.0, le=1.0)
    origin: str = Field(min_length=1, max_length=_MAX_NAME)
    at: float
    note: str | None = Field(default=None, max_length=_MAX_TEXT)


def _type_name(text: str) -> str:
    return normalise_rel(text) if any(c.isalnum() for c in text) else ""


def suggestions_path(root: Path) -> Path:
    """The suggestions log of the KB at ``root`` (derived, disposable, like all of ``.pinakes``)."""
    return store_dir(root) / SUGGESTIONS_FILE


def record_schema_suggestion(
    root: Path,
    kind: Kind,
    name: str,
    *,
    source: str,
    confidence: float = 1.0,
    run: str | None = None,
    origin: str = "link",
    note: str | None = None,
) -> SchemaSuggestion:
    """Append one suggestion to ``.pinakes/schema-suggestions.jsonl``; never touches the schema.

    Args:
        root: the KB root.
        kind: ``relation``, ``entity`` or ``attribute``.
        name: the type as seen (normalised to lower-kebab).
        source: where it was seen, e.g. the document's KB-relative path.
        confidence: the caller's confidence in [0, 1].
        run: an id shared by everything one run suggests; a fresh ULID when omitted.
        origin: the caller (``link``, ``deep``, ``ner``…).
        note: an optional remark; cut to 300 characters.

    Returns:
        The suggestion as written.

    Raises:
        PinakesError: if the name is empty or too long, the kind unknown or the confidence
            outside [0, 1].
    """
    key = _type_name(name)
    try:
        suggestion = SchemaSuggestion(
            kind=kind,
            name=key,
            source=source[:_MAX_TEXT],
            run=run or new_ulid(),
            confidence=confidence,
            origin=origin,
            at=time.time(),
            note=note[:_MAX_TEXT] if note else None,
        )
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise PinakesError(
            f"Schema suggestion {name[:80]!r} is invalid: {'.'.join(map(str, problem['loc']))} "
            f"{problem['msg']}.",
            "Use a short name, a kind of relation/entity/attribute and a confidence in [0, 1].",
        ) from None
    path = store_dir(root, create=True) / SUGGESTIONS_FILE
    line = (suggestion.model_dump_json() + "\n").encode("utf-8")
    # One write of one short line with O_APPEND: concurrent writers never interleave a line.
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return suggestion


def read_suggestions(root: Path) -> tuple[list[SchemaSuggestion], int]:
    """Read the suggestions log; returns the valid suggestions and the number of bad lines."""
    path = suggestions_path(root)
    found: list[SchemaSuggestion] = []
    bad = 0
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return [], 0
    with handle:
        for raw in handle:
            if len(raw) > _MAX_LINE:
                bad += 1
                continue
            if not raw.strip():
                continue
            try:
                found.append(SchemaSuggestion.model_validate(json.loads(raw)))
            except (ValueError, ValidationError):
                bad += 1
    return found, bad


class Candidate(BaseModel):
    """A type suggested often enough to be considered, with the evidence and the verdict.

    Attributes:
        kind: ``relation``, ``entity`` or ``attribute``.
        name: the proposed type name.
        seen: how many suggestions name it.
        runs: distinct runs that suggested it.
        sources: distinct sources it was seen in.
        mean_confidence: the mean of the suggestions' confidences.
        nearest: the existing type of the same kind most similar to it (if any).
        similarity: its cosine to ``nearest`` (``None`` when the kind has no types yet).
        blocked_by: the thresholds it fails (empty: it is proposed).
        diff: for a proposal, the unified diff of ``pinakes.toml`` that promotes it.
    """

    model_config = ConfigDict(frozen=True)

    kind: Kind
    name: str
    seen: int
    runs: int
    sources: int
    mean_confidence: float
    nearest: str | None = None
    similarity: float | None = None
    blocked_by: list[str] = []
    diff: str = ""

    @property
    def passes(self) -> bool:
        """Whether every threshold is met."""
        return not self.blocked_by


class SchemaReview(BaseModel):
    """What ``pnk schema review`` found.

    Attributes:
        file: the suggestions log.
        suggestions: valid suggestions read.
        bad_lines: lines that were not valid suggestions (skipped).
        proposals: candidates passing every threshold, each with its diff.
        held: the other candidates, each with the thresholds it fails.
    """

    file: str
    suggestions: int
    bad_lines: int
    proposals: list[Candidate]
    held: list[Candidate]


def _known(schema: SchemaConfig, kind: str) -> dict[str, str]:
    """Every word that already names a type of ``kind`` → the type (for relations: aliases too)."""
    if kind == "relation":
        return {word: entry[0] for word, entry in relation_vocabulary(schema).items()}
    table: dict[str, str] = getattr(schema, TABLES[kind])
    return {name: name for name in table}


def _label(kind: str, word: str) -> str:
    return relation_label(word) if kind == "relation" else word.replace("-", " ")


def _nearest(
    schema: SchemaConfig, embedder: Callable[[], Embedder], kind: str, names: list[str]
) -> dict[str, tuple[str, float]]:
    """For each name, the most similar existing type of ``kind`` and the cosine (real model)."""
    known = _known(schema, kind)
    if not known or not names:
        return {}
    words = list(known)
    model = embedder()
    existing = embed_labels(model, [_label(kind, w) for w in words])
    asked = np.asarray(model.embed_documents([_label(kind, n) for n in names]), dtype=np.float32)
    scores = asked @ existing.T
    out = {}
    for i, name in enumerate(names):
        j = int(np.argmax(scores[i]))
        out[name] = (known[words[j]], round(float(scores[i, j]), 4))
    return out


def review_schema(
    root: Path, schema: SchemaConfig, embedder: Callable[[], Embedder]
) -> SchemaReview:
    """Weigh every logged suggestion against ``[schema.review]``; nothing is written.

    Suggestions naming a type the schema already has (or, for relations, one of its aliases or
    inverses) are skipped. Each remaining name is a candidate; it is proposed when it was seen
    in at least ``min_runs`` runs and ``min_sources`` sources, with a mean confidence above
    ``min_confidence``, and its cosine to the nearest existing type of its kind (embedded with
    the KB's model) is below ``max_similarity``.

    Args:
        root: the KB root (its suggestions log and ``pinakes.toml``).
        schema: the KB's ``[schema]`` as loaded.
        embedder: gives the KB's embedding model; called only when there is something to embed.
    """
    limits = schema.review
    suggestions, bad = read_suggestions(root)
    groups: dict[tuple[str, str], list[SchemaSuggestion]] = defaultdict(list)
    known = {kind: _known(schema, kind) for kind in TABLES}
    for s in suggestions:
        if s.name not in known[s.kind]:
            groups[(s.kind, s.name)].append(s)
    ranked = sorted(groups.items(), key=lambda g: (-len({s.run for s in g[1]}), g[0]))
    ranked = ranked[:_MAX_CANDIDATES]
    near: dict[tuple[str, str], tuple[str, float]] = {}
    for kind in TABLES:
        names = [name for (k, name), _ in ranked if k == kind]
        near.update({(kind, n): v for n, v in _nearest(schema, embedder, kind, names).items()})
    proposals, held = [], []
    for (kind, name), group in ranked:
        runs = len({s.run for s in group})
        sources = len({s.source for s in group})
        mean = sum(s.confidence for s in group) / len(group)
        nearest, similarity = near.get((kind, name), (None, None))
        blocked = []
        if runs < limits.min_runs:
            blocked.append(f"seen in {runs} run(s), needs {limits.min_runs}")
        if sources < limits.min_sources:
            blocked.append(f"seen in {sources} source(s), needs {limits.min_sources}")
        if not mean > limits.min_confidence:
            blocked.append(f"mean confidence {mean:.2f}, needs > {limits.min_confidence}")
        if similarity is not None and similarity >= limits.max_similarity:
            blocked.append(
                f"{similarity:.2f} cosine to existing {kind} {nearest!r}, needs < "
                f"{limits.max_similarity}"
            )
        candidate = Candidate(
            kind=kind,  # type: ignore[arg-type]
            name=name,
            seen=len(group),
            runs=runs,
            sources=sources,
            mean_confidence=round(mean, 4),
            nearest=nearest,
            similarity=similarity,
            blocked_by=blocked,
        )
        if blocked:
            held.append(candidate)
        else:
            diff = promote(root, candidate, write=False)
            proposals.append(candidate.model_copy(update={"diff": diff}))
    return SchemaReview(
        file=str(suggestions_path(root).relative_to(root)),
        suggestions=len(suggestions),
        bad_lines=bad,
        proposals=proposals,
        held=held,
    )


def promote(root: Path, candidate: Candidate, *, write: bool) -> str:
    """Add ``candidate`` to ``[schema]`` in the ``pinakes.toml`` of the KB at ``root``.

    Comments and layout are kept. The new type gets a comment with its evidence. A table written
    as a list of names gets the name appended. With ``write=False`` nothing is written (the diff
    is a preview); with ``write=True`` the file is replaced atomically (a caller holding the
    KB's ``Config`` loads it again to see the new type).

    Returns:
        The unified diff of ``pinakes.toml``.

    Raises:
        ConfigError: if ``pinakes.toml`` is invalid, or its ``[schema]`` has a shape the change
            cannot be placed in.
    """
    table = ("schema", TABLES[candidate.kind])
    note = (
        f"added by pnk schema review {time.strftime('%Y-%m-%d')}: seen in {candidate.runs} runs "
        f"and {candidate.sources} sources, mean confidence {candidate.mean_confidence:.2f}"
    )

    def change(doc: TOMLDocument) -> None:
        current: Any = doc
        for part in table:
            current = current.get(part) if isinstance(current, dict) else None
        if isinstance(current, list):  # entity_types = ["person", …]: append the name
            current.append(candidate.name)
            return
        value: Any = {} if candidate.kind == "relation" else ""
        set_path(doc, (*table, candidate.name), value, comment=note)

    before, after = edit_config(root, change, write=write)
    return unified_diff(CONFIG_FILE, before, after)
