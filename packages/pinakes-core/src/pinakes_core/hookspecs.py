"""Plugin hook specifications (DESIGN §12).

Plugins (pinakes-graph, pinakes-ner, third parties) register through the ``pinakes``
entry-point group; the module an entry point names holds ``@hookimpl`` functions. Core's own
channels are registered through the same hooks, so the plugin path is always exercised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pinakes_core.channels import Channel

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "pinakes"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_channels() -> list[Channel]:  # type: ignore[empty-body]
    """Return the retrieval channels this plugin provides (each with a unique ``name``)."""


@hookspec
def after_sync(kb: Any, store: Any, changed: list[str], removed: list[str]) -> None:
    """Run at the end of a sync with the ids of changed and removed documents.

    Edge derivation happens here; it must only touch what the changed documents affect.
    """
