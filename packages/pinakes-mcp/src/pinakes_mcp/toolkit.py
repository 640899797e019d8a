"""What every MCP tool module shares: argument types, registry access, errors, readiness.

The tool modules (:mod:`pinakes_mcp.tools`, :mod:`pinakes_mcp.writes`) import this one and
never each other; :mod:`pinakes_mcp.server` imports the tool modules and asks each to register
its tools on the server it builds.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from fastmcp.exceptions import ToolError
from fastmcp.server.context import Context
from mcp.types import ToolAnnotations

from pinakes_core.errors import PinakesError
from pinakes_mcp.arguments import Doc, Item, Kb
from pinakes_mcp.served import Registry, ServedKB

__all__ = [
    "READ_ONLY",
    "Doc",
    "Item",
    "Kb",
    "registry_of",
    "served_tool",
    "tool_errors",
    "wait_until_ready",
    "when_ready",
]

T = TypeVar("T")

#: the annotations of a tool that only reads.
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


def registry_of(ctx: Context) -> Registry:
    """The served KBs of the server handling this request (kept in its lifespan state)."""
    found: Registry = ctx.lifespan_context["pinakes"]
    return found


@contextlib.contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a :class:`PinakesError` into a clean :class:`ToolError` (message + hint)."""
    try:
        yield
    except PinakesError as exc:
        # The caller's mistake, not the server's: the caller-errors middleware logs it as
        # such (one line); fastmcp's own "Error calling tool" line stays at DEBUG.
        raise ToolError(str(exc), log_level=logging.DEBUG) from None


async def wait_until_ready(ctx: Context, served: list[ServedKB]) -> None:
    """Wait for the start-up sync of ``served`` KBs, relaying its progress to the client.

    Each poll sends an MCP progress notification (when the request carried a progress token):
    ``progress``/``total`` are the current phase's done/total (total omitted when unknown) and
    ``message`` names the KB and the phase.
    """
    pending = [s for s in served if not s.ready.is_set()]
    last: tuple[str, int, int] | None = None
    while pending:
        current = pending[0]
        stage, done, total = current.progress
        if (stage, done, total) != last:
            last = (stage, done, total)
            message = f"KB {current.name!r} first sync: {stage} {done}/{total or '?'}"
            await ctx.report_progress(progress=done, total=total or None, message=message)
        await anyio.sleep(0.2)
        pending = [s for s in pending if not s.ready.is_set()]


def when_ready(fn: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Make a sync tool async: wait for the served KBs' start-up sync, then run it in a thread.

    The signature (and so the tool's schema) is the wrapped function's.
    """

    @functools.wraps(fn)
    async def tool(ctx: Context, *args: Any, **kwargs: Any) -> T:
        await wait_until_ready(ctx, list(registry_of(ctx)))
        return await anyio.to_thread.run_sync(functools.partial(fn, ctx, *args, **kwargs))

    return tool


def served_tool(body: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """The tool that runs ``body(registry, ...)`` (a body written without fastmcp).

    Like :func:`when_ready`: it waits for the served KBs' start-up sync (relaying its progress),
    then runs ``body`` in a worker thread, its :class:`PinakesError` a tool error. Its name,
    description and arguments (so its schema) are ``body``'s, the request's context in place
    of the registry. The stdio front calls the same ``body`` (:mod:`pinakes_mcp.front`).
    """

    @functools.wraps(body)
    async def tool(ctx: Context, *args: Any, **kwargs: Any) -> T:
        registry = registry_of(ctx)
        await wait_until_ready(ctx, list(registry))

        def run() -> T:
            with tool_errors():
                return body(registry, *args, **kwargs)

        return await anyio.to_thread.run_sync(run)

    signature = inspect.signature(body)
    _, *arguments = signature.parameters.values()
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
    tool.__signature__ = signature.replace(parameters=[context, *arguments])  # type: ignore[attr-defined]
    tool.__annotations__ = {
        **{name: hint for name, hint in body.__annotations__.items() if name != "registry"},
        "ctx": Context,
    }
    return tool
