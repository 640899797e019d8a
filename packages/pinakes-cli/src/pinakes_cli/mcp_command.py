"""``pnk mcp``: serve KBs to agents over MCP (needs the pinakes-mcp distribution)."""

from __future__ import annotations

from pathlib import Path

import click

from pinakes_core import PluginMissingError

__all__ = ["mcp"]


@click.command()
@click.option(
    "--kb",
    "kbs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A KB folder to serve (repeatable) [default: the global --kb].",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for an MCP host that starts the server; http for a long-running one.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--watch", is_flag=True, help="Re-sync a KB when files under it change.")
@click.pass_context
def mcp(
    ctx: click.Context, kbs: tuple[Path, ...], transport: str, host: str, port: int, watch: bool
) -> None:
    """Serve KBs over MCP: search, read, links and kbs tools for agents (read-only)."""
    try:
        from pinakes_mcp.server import serve
    except ImportError:
        raise PluginMissingError(
            "pnk mcp needs the pinakes-mcp package.", "Install it: uv pip install pinakes-mcp"
        ) from None
    paths = list(kbs) or [ctx.obj["kb"] if ctx.obj else Path(".")]
    serve(
        paths,
        transport="http" if transport == "http" else "stdio",
        host=host,
        port=port,
        watch=watch,
    )
