"""A fleet: several KBs searched, synced and listed as one (DESIGN §10).

Quick start::

    from pinakes_core.manage.fleet import Fleet
    with Fleet.open() as fleet:                  # every KB in the fleet registry
        result = fleet.search("how do we rotate the signing keys?", k=5)
        print(result.kb, result.hits[0].kb, result.hits[0].path)

Each KB is searched on its own, with its own model, filters and calibration; the hits are then
merged on ``Hit.score``, the comparable relevance value of a hit (the same scale in every KB),
never on rank alone, so a KB that holds nothing relevant contributes no top hit. The merged
``confidence`` is the top hit's own KB's: core's confidence is the probability that a KB's top
hit answers the query, and that hit is the merged top.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from pinakes_core.config import load_config
from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.index.embedding import Embedder
from pinakes_core.kb import KB
from pinakes_core.manage.folder import find_root
from pinakes_core.manage.registry import FleetEntry, FleetRegistry
from pinakes_core.models import Hit, SearchResult, Status, SyncReport

if TYPE_CHECKING:
    from pinakes_core.index.sync import ProgressFn

__all__ = [
    "Fleet",
    "FleetHit",
    "FleetKbResult",
    "FleetKbStatus",
    "FleetSearchResult",
    "FleetSyncItem",
    "FleetSyncReport",
    "merge_hits",
    "registry_status",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class FleetHit(Hit):
    """A hit from one KB of a fleet search, labelled with its KB."""

    kb: str = Field(description="the fleet name of the KB holding the hit")
    kb_id: str = Field(description="that KB's [kb] id")


class FleetKbResult(_Model):
    """How one KB answered a fleet search."""

    name: str
    kb_id: str
    root: str = Field(description="the KB's folder")
    hits: int = Field(description="hits this KB returned before the merge")
    top_score: float | None = Field(description="its best hit's score")
    confidence: float | None
    abstain: bool | None
    error: str | None = Field(default=None, description="why this KB gave no answer, if it failed")


class FleetSearchResult(_Model):
    """The merged answer of a fleet search.

    ``confidence`` and ``abstain`` are those of ``kb``, the KB holding the top hit (``None``
    when there is no hit).
    """

    query: str
    hits: list[FleetHit]
    confidence: float | None = None
    abstain: bool | None = None
    kb: str | None = Field(default=None, description="the KB holding the top hit")
    kbs: list[FleetKbResult]
    timings_ms: dict[str, float]


class FleetSyncItem(_Model):
    """One KB's outcome in ``Fleet.sync``: its report, or the error that stopped it."""

    name: str
    kb_id: str
    path: str
    report: SyncReport | None = None
    error: str | None = None


class FleetSyncReport(_Model):
    """What ``Fleet.sync`` did, KB by KB (a failure stops only its own KB)."""

    kbs: list[FleetSyncItem]

    @property
    def failed(self) -> list[FleetSyncItem]:
        """The KBs whose sync failed."""
        return [item for item in self.kbs if item.error is not None]


class FleetKbStatus(_Model):
    """One registered KB in ``pnk fleet list``.

    ``state`` is ``ok``, ``missing`` (no KB at the path: moved or deleted; ``pnk fleet add``
    its new folder), ``invalid`` (its ``pinakes.toml`` does not load), ``other`` (the folder
    now holds another KB) or ``error`` (its status could not be read); ``error`` says why.
    """

    name: str
    kb_id: str
    path: str
    state: str
    status: Status | None = None
    error: str | None = None


def merge_hits(
    results: Sequence[tuple[str, str, SearchResult]], k: int
) -> tuple[list[FleetHit], float | None, bool | None, str | None]:
    """Merge per-KB results into one ranking of at most ``k`` hits, by ``Hit.score``.

    Args:
        results: ``(name, kb_id, result)`` per KB, in the fleet's order.
        k: hits to keep.

    Ties in score go to the KB whose own confidence is higher (unknown last), then to fleet
    order, then to each KB's own order. Returns the hits, the confidence and abstain flag of
    the KB holding the top hit, and that KB's name.
    """
    keyed: list[tuple[tuple[float, float, int, int], FleetHit]] = []
    for position, (name, kb_id, result) in enumerate(results):
        confidence = -1.0 if result.confidence is None else result.confidence
        for rank, hit in enumerate(result.hits):
            labelled = FleetHit.model_validate({**hit.model_dump(), "kb": name, "kb_id": kb_id})
            keyed.append(((-hit.score, -confidence, position, rank), labelled))
    keyed.sort(key=lambda pair: pair[0])
    hits = [hit for _, hit in keyed[:k]]
    if not hits:
        return [], None, None, None
    top = next(result for name, _, result in results if name == hits[0].kb)
    return hits, top.confidence, top.abstain, hits[0].kb


