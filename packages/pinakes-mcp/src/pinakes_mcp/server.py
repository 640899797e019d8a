"""The ``pinakes-mcp`` entry point (skeleton: the server arrives with the MCP issue)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    """Exit with a clear message until the MCP tools are built."""
    sys.stderr.write("pinakes-mcp: the MCP server is not built yet in this release.\n")
    sys.exit(1)
