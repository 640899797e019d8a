"""Pinakes MCP server: typed, capped, read-only tools over one or many KBs for agents.

Run ``pinakes-mcp --kb PATH [--kb PATH …]`` (stdio by default), or build a server around KBs
you opened yourself::

    from pinakes_core import KB
    from pinakes_mcp import create_server

    server = create_server([KB.open("my-notes")])
    server.run()  # or: async with fastmcp.Client(server) as client: ...

Tools: ``pinakes_search``, ``pinakes_read``, ``pinakes_links``, ``pinakes_kbs``; documents are
also resources at ``pnk://{kb}/{doc_id}``.
"""

from importlib.metadata import version

from pinakes_mcp.server import create_server, main, serve

__all__ = ["__version__", "create_server", "main", "serve"]

__version__ = version("pinakes-mcp")
