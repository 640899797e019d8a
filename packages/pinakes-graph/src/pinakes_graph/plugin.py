"""Entry module for the ``pinakes`` entry-point group.

Core loads this module through pluggy; it only registers hook implementations and keeps
heavy imports (scipy) inside them.
"""

from __future__ import annotations

from pinakes_core.hookspecs import hookimpl

__all__ = ["register_channels"]


@hookimpl
def register_channels() -> list[object]:
    """Return the graph channels this plugin provides (none yet: expansion and PPR come later)."""
    return []
