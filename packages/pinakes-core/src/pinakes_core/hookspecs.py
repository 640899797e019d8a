"""Plugin hook specifications (DESIGN §12).

Plugins (pinakes-graph, pinakes-ner, third parties) register through the ``pinakes``
entry-point group; the module an entry point names holds ``@hookimpl`` functions. Core's own
channels are registered through the same hooks, so the plugin path is always exercised.

The specifications sit below every room (docs/architecture.md), so they name the engine's
types in words rather than importing them: a channel is a
:class:`pinakes_core.search.context.Channel`, ``kb`` is a :class:`pinakes_core.KB` and ``store``
its :class:`pinakes_core.index.store.Store`.
"""

from __future__ import annotations

from typing import Any

import pluggy

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "pinakes"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_channels() -> list[Any]:  # type: ignore[empty-body]
    """Return the retrieval channels this plugin provides (each a ``Channel``, unique ``name``)."""


@hookspec
def after_sync(
    kb: Any,
    store: Any,
    changed: list[str],
    removed: list[str],
    relinked: list[str],
    progress: Any,
) -> None:
    """Run at the end of a sync, after documents are written and links resolved.

    Args:
        kb: the :class:`~pinakes_core.kb.KB` being synced.
        store: its open :class:`~pinakes_core.index.store.Store`.
        changed: ids of documents added, changed or renamed.
        removed: ids of documents deleted.
        relinked: ids of other documents whose outgoing links now resolve differently.
        progress: ``progress(stage, done, total)`` (a :data:`~pinakes_core.index.sync.ProgressFn`,
            never ``None``): report long work under a stage name of your own (total 0 means
            "unknown"), so the progress bar never sits silent through a plugin's phase.

    Edge derivation happens here; it must only touch what these documents affect.
    """


@hookspec(firstresult=True)
def kb_links(
    kb: Any, doc_id: str, rel: str | None, direction: str, depth: int, query: str | None
) -> Any:
    """Answer ``KB.links`` (the graph plugin implements it); return a ``LinksResult``."""


@hookspec
def doctor_checks(kb: Any, store: Any) -> list[Any]:  # type: ignore[empty-body]
    """Return ``DoctorFinding`` items about this KB (plugins add their own checks)."""


@hookspec
def register_commands(cli: Any) -> None:
    """Add subcommands to the ``pnk`` command group (``cli.add_command(...)``).

    ``cli`` is the ``pnk`` ``click.Group``; core never imports click, so it is typed loosely.
    Front-ends never import each other: a distribution that ships a ``pnk`` subcommand (as
    pinakes-mcp ships ``pnk mcp``) implements this hook in its ``pinakes`` entry-point module.
    Keep that module light: import heavy dependencies inside the command body, since every
    ``pnk`` start-up loads it.
    """


@hookspec
def graph_seeds(kb: Any, query: str) -> list[tuple[int, float]]:  # type: ignore[empty-body]
    """Return extra Personalized PageRank seeds for ``query`` as ``(node_id, mass)`` pairs.

    ``mass`` is the share of the whole personalisation the node gets (the graph plugin scales
    its own seeds to make room); the masses of all pairs sum to at most 1. The NER plugin seeds
    the entity nodes a query names.
    """


@hookspec
def query_entities(kb: Any, query: str) -> list[str]:  # type: ignore[empty-body]
    """Return the names of entities ``query`` mentions (``KB.search``'s automatic ``entities``)."""


@hookspec(firstresult=True)
def entity_neighbours(kb: Any, doc_id: str) -> Any:
    """Return documents sharing named entities with ``doc_id`` (``list[EntityNeighbour]``)."""
