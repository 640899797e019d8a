"""Pinakes core: a local-first knowledge-base engine for Markdown folders.

Quick start::

    from pinakes_core import KB
    kb = KB.open("my-notes")          # the folder holding pinakes.toml
    kb.sync()                         # incremental; builds .pinakes/index.db
    result = kb.search("how does leader election work?", k=5)
    print(result.hits[0].path, result.hits[0].text)
"""

from __future__ import annotations

import importlib

#: ``typing.TYPE_CHECKING`` without importing typing, which a front door that imports only
#: :mod:`pinakes_core.kept` would pay for (mypy reads any name ``TYPE_CHECKING`` as true).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pinakes_core.config import Config, load_config
    from pinakes_core.errors import (
        ConfigError,
        DocumentNotFoundError,
        IndexMissingError,
        IndexWriteError,
        LockError,
        PinakesError,
        PluginMissingError,
        SidecarError,
        UriError,
    )
    from pinakes_core.hookspecs import hookimpl
    from pinakes_core.kb import KB
    from pinakes_core.models import (
        DoctorFinding,
        DoctorReport,
        DocumentView,
        FrontierItem,
        Hit,
        LinksResult,
        Neighbour,
        SearchResult,
        Status,
        SyncReport,
        UnresolvedLink,
    )
    from pinakes_core.search.context import Channel, Filters, QueryContext
    from pinakes_core.uri import PnkUri, parse_uri

__all__ = [
    "KB",
    "Channel",
    "Config",
    "ConfigError",
    "DoctorFinding",
    "DoctorReport",
    "DocumentNotFoundError",
    "DocumentView",
    "Filters",
    "FrontierItem",
    "Hit",
    "IndexMissingError",
    "IndexWriteError",
    "LinksResult",
    "LockError",
    "Neighbour",
    "PinakesError",
    "PluginMissingError",
    "PnkUri",
    "QueryContext",
    "SearchResult",
    "SidecarError",
    "Status",
    "SyncReport",
    "UnresolvedLink",
    "UriError",
    "__version__",
    "hookimpl",
    "load_config",
    "parse_uri",
]

#: Where each public name is defined. The names load on first use (PEP 562), so importing
#: ``pinakes_core`` or a light module in it (``pinakes_core.errors``) costs nothing: ``pnk
#: --help`` never pays for numpy, pydantic or the engine (issue 37).
_HOMES = {
    "Config": "config",
    "load_config": "config",
    "ConfigError": "errors",
    "DocumentNotFoundError": "errors",
    "IndexMissingError": "errors",
    "IndexWriteError": "errors",
    "LockError": "errors",
    "PinakesError": "errors",
    "PluginMissingError": "errors",
    "SidecarError": "errors",
    "UriError": "errors",
    "hookimpl": "hookspecs",
    "KB": "kb",
    "DoctorFinding": "models",
    "DoctorReport": "models",
    "DocumentView": "models",
    "FrontierItem": "models",
    "Hit": "models",
    "LinksResult": "models",
    "Neighbour": "models",
    "SearchResult": "models",
    "Status": "models",
    "SyncReport": "models",
    "UnresolvedLink": "models",
    "Channel": "search.context",
    "Filters": "search.context",
    "QueryContext": "search.context",
    "PnkUri": "uri",
    "parse_uri": "uri",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its defining module on first use, then keep it here."""
    if name == "__version__":
        from importlib.metadata import version

        value: Any = version("pinakes-core")
    elif name in _HOMES:
        value = getattr(importlib.import_module(f"pinakes_core.{_HOMES[name]}"), name)
    else:
        raise AttributeError(f"module 'pinakes_core' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
