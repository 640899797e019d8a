"""Pinakes graph plugin: structural edges, graph channels and the links API.

This distribution registers with pinakes-core through the ``pinakes`` entry-point group.
In this release it is a skeleton: it registers no channels yet.
"""

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    """``__version__``, read from the installed metadata on first use (``pnk`` starts without it)."""
    if name == "__version__":
        from importlib.metadata import version

        value = version("pinakes-graph")
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
