"""``pinakes-mcp`` and :func:`serve`: answer ``initialize`` first, then load, then serve.

The order is what makes the server quick to start (issue 37):

1. parse the arguments (this module imports only the standard library at its top);
2. over stdio, start the front (:mod:`pinakes_mcp.front`), which answers the host's
   ``initialize`` at once;
3. open the KBs (pinakes_core loads here) and start their warm-up (model, vectors,
   calibration, a never-synced KB's first sync) in background threads; the front may now
   answer a search itself, once the warm-up is done;
4. when the front has nothing to do (it passed on a message only fastmcp answers, answered a
   tool call, or heard nothing for a moment), import fastmcp, build the server
   (:mod:`pinakes_mcp.server`) and hand it the stream: the handshake replayed, then what the
   front did not answer. A tool call waits for the warm-up, as before. A client that leaves
   before anything needed fastmcp never loads it.

A KB that cannot be opened still stops the process with exit status 1 and the one-sentence
error on stderr, now possibly after ``initialize`` was answered.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pinakes_mcp.about import VERSION
from pinakes_mcp.front import StdioFront
from pinakes_mcp.trust import is_loopback

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "TOKEN_ENV", "Transport", "main", "serve"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
#: The environment variable holding the HTTP bearer token.
TOKEN_ENV = "PINAKES_MCP_TOKEN"

Transport = Literal["stdio", "http"]


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

    With ``fleet``, every KB of the fleet registry is served too (see
    :func:`pinakes_mcp.served.open_fleet`). Over stdio, when this process's own stdin and
    stdout are the transport, ``initialize`` is answered before the KBs and fastmcp load.

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
            from pinakes_core.errors import PinakesError

            raise PinakesError(
                f"Serving on {host} would let anyone who can reach it read these KBs.",
                f"Set a token in the {TOKEN_ENV} environment variable (clients send "
                "Authorization: Bearer <token>), or pass --allow-unauthenticated.",
            )
        log.warning(
            "Serving on %s without a token: anyone who can reach it can read these KBs.", host
        )
    front = (
        StdioFront(allow_write=allow_write)
        if transport == "stdio" and StdioFront.possible()
        else None
    )
    if front is not None:
        front.start()
    try:
        # Looked up here, not at the top: the front must answer before pinakes_core loads.
        from pinakes_mcp.served import Registry, open_fleet, open_kbs

        kbs, names = open_fleet(paths) if fleet else (open_kbs(paths), [])
        registry = Registry(kbs, watching=watch, names=names)
        warmers = registry.start_warming()  # the model and vectors load meanwhile
        if front is not None:
            front.attach(registry)
            if not front.wait_for_turn():  # the client left; the front answered everything
                for thread in warmers:
                    thread.join()
                for served in registry:
                    served.kb.close()
                return
        from pinakes_mcp.server import build_server, run_http, run_stdio

        server = build_server(registry, allow_write=allow_write, close_on_exit=True)
        if transport == "stdio":
            if front is not None:
                front.hand_over()
            run_stdio(server, fronted=front is not None)
        else:
            run_http(
                server,
                host=host,
                port=port,
                allow_hosts=allow_hosts,
                allow_origins=allow_origins,
                token=token,
            )
    finally:
        if front is not None:
            front.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pinakes-mcp",
        description="Serve Pinakes knowledge bases to agents over MCP.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
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


def _is_pinakes_error(exc: BaseException) -> bool:
    # pinakes_core is not imported before the front answers; an error raised before it
    # loaded cannot be one of its errors.
    errors = sys.modules.get("pinakes_core.errors")
    return errors is not None and isinstance(exc, errors.PinakesError)


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
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        if not _is_pinakes_error(exc):
            raise
        message, hint = getattr(exc, "message", str(exc)), getattr(exc, "hint", None)
        sys.stderr.write(f"pinakes-mcp: error: {message}\n")
        if hint:
            sys.stderr.write(f"pinakes-mcp: hint: {hint}\n")
        sys.exit(1)
