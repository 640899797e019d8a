"""Pinakes MCP server: typed, capped tools over one or many KBs for agents.

Run ``pinakes-mcp --kb PATH [--kb PATH …]`` (stdio by default), or build a server around KBs
you opened yourself::

    from pinakes_core import KB
    from pinakes_mcp import create_server

    server = create_server([KB.open("my-notes")])
    server.run()  # or: async with fastmcp.Client(server) as client: ...

Tools: ``pinakes_search``, ``pinakes_read``, ``pinakes_links``, ``pinakes_kbs`` (and, with
``allow_write``, ``pinakes_write_note``, ``pinakes_append``, ``pinakes_link``,
``pinakes_recent``); documents are also resources at ``pnk://{kb}/{doc_id}``.

The server module (and fastmcp) is imported on first use of ``create_server``, or by ``serve``
and ``main`` once the stdio front has answered ``initialize``: ``pnk`` loads this package's
plugin module at every start-up and must stay quick, and so must the server's handshake.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# Before anything imports numpy: one OpenBLAS thread, so the dense worker's products do not
# spin on the core the BM25 channel runs on (as ``pnk`` does; see pinakes_cli/__init__.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

if TYPE_CHECKING:
    from pinakes_mcp.about import VERSION as __version__
    from pinakes_mcp.launch import main, serve
    from pinakes_mcp.server import create_server

__all__ = ["__version__", "create_server", "main", "serve"]


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use (``pnk --help`` loads no metadata for them)."""
    if name == "__version__":
        from pinakes_mcp.about import VERSION

        globals()[name] = VERSION
        return VERSION
    if name == "create_server":
        from pinakes_mcp.server import create_server

        return create_server
    if name in ("main", "serve"):
        from pinakes_mcp import launch

        return getattr(launch, name)
    raise AttributeError(f"module 'pinakes_mcp' has no attribute {name!r}")
