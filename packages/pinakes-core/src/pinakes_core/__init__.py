"""Pinakes core: a local-first knowledge-base engine for Markdown folders.

Quick start::

    from pinakes_core import KB
    kb = KB.open("my-notes")          # the folder holding pinakes.toml
    kb.sync()                         # incremental; builds .pinakes/index.db
    result = kb.search("how does leader election work?", k=5)
    print(result.hits[0].path, result.hits[0].text)
"""

from importlib.metadata import version

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

__version__ = version("pinakes-core")
