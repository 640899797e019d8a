"""The Pinakes MCP server: build it around open KBs, run it over stdio or HTTP.

State lives in the server's lifespan: the served KBs keep their embedding model, store
connection and vector matrix loaded from startup to shutdown, so a query never reloads them.
Logging goes to stderr; over stdio, stdout carries nothing but the protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread
from fastmcp import FastMCP
from fastmcp.exceptions import FastMCPError
from starlette.middleware import Middleware

from pinakes_core import KB, PinakesError
from pinakes_core.manage.fleet import Fleet
from pinakes_core.manage.registry import registry_path
from pinakes_mcp.about import NAME, VERSION, instructions
from pinakes_mcp.errors import CallerErrors
from pinakes_mcp.listing import PAGE_SIZE, DocumentProvider
from pinakes_mcp.served import Registry
from pinakes_mcp.tools import register as register_read_tools
from pinakes_mcp.trust import TrustMiddleware, filter_stdin, is_loopback
from pinakes_mcp.watch import DEFAULT_DEBOUNCE_MS, Watcher
from pinakes_mcp.writes import register as register_write_tools

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "create_server",
    "main",
    "open_fleet",
    "open_kbs",
    "serve",
]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: The environment variable holding the HTTP bearer token.
TOKEN_ENV = "PINAKES_MCP_TOKEN"

Transport = Literal["stdio", "http"]


def create_server(
    kbs: Sequence[KB],
    *,
    watch: bool = False,
    allow_write: bool = False,
    debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    close_on_exit: bool = False,
    names: Sequence[str | None] = (),
) -> FastMCP[Any]:
    """Return a FastMCP server serving ``kbs`` (already open; tests pass their own).

    At start the lifespan syncs, in a background thread, any KB that was never synced (or
    whose store is outdated) and loads each KB's model, vectors and calibration, so the server
    answers ``initialize`` at once; tool calls wait for that and relay its progress as MCP
    progress notifications. With ``watch`` it then re-syncs KBs when their files change.
    Caller mistakes become one-sentence tool errors; anything else is masked.

    Args:
        kbs: the KBs to serve, each with a unique ``[kb] name`` and id.
        watch: re-sync a KB (incrementally, debounced) when files under it change
            (``pinakes-mcp`` and ``pnk mcp`` turn it on unless ``--no-watch``).
        allow_write: offer the write tools (``pinakes_write_note``, ``pinakes_append``,
            ``pinakes_link``).
        debounce_ms: quiet time after the last file event before that sync starts.
        close_on_exit: close the KBs when the server stops (when the server opened them).
        names: the name to serve each KB under (its fleet name), ``None`` for its
            ``[kb] name``; cross-KB links resolve among the served KBs only.

    Raises:
        PinakesError: if no KB is given, or two share a name or an id.
    """
    registry = Registry(kbs, watching=watch, names=names)

    @asynccontextmanager
    async def lifespan(server: FastMCP[Any]) -> AsyncIterator[dict[str, Any]]:
        warmers = [
            threading.Thread(
                target=served.warm, args=(registry.sync_lock,), name=f"warm:{served.name}"
            )
            for served in registry
        ]
        for thread in warmers:
            thread.start()
        watcher = Watcher(registry, debounce_ms=debounce_ms) if watch else None
        if watcher is not None:
            await watcher.start()
        try:
            yield {"pinakes": registry, "watcher": watcher}
        finally:
            if watcher is not None:
                await watcher.stop()
            for thread in warmers:  # a start-up sync still running is let finish
                await anyio.to_thread.run_sync(thread.join)
            if close_on_exit:
                for served in registry:
                    served.kb.close()

    server: FastMCP[Any] = FastMCP(
        NAME,
        instructions=instructions(allow_write=allow_write),
        version=VERSION,
        lifespan=lifespan,
        mask_error_details=True,
        middleware=[CallerErrors()],
        providers=[DocumentProvider(registry)],
        list_page_size=PAGE_SIZE,
    )
    register_read_tools(server)
    register_write_tools(server, allow_write=allow_write)
    _one_line_caller_mistakes()
    return server


class _OneLineCallerMistakes(logging.Filter):
    """Log a caller's mistake (an error below ERROR level) as one line, without a traceback.

    fastmcp logs every failed resource read with ``exc_info``; for a bad ``pnk://`` address
    that is the client's mistake, not the server's.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, FastMCPError) and exc.log_level < logging.ERROR:
            record.msg = f"{record.getMessage()}: {exc}"
            record.args = ()
            record.exc_info = None
            record.exc_text = None
        return True


