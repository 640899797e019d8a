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

This module imports nothing beyond what the interpreter has loaded before it runs ``main``.
"""

import codecs
import os
import sys

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
    text = _cached(path) if path is not None else None
    if text is not None:
        _write(text)
        return
    _answer_and_keep(path, _installation())


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
        folder = os.path.join(_user_cache(), "front-door")
    elif not folder:
        return None
    return os.path.join(folder, f"{kind}-{_help_width()}.txt")


def _user_cache() -> str:
    """Pinakes' user cache folder, where ``platformdirs.user_cache_dir("pinakes")`` puts it."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~/AppData/Local")
        return os.path.join(base, "pinakes", "Cache")
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/pinakes")
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    if not os.path.isabs(base):
        base = os.path.expanduser("~/.cache")
    return os.path.join(base, "pinakes")


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


def _installation() -> str:
    """One line naming the interpreter and every ``sys.path`` folder with its modification time."""
    parts = [sys.executable, sys.version.replace("\n", " ")]
    for entry in sys.path:
        try:
            stamp = os.stat(entry or ".").st_mtime_ns
        except OSError:
            stamp = -1
        parts.append(f"{entry}={stamp}")
    return "\0".join(parts)


def _cached(path: str) -> str | None:
    """The answer kept in ``path``, if everything it came from is unchanged; else ``None``."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            header, installation, count, rest = f.read().split("\n", 3)
        *files, text = rest.split("\n", int(count))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if header != _FORMAT or installation != _installation() or len(files) != int(count):
        return None
    for line in files:
        name, _, stamp = line.rpartition("\t")
        try:
            info = os.stat(name)
        except OSError:
            return None
        if stamp != f"{info.st_mtime_ns}:{info.st_size}":
            return None
    return text


def _answer_and_keep(path: str | None, installation: str) -> None:
    """Let click answer; keep what it printed in ``path`` when the run was clean.

    ``installation`` is :func:`_installation` as it was before click ran.
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
        _keep(path, printed.getvalue(), installation)
    sys.exit(code)


def _loaded_files() -> list[str] | None:
    """The files of every module loaded from outside the standard library; ``None`` if unlistable."""
    stdlib = os.path.dirname(os.__file__)
    found = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not isinstance(name, str):
            continue
        name = os.path.abspath(name)
        if name.startswith(stdlib + os.sep) and "site-packages" not in name:
            continue
        if "\n" in name or "\t" in name:
            return None
        found.add(name)
    return sorted(found)


def _keep(path: str, text: str, installation: str) -> None:
    """Write the answer and what it depends on to ``path`` (atomically); never fail the command."""
    import contextlib

    files = _loaded_files()
    if files is None:
        return
    lines = [_FORMAT, installation, str(len(files))]
    temp = f"{path}.{os.getpid()}.tmp"
    try:
        for name in files:
            info = os.stat(name)
            lines.append(f"{name}\t{info.st_mtime_ns}:{info.st_size}")
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        with open(temp, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(lines) + "\n" + text)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
