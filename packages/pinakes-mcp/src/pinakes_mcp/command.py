"""``pnk mcp``: serve KBs to agents over MCP, and ``pnk mcp config``: set up an MCP host.

Registered into ``pnk`` through the ``register_commands`` hook (see :mod:`pinakes_mcp.plugin`).
Only click and core are imported here; fastmcp loads when the server actually starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

__all__ = ["mcp"]

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _kb_paths(ctx: click.Context, kbs: tuple[Path, ...]) -> list[Path]:
    """The KBs named on this command, else those of ``pnk mcp``, else the global ``--kb``."""
    if kbs:
        return list(kbs)
    parent = ctx.parent.params.get("kbs") if ctx.parent is not None else None
    if parent:
        return list(parent)
    root = ctx.find_root()
    return [root.obj.get("kb", Path(".")) if isinstance(root.obj, dict) else Path(".")]


_kb_option = click.option(
    "--kb",
    "kbs",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A KB folder to serve (repeatable) [default: the global --kb].",
)


@click.group(invoke_without_command=True)
@_kb_option
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for an MCP host that starts the server; http for a long-running one.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option(
    "--watch/--no-watch",
    default=True,
    show_default=True,
    help="Re-sync a KB (debounced) when files under it change.",
)
@click.option(
    "--allow-write",
    is_flag=True,
    help="Offer the write tools (write_note, append, link); off by default.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    help="stderr log level (stdout carries only the protocol).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="HTTP: also serve requests whose Host is NAME (repeatable; e.g. a proxy's name).",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="HTTP: also serve browser requests from ORIGIN (repeatable).",
)
@click.option(
    "--allow-unauthenticated",
    is_flag=True,
    help="HTTP: serve a non-loopback address without a PINAKES_MCP_TOKEN bearer token.",
)
@click.option(
    "--fleet",
    "fleet",
    is_flag=True,
    help="Serve every KB of the fleet registry (pnk fleet list) too, under its fleet name.",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    kbs: tuple[Path, ...],
    transport: str,
    host: str,
    port: int,
    watch: bool,
    allow_write: bool,
    log_level: str,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    allow_unauthenticated: bool,
    fleet: bool,
) -> None:
    """Serve KBs over MCP: search, read, links, kbs tools for agents (pinakes-mcp)."""
    if ctx.invoked_subcommand is not None:
        return
    from pinakes_mcp.launch import serve  # fastmcp loads once the front answered initialize

    serve(
        list(kbs) if fleet else _kb_paths(ctx, kbs),
        fleet=fleet,
        transport="http" if transport == "http" else "stdio",
        host=host,
        port=port,
        watch=watch,
        allow_write=allow_write,
        log_level=log_level.upper(),
        allow_hosts=allow_hosts,
        allow_origins=allow_origins,
        allow_unauthenticated=allow_unauthenticated,
    )


@mcp.command(name="config")
@_kb_option
@click.option(
    "--host",
    "host",
    required=True,
    type=click.Choice(["claude-desktop", "claude-code", "cursor", "vscode"]),
    help="The MCP host to configure.",
)
@click.option(
    "--write",
    "write",
    is_flag=True,
    help="Merge the entry into the host's config file (backed up first) instead of printing.",
)
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The config file to merge into [default: the host's usual file].",
)
@click.option("--name", default="pinakes", show_default=True, help="The server's entry name.")
@click.option("--no-watch", is_flag=True, help="Start the server with --no-watch.")
@click.option("--allow-write", is_flag=True, help="Start the server with --allow-write.")
@click.option("--fleet", is_flag=True, help="Start the server with --fleet (every registered KB).")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.pass_context
def config(
    ctx: click.Context,
    kbs: tuple[Path, ...],
    host: str,
    write: bool,
    file: Path | None,
    name: str,
    no_watch: bool,
    allow_write: bool,
    fleet: bool,
    as_json: bool,
) -> None:
    """Print (or with --write, merge) the JSON that makes HOST start this server.

    The command is the absolute path of the installed pinakes-mcp, and every --kb is made
    absolute: hosts do not start servers in your shell's folder. An existing config file is
    never clobbered: it is backed up and only the one server entry is added or replaced.
    """
    from pinakes_mcp import hosts

    extra = [*(["--no-watch"] if no_watch else []), *(["--allow-write"] if allow_write else [])]
    extra += ["--fleet"] if fleet else []
    entry = hosts.server_entry(host, list(kbs) if fleet else _kb_paths(ctx, kbs), extra)
    if not write:
        snippet = hosts.snippet(host, name, entry)
        if as_json:
            click.echo(json.dumps({"host": host, "config": snippet}, indent=2))
        else:
            where = hosts.default_file(host)
            sys.stderr.write(f"Add this to {where} (or run again with --write):\n")
            click.echo(json.dumps(snippet, indent=2))
        return
    result = hosts.merge(host, file or hosts.default_file(host), name, entry)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        click.echo(result.describe())