def _one_line_caller_mistakes() -> None:
    logger = logging.getLogger("fastmcp.server.server")
    if not any(isinstance(f, _OneLineCallerMistakes) for f in logger.filters):
        logger.addFilter(_OneLineCallerMistakes())


def open_kbs(paths: Sequence[str | os.PathLike[str]]) -> list[KB]:
    """Open the KB at each path (config only: the heavy loading happens in the lifespan).

    Raises:
        PinakesError: if a path holds no valid ``pinakes.toml``.
    """
    return [KB.open(path) for path in paths]


def open_fleet(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[KB], list[str | None]]:
    """Open every KB of the fleet registry, then those at ``paths`` it does not hold.

    Registered KBs are served under their fleet names; one that cannot be opened (moved, a
    broken ``pinakes.toml``) is left out with a warning.

    Raises:
        PinakesError: if a path holds no valid ``pinakes.toml``, or nothing is left to serve.
    """
    fleet = Fleet.open()
    for entry, reason in fleet.unavailable:
        log.warning("Fleet KB %r is not served: %s", entry.name, reason)
    kbs: list[KB] = [kb for _, kb in fleet]
    names: list[str | None] = [name for name, _ in fleet]
    ids = {kb.config.kb.id for kb in kbs}
    for kb in open_kbs(paths):
        if kb.config.kb.id not in ids:
            kbs.append(kb)
            names.append(None)
    if not kbs:
        raise PinakesError(
            f"No KB to serve: the fleet registry {registry_path()} holds none that opens.",
            "Register one with `pnk fleet add PATH`, or pass --kb PATH.",
        )
    return kbs, names


def _protect_stdout() -> None:
    """Keep stray native writes off the protocol stream (stdio transport).

    File descriptor 1 is pointed at stderr, so a C library printing to stdout cannot corrupt
    the protocol; ``sys.stdout`` keeps writing to the real stdout through a duplicate.
    """
    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(protocol, "w", encoding="utf-8", buffering=1, closefd=True)  # noqa: SIM115


