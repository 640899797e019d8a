"""``pnk``'s entry point: ``pnk --help`` and ``pnk --version`` answered without loading click.

Everything else goes to :func:`pinakes_cli.main.main` (click, the command modules, plugins).
Those two answers are pure functions of what is installed, so the first run of each, which
click prints as usual, is kept in the user cache folder (``~/.cache/pinakes/front-door/`` on
Linux, beside the embedding model) and printed from there while nothing it came from changed.
Importing click, pluggy and the command modules costs a ``pnk`` start most of its time; read
from the cache, ``pnk --help`` costs an interpreter start and a few dozen ``stat`` calls
(issue 37, docs/benchmarks.md "The front door against a yardstick").

A cached answer is printed only while all of these are as they were when click printed it:

- the interpreter (``sys.executable``, ``sys.version``) and ``sys.path``, with the
  modification time of every folder on it: installing, removing or upgrading any distribution
  (a new plugin with its ``pinakes`` entry point, a new click) rewrites its ``*.dist-info``
  folder and so changes the time of the folder that holds it;
- every module file click's run loaded from outside the standard library (pinakes-cli's
  command modules, the plugins' entry modules and what they import, click itself), by
  modification time and size: an edit to an editable install shows at once;
- the help width click computes from ``COLUMNS`` or the terminal (one file per width).

A run in which a plugin failed to load or to register its commands is never kept, so its
warning is given every time. ``PINAKES_FRONT_DOOR_CACHE`` names another folder for the cache;
set to an empty string it turns the cache off. A cache that cannot be read or written is
ignored: the answer is then click's, as before.

The keying is :mod:`pinakes_core.kept`'s, shared with the MCP server's front (importing
``pinakes_core`` loads none of the engine). This module imports nothing else beyond what the
interpreter has loaded before it runs ``main``.
"""

import codecs
import os
import sys

from pinakes_core.kept import installation, keep, kept, user_cache

__all__ = ["main"]

#: the arguments answered from the cache, and the name of their kind.
_KINDS: dict[tuple[str, ...], str] = {
    ("--help",): "help",
    ("-h",): "help",
    ("--version",): "version",
}
_FORMAT = "pnk-front-door 1"
_ENV = "PINAKES_FRONT_DOOR_CACHE"


def main() -> None:
    """Console-script entry point (``pnk``, ``python -m pinakes_cli``)."""
    kind = _KINDS.get(tuple(sys.argv[1:]))
    if kind is None:
        # click, the command modules and the plugins' entry modules live as long as the
        # process: collecting while they load only walks them again and again (~5 ms of a
        # cold ``pnk search``, issue 37), so they load with the collector paused and are
        # frozen before it resumes (the engine's start gets the same in ``root.open_kb``).
        import gc

        gc.disable()
        try:
            from pinakes_cli.main import main as run
        finally:
            gc.freeze()
            gc.enable()
        run()
        return
    path = _cache_file(kind)
    text = kept(path, _FORMAT) if path is not None else None
    if text is not None:
        _write(text)
        return
    _answer_and_keep(path, installation())


def _write(text: str) -> None:
    """Print ``text`` as ``click.echo`` would.

    To a stdout whose encoding is ASCII (click takes it for a misconfigured locale) that is
    UTF-8, anything unencodable replaced; to any other, the text as it is.
    """
    stream = sys.stdout
    try:
        ascii_only = codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "ascii"
    except LookupError:
        ascii_only = False
    buffer = getattr(stream, "buffer", None)
    if ascii_only and buffer is not None:
        stream.flush()
        buffer.write(text.encode("utf-8", "replace"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _cache_file(kind: str) -> str | None:
    """The cache file of ``kind`` at the help width click would use, or ``None`` (turned off)."""
    folder = os.environ.get(_ENV)
    if folder is None:
        folder = os.path.join(user_cache(), "front-door")
    elif not folder:
        return None
    return os.path.join(folder, f"{kind}-{_help_width()}.txt")


def _help_width() -> int:
    """The width click formats help at: ``shutil.get_terminal_size()``, capped at 80, less 2."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(min(columns or 80, 80) - 2, 50)


def _answer_and_keep(path: str | None, found: str) -> None:
    """Let click answer; keep what it printed in ``path`` when the run was clean.

    ``found`` is :func:`~pinakes_core.kept.installation` as it was before click ran.
    """
    import contextlib
    import io

    from pinakes_cli.main import main as run
    from pinakes_cli.plugins import commands_complete

    printed = io.StringIO()
    code: str | int | None = 0
    try:
        with contextlib.redirect_stdout(printed):
            run()
    except SystemExit as exc:
        code = exc.code
    finally:  # what click printed reaches stdout whatever happened
        _write(printed.getvalue())
    if path is not None and code in (0, None) and commands_complete():
        keep(path, _FORMAT, printed.getvalue(), found)
    sys.exit(code)
