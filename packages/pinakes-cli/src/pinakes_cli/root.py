"""The root of ``pnk``: the command group, its global options and what every command shares.

The command modules (``*_commands``, ``plugins``) import this module and register themselves on
:data:`cli`; :mod:`pinakes_cli.main` imports them all (the ``pnk`` script enters through
:mod:`pinakes_cli.door`). Nothing here loads the engine: ``pnk --help`` and ``pnk --version``
import neither numpy nor pydantic nor ``pinakes_core.kb`` (issue 37), so a command opens its
KB through :func:`open_kb`, which imports the engine when it runs.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.options import JSON_META
from pinakes_core.errors import PinakesError

if TYPE_CHECKING:
    from rich.console import Console

    from pinakes_core import KB

__all__ = ["cli", "err", "kb_option", "open_kb", "out", "progress_bar"]

#: The key in the root context's ``obj`` by which :func:`pinakes_cli.main.main` (a ``pnk``
#: process, not a test's ``CliRunner``) asks :func:`open_kb` to settle the engine's start-up.
SETTLE = "settle_after_open"

_STAGES = {
    "read": "reading",
    "embed": "embedding",
    "links": "links",
    "graph": "graph",
    "graph links": "graph links",
    "labels": "labels",
}


def out() -> Console:
    """The stdout console (rich loads only when something is drawn)."""
    # Lazy: rich loads only when something is drawn (issue 14, start-up cost).
    return render.LazyConsole.make(soft_wrap=True)


def err() -> Console:
    """The stderr console."""
    return render.LazyConsole.make(stderr=True, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(enabled: bool) -> Iterator[Any]:
    """A progress callback drawing a bar per sync phase on a terminal's stderr, silent in pipes.

    Every phase reports (read, embed, links, and the graph plugin's graph, graph links and
    labels); a phase of unknown length (total 0) shows a pulsing bar.
    """
    if not enabled:
        yield None
        return
    console = render.console(stderr=True, soft_wrap=True)
    if not console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(_STAGES.get(stage, stage), total=total or None)
            bar.update(tasks[stage], completed=done, total=total or None)

        yield update


#: Commands whose argument may start with ``-``: what it is for, and an example of one
#: (the ``--`` hint below).
_TEXT_ARGUMENTS = {
    "search": ("search for text", "'-your text'"),
    "ask": ("ask a question", "'-your text'"),
    "show": ("name a document", "-notes.md"),
    "links": ("name a document", "-notes.md"),
    "link": ("name a document", "-notes.md"),
}


def _dash_hint(exc: click.NoSuchOption) -> click.NoSuchOption:
    """``exc`` telling how to pass text that starts with ``-``, for commands that take text.

    ``pnk search --detectOpenHandles`` reads the flag being searched for as an option of
    ``search``; after ``--`` it is the query. Click's "Did you mean" (kept) guesses loosely
    (``--watchAll`` → ``--path``), so the hint is always given; a cluster of short options
    (``-foo`` is ``-f``) is not echoed, since the query was more than the option named.
    """
    command = exc.ctx.command.name if exc.ctx is not None else None
    known = _TEXT_ARGUMENTS.get(command or "")
    if known is None:
        return exc
    purpose, example = known
    name = exc.option_name
    example = shlex.quote(name) if name.startswith("--") else example
    message = (
        f"{exc.message} To {purpose} that starts with '-', put -- before it: "
        f"pnk {command} -- {example}"
    )
    return click.NoSuchOption(name, message, possibilities=exc.possibilities, ctx=exc.ctx)


class _Group(click.Group):
    """Maps every :class:`PinakesError` to one clean message (JSON with ``--json``) and exit 1.

    An OS error the user can fix (permission denied, a read-only mount, a full disk) that no
    library code explained gets one sentence too, never a traceback.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            raise _dash_hint(exc) from None
        except OSError as exc:
            error = _os_error(exc)
            if error is None:
                raise
            self._fail(ctx, error)
        except PinakesError as exc:
            self._fail(ctx, exc)

    @staticmethod
    def _fail(ctx: click.Context, exc: PinakesError) -> None:
        if ctx.meta.get(JSON_META):
            error = {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}
            render.print_data(out(), {"error": error})
        else:
            render.render_error(err(), exc.message, exc.hint)
        sys.exit(1)