def serve(
    paths: Sequence[str | os.PathLike[str]],
    *,
    transport: Transport = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    watch: bool = True,
    allow_write: bool = False,
    log_level: str = "INFO",
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    token: str | None = None,
    allow_unauthenticated: bool = False,
    fleet: bool = False,
) -> None:
    """Open the KBs at ``paths`` and serve them until the client (or Ctrl-C) stops the server.

    With ``fleet``, every KB of the fleet registry is served too (see :func:`open_fleet`).

    Logs go to stderr at ``log_level``, unless the process configured logging already.

    Args:
        paths: the KB folders.
        transport: ``"stdio"`` or ``"http"``.
        host: HTTP bind address.
        port: HTTP port.
        watch: re-sync a KB when its files change.
        allow_write: offer the write tools.
        log_level: stderr log level.
        allow_hosts: HTTP: extra ``Host`` names to serve (e.g. a reverse proxy's).
        allow_origins: HTTP: extra browser origins to serve.
        token: HTTP: require ``Authorization: Bearer <token>`` (default: the
            ``PINAKES_MCP_TOKEN`` environment variable, if set).
        allow_unauthenticated: HTTP: serve a non-loopback address without a token.
        fleet: serve every KB of the fleet registry too, each under its fleet name.

    Raises:
        PinakesError: if a KB cannot be opened, two KBs share a name or id, or a non-loopback
            HTTP bind has no token and ``allow_unauthenticated`` is not given.
    """
    logging.basicConfig(
        level=log_level,
        stream=sys.stderr,
        format="pinakes-mcp %(levelname)s %(name)s: %(message)s",
    )
    token = token or os.environ.get(TOKEN_ENV) or None
    if transport == "http" and not is_loopback(host) and not token:
        if not allow_unauthenticated:
            raise PinakesError(
                f"Serving on {host} would let anyone who can reach it read these KBs.",
                f"Set a token in the {TOKEN_ENV} environment variable (clients send "
                "Authorization: Bearer <token>), or pass --allow-unauthenticated.",
            )
        log.warning(
            "Serving on %s without a token: anyone who can reach it can read these KBs.", host
        )
    kbs, names = open_fleet(paths) if fleet else (open_kbs(paths), [])
    server = create_server(
        kbs, watch=watch, allow_write=allow_write, close_on_exit=True, names=names
    )
    if transport == "stdio":
        _protect_stdout()
        filter_stdin()
        server.run(transport="stdio", show_banner=False)
        return
    trust = Middleware(
        TrustMiddleware,
        bind=host,
        port=port,
        allow_hosts=allow_hosts,
        allow_origins=allow_origins,
        token=token,
    )
    # log_config=None: uvicorn's loggers propagate to ours (stderr) instead of its access log
    # going to stdout.
    server.run(
        transport="http",
        host=host,
        port=port,
        show_banner=False,
        middleware=[trust],
        uvicorn_config={"log_config": None},
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinakes-mcp",
        description="Serve Pinakes knowledge bases to agents over MCP.",
    )
    from importlib.metadata import version  # light: --version must not load the server

    parser.add_argument("--version", action="version", version=f"%(prog)s {version('pinakes-mcp')}")
    parser.add_argument(
        "--kb",
        dest="kbs",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="a KB folder to serve (repeat for several; each needs a unique [kb] name)",
    )
    parser.add_argument(
        "--fleet",
        action="store_true",
        help="serve every KB of the fleet registry (pnk fleet list) too, under its fleet name",
    )
    parser.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio", help="default: stdio"
    )
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"HTTP bind address (default: {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--watch",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="re-sync a KB (incrementally, debounced) when files under it change "
        "(default: on; --no-watch turns it off)",
    )
    parser.add_argument(
        "--allow-write",
        action="store_true",
        help="offer the write tools: pinakes_write_note, pinakes_append, pinakes_link",
    )
    parser.add_argument(
        "--allow-host",
        dest="allow_hosts",
        action="append",
        default=[],
        metavar="NAME",
        help="HTTP: also serve requests whose Host is NAME (repeatable; e.g. a proxy's name)",
    )
    parser.add_argument(
        "--allow-origin",
        dest="allow_origins",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="HTTP: also serve browser requests from ORIGIN (repeatable)",
    )
    parser.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help=f"HTTP: serve a non-loopback address without a {TOKEN_ENV} token",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="stderr log level (default: INFO)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: parse arguments, serve; errors go to stderr with exit 1."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.kbs and not args.fleet:
        parser.error("pass --kb PATH (repeatable) or --fleet")
    try:
        serve(
            args.kbs,
            fleet=args.fleet,
            transport=args.transport,
            host=args.host,
            port=args.port,
            watch=args.watch,
            allow_write=args.allow_write,
            log_level=args.log_level,
            allow_hosts=args.allow_hosts,
            allow_origins=args.allow_origins,
            allow_unauthenticated=args.allow_unauthenticated,
        )
    except PinakesError as exc:
        sys.stderr.write(f"pinakes-mcp: error: {exc.message}\n")
        if exc.hint:
            sys.stderr.write(f"pinakes-mcp: hint: {exc.hint}\n")
        sys.exit(1)
    except KeyboardInterrupt:
        pass
