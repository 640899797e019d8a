"""Entry module for the ``pinakes`` entry-point group: adds ``pnk mcp`` to the ``pnk`` CLI.

``pnk`` loads this module at every start-up, so it imports nothing heavy: the command module
needs only click and core, and fastmcp is imported inside the command body when it runs.
"""

from __future__ import annotations

from typing import Any

from pinakes_core.hookspecs import hookimpl

__all__ = ["register_commands"]


@hookimpl
def register_commands(cli: Any) -> None:
    """Register ``pnk mcp`` (serve KBs over MCP; ``pnk mcp config`` sets up a host)."""
    from pinakes_mcp.command import mcp

    cli.add_command(mcp)