class Fleet:
    """Several open KBs under unique names; search, sync and status span them.

    Open it with :meth:`open` (from the fleet registry, or some of its KBs, or folders).
    Closing the fleet closes its KBs.

    Raises:
        ConfigError: (from the constructor) if two KBs share a name or a KB id.
    """

    def __init__(
        self,
        members: Sequence[tuple[str, KB]],
        unavailable: Sequence[tuple[FleetEntry, str]] = (),
    ) -> None:
        names: dict[str, KB] = {}
        ids: dict[str, str] = {}
        for name, kb in members:
            if name in names:
                raise ConfigError(
                    f"Two KBs are called {name!r}: {names[name].root} and {kb.root}.",
                    "Register one under another name: pnk fleet add PATH --name OTHER.",
                )
            if kb.config.kb.id in ids:
                raise ConfigError(
                    f"{kb.root} and the KB {ids[kb.config.kb.id]!r} have the same [kb] id "
                    f"{kb.config.kb.id} (a copied folder?).",
                    "Give the copy a new id in its pinakes.toml ([kb] id).",
                )
            names[name], ids[kb.config.kb.id] = kb, name
        self._members = names
        #: Registered KBs that could not be opened, with the reason; searches and syncs
        #: report them as failed.
        self.unavailable = list(unavailable)

    @classmethod
    def open(
        cls,
        refs: Sequence[str | os.PathLike[str]] | None = None,
        *,
        registry: FleetRegistry | None = None,
        embedder: Embedder | None = None,
    ) -> Fleet:
        """Open every KB of the registry, or the ones ``refs`` names.

        Args:
            refs: registry names, KB ids or ``[kb] name`` of registered KBs, or KB folders
                (registered or not); ``None`` opens every registered KB whose folder holds it.
            registry: the registry (default: :func:`~pinakes_core.manage.registry.registry_path`).
            embedder: an embedder for every KB instead of each one's configured model (tests).

        Raises:
            ConfigError: if a ref names no registered KB and no KB folder, or a named KB's
                folder is missing.
        """
        registry = registry if registry is not None else FleetRegistry.load()
        members: list[tuple[str, KB]] = []
        if refs is None:
            unavailable: list[tuple[FleetEntry, str]] = []
            for each in registry:
                state, reason = each.check()
                if state == "ok":
                    members.append((each.name, KB.open(each.path, embedder=embedder)))
                else:
                    unavailable.append((each, reason))
            return cls(members, unavailable)
        for ref in refs:
            entry = registry.find(str(ref))
            if entry is not None:
                state, reason = entry.check()
                if state != "ok":
                    raise ConfigError(reason)
                members.append((entry.name, KB.open(entry.path, embedder=embedder)))
                continue
            folder = Path(ref)
            if not folder.is_dir():
                raise ConfigError(
                    f"{str(ref)!r} is neither a KB in the fleet registry nor a folder.",
                    "Pass a KB folder, or a name from `pnk fleet list`.",
                )
            kb = KB.open(find_root(folder), embedder=embedder)
            known = next((e for e in registry if e.kb_id == kb.config.kb.id), None)
            members.append((known.name if known else kb.config.kb.name, kb))
        return cls(members)

    # -- members --------------------------------------------------------------------------

    def __iter__(self) -> Iterator[tuple[str, KB]]:
        return iter(self._members.items())

    def __len__(self) -> int:
        return len(self._members)

    @property
    def names(self) -> list[str]:
        """The members' names, in order."""
        return list(self._members)

    def get(self, name: str) -> KB:
        """The member called ``name`` (or with that KB id).

        Raises:
            ConfigError: if there is none.
        """
        kb = self._members.get(name) or next(
            (kb for kb in self._members.values() if kb.config.kb.id == name.upper()), None
        )
        if kb is None:
            raise ConfigError(
                f"No KB called {name!r} in this fleet.", f"Members: {', '.join(self._members)}."
            )
        return kb

    def close(self) -> None:
        """Close every member KB."""
        for kb in self._members.values():
            kb.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- search ---------------------------------------------------------------------------

    def search(self, query: str, *, k: int | None = None, **filters: Any) -> FleetSearchResult:
        """Search every member and merge the hits on their scores (see the module docstring).

        A KB that fails (an unusable index, a missing plugin) is reported in ``kbs`` with its
        error; the others still answer.

        Args:
            query: any text.
            k: hits after the merge (default: the first member's ``[retrieval] k``); each KB
                is asked for ``k`` so the top ``k`` may all come from one KB.
            **filters: any other :meth:`KB.search` argument (``tags``, ``path``, ``doc_ids``,
                ``meta``, ``modified_after``, ``modified_before``, ``entities``, ``concepts``,
                ``channels``, ``explain``…), applied inside each KB as that KB applies it
                (``path`` is relative to each KB's root).

        Raises:
            ConfigError: if the fleet has no KB.
        """
        if not self._members:
            raise ConfigError(
                "The fleet has no KB to search.",
                "Register one with `pnk fleet add PATH`"
                + (
                    f" ({len(self.unavailable)} registered KB(s) cannot be opened; see `pnk fleet list`)."
                    if self.unavailable
                    else "."
                ),
            )
        started = time.perf_counter()
        wanted = k or next(iter(self._members.values())).config.retrieval.k
        answered: list[tuple[str, str, SearchResult]] = []
        outcomes = [
            FleetKbResult(
                name=entry.name,
                kb_id=entry.kb_id,
                root=str(entry.path),
                hits=0,
                top_score=None,
                confidence=None,
                abstain=None,
                error=reason,
            )
            for entry, reason in self.unavailable
        ]
        timings: dict[str, float] = {}
        for name, kb in self._members.items():
            try:
                result = kb.search(query, k=wanted, **filters)
            except PinakesError as exc:
                outcomes.append(
                    FleetKbResult(
                        name=name,
                        kb_id=kb.config.kb.id,
                        root=str(kb.root),
                        hits=0,
                        top_score=None,
                        confidence=None,
                        abstain=None,
                        error=str(exc),
                    )
                )
                continue
            answered.append((name, kb.config.kb.id, result))
            timings[f"kb:{name}"] = result.timings_ms.get("total", 0.0)
            outcomes.append(
                FleetKbResult(
                    name=name,
                    kb_id=kb.config.kb.id,
                    root=str(kb.root),
                    hits=len(result.hits),
                    top_score=result.hits[0].score if result.hits else None,
                    confidence=result.confidence,
                    abstain=result.abstain,
                )
            )
        hits, confidence, abstain, top = merge_hits(answered, wanted)
        timings["total"] = round((time.perf_counter() - started) * 1000, 3)
        return FleetSearchResult(
            query=query,
            hits=hits,
            confidence=confidence,
            abstain=abstain,
            kb=top,
            kbs=outcomes,
            timings_ms=timings,
        )

    # -- sync and status ------------------------------------------------------------------

    def sync(
        self,
        *,
        rebuild: bool = False,
        progress: ProgressFn | None = None,
        announce: Any = None,
    ) -> FleetSyncReport:
        """Sync every member, one after the other, each under its own lock.

        A KB that fails (another sync holds its lock, a bad config, a full disk) is reported
        with its error and the others still sync.

        Args:
            rebuild: rebuild each store from its files.
            progress: ``progress(stage, done, total)`` for each KB's sync.
            announce: called with each KB's name before its sync starts (a CLI prints it).
        """
        items = [
            FleetSyncItem(name=e.name, kb_id=e.kb_id, path=str(e.path), error=reason)
            for e, reason in self.unavailable
        ]
        for name, kb in self._members.items():
            if announce is not None:
                announce(name)
            try:
                report = kb.sync(rebuild=rebuild, progress=progress)
            except (PinakesError, OSError) as exc:
                items.append(
                    FleetSyncItem(
                        name=name, kb_id=kb.config.kb.id, path=str(kb.root), error=str(exc)
                    )
                )
                continue
            items.append(
                FleetSyncItem(name=name, kb_id=kb.config.kb.id, path=str(kb.root), report=report)
            )
        return FleetSyncReport(kbs=items)


def registry_status(registry: FleetRegistry | None = None) -> list[FleetKbStatus]:
    """Each registered KB with its state, and for a KB that is there its :class:`Status`.

    The status counts documents and chunks and says how fresh the index is (last sync, files
    new / changed / removed since). Never raises for one KB: its error is reported instead.
    """
    registry = registry if registry is not None else FleetRegistry.load()
    return [_entry_status(entry) for entry in registry]


def _entry_status(entry: FleetEntry) -> FleetKbStatus:
    name, kb_id, path = entry.name, entry.kb_id, str(entry.path)
    state, reason = entry.check()
    if state != "ok":
        return FleetKbStatus(name=name, kb_id=kb_id, path=path, state=state, error=reason)
    try:
        with KB(entry.path, load_config(entry.path)) as kb:
            status = kb.status()
    except (PinakesError, OSError) as exc:
        return FleetKbStatus(name=name, kb_id=kb_id, path=path, state="error", error=str(exc))
    return FleetKbStatus(name=name, kb_id=kb_id, path=path, state="ok", status=status)
