"""The Pinakes MCP server: build it around open KBs, run it over stdio or HTTP.

State lives in the server's lifespan: the served KBs keep their embedding model, store
connection and vector matrix loaded from startup to shutdown, so a query never reloads them.
Logging goes to stderr; over stdio, stdout carries nothing but the protocol.

This module imports fastmcp. ``pinakes-mcp`` (:mod:`pinakes_mcp.launch`) imports it only after
its stdio front has answered ``initialize`` (:mod:`pinakes_mcp.front`).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from fastmcp import FastMCP
from fastmcp.exceptions import FastMCPError
from starlette.middleware import Middleware

from pinakes_core import KB
from pinakes_mcp.about import NAME, VERSION, instructions
from pinakes_mcp.errors import CallerErrors
from pinakes_mcp.listing import PAGE_SIZE, DocumentProvider
from pinakes_mcp.served import Registry
from pinakes_mcp.tools import register as register_read_tools
from pinakes_mcp.trust import TrustMiddleware, filter_stdin
from pinakes_mcp.watch import DEFAULT_DEBOUNCE_MS, Watcher
from pinakes_mcp.writes import register as register_write_tools

__all__ = ["build_server", "create_server", "run_http", "run_stdio"]

log = logging.getLogger(__name__)


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
    return build_server(
        Registry(kbs, watching=watch, names=names),
        allow_write=allow_write,
        debounce_ms=debounce_ms,
        close_on_exit=close_on_exit,
    )


def build_server(
    registry: Registry,
    *,
    allow_write: bool = False,
    debounce_ms: int = DEFAULT_DEBOUNCE_MS,
    close_on_exit: bool = False,
) -> FastMCP[Any]:
    """Return a FastMCP server serving the KBs of ``registry`` (see :func:`create_server`).

    The KBs are re-synced on file changes if ``registry.watching``; their warm-up starts with
    the server unless :meth:`Registry.start_warming` started it already.
    """

    @asynccontextmanager
    async def lifespan(server: FastMCP[Any]) -> AsyncIterator[dict[str, Any]]:
        warmers = registry.start_warming()
        watcher = Watcher(registry, debounce_ms=debounce_ms) if registry.watching else None
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


def _protect_stdout() -> None:
    """Keep stray native writes off the protocol stream (stdio transport).

    File descriptor 1 is pointed at stderr, so a C library printing to stdout cannot corrupt
    the protocol; ``sys.stdout`` keeps writing to the real stdout through a duplicate.
    """
    sys.stdout.flush()
    protocol = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = open(protocol, "w", encoding="utf-8", buffering=1, closefd=True)  # noqa: SIM115


def run_stdio(server: FastMCP[Any], *, fronted: bool = False) -> None:
    """Serve over stdio until the client closes stdin.

    Args:
        server: the server to run.
        fronted: a :class:`~pinakes_mcp.front.StdioFront` holds stdin and stdout already (it
            keeps stdout for the protocol and repairs stdin's lines itself).
    """
    if not fronted:
        _protect_stdout()
        filter_stdin()
    server.run(transport="stdio", show_banner=False)


def run_http(
    server: FastMCP[Any],
    *,
    host: str,
    port: int,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    token: str | None = None,
) -> None:
    """Serve over HTTP at ``host:port`` behind :class:`~pinakes_mcp.trust.TrustMiddleware`."""
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