#: What an OS error the user can fix means, for :func:`_os_error`.
_OS_ERRORS = {
    errno.EACCES: ("cannot be read or written by this user (permission denied)", "permissions"),
    errno.EPERM: (
        "cannot be read or written by this user (operation not permitted)",
        "permissions",
    ),
    errno.EROFS: ("is on a read-only file system", "mount"),
    errno.ENOSPC: ("cannot be written: the disk is full", "space"),
    errno.EDQUOT: ("cannot be written: the disk quota is used up", "space"),
}
_OS_HINTS = {
    "permissions": "Check the permissions of that path, or run the command as its owner.",
    "mount": "Use a KB on a writable file system for commands that write.",
    "space": "Free some space and run the command again.",
}


def _os_error(exc: OSError) -> PinakesError | None:
    """One sentence for an OS error the user can fix (permissions, a full disk), else ``None``.

    A last resort: the library raises its own errors where it can say more.
    """
    known = _OS_ERRORS.get(exc.errno or 0)
    if known is None:
        return None
    what = f"{exc.filename}" if exc.filename else "A file Pinakes needs"
    return PinakesError(f"{what} {known[0]}.", _OS_HINTS[known[1]])


def _set_kb(ctx: click.Context, _param: click.Parameter, value: Path | None) -> None:
    if value is not None:
        ctx.ensure_object(dict)["kb"] = value


def kb_option(command: Any) -> Any:
    """Accept ``--kb`` after the command name too (``pnk search "…" --kb notes``).

    Given there, it wins over the group's ``--kb``.
    """
    return click.option(
        "--kb",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        expose_value=False,
        callback=_set_kb,
        help="The KB folder (or any folder inside it).",
    )(command)


def open_kb(ctx: click.Context) -> KB:
    """The KB that ``--kb`` names (the current folder by default), closed with the command.

    In a ``pnk`` process (:data:`SETTLE` set by :func:`pinakes_cli.main.main`) the first KB
    opens with the cyclic garbage collector paused, and what the engine's import and the open
    made is then frozen into the collector's permanent generation before it resumes: those
    objects (modules, classes, the config) live as long as the process anyway, and collecting
    while they were made walked them again and again, ~15 ms of a cold ``pnk search``'s CPU
    (issue 37). Cycles that became garbage meanwhile stay in memory (a few MB at most, once).
    The collector then runs as before for the rest of the command, so a long one (``pnk
    watch``) collects what it makes. A test's ``CliRunner`` never sets it: freezing there
    would keep every earlier test's garbage.
    """
    settle = ctx.obj.pop(SETTLE, False)
    if settle:
        gc.disable()
    try:
        from pinakes_core import KB

        kb: KB = KB.open(ctx.obj["kb"])
    finally:
        if settle:
            gc.freeze()
            gc.enable()
    ctx.call_on_close(kb.close)
    return kb


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--kb",
    "kb_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default="current directory",
    help="The KB folder (or any folder inside it).",
)
@click.version_option(package_name="pinakes-cli", prog_name="pnk")
@click.pass_context
def cli(ctx: click.Context, kb_path: Path) -> None:
    """Pinakes: local-first hybrid search over a folder of Markdown.

    Only `pnk ask` can spend money (it calls a model provider, within the [budget] caps);
    every other command is free and never calls a paid API.

    Commands marked "not installed" come from another Pinakes distribution; `pnk plugins`
    lists what is installed.
    """
    ctx.ensure_object(dict)
    ctx.obj["kb"] = kb_path
