"""Pinakes MCP server: typed, capped tools over one or many KBs for agents.

In this release it is a skeleton that builds and imports; the tools arrive with the MCP issue.
"""

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("pinakes-mcp")
