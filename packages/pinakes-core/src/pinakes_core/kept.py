"""Answers kept on disk while the installed code they came from is unchanged.

Both front doors keep an answer that is a pure function of what is installed, so that a later
start gives it without importing the code that made it: ``pnk --help``/``--version`` (click's
text, :mod:`pinakes_cli.door`) and the MCP server's static lists (fastmcp's ``tools/list``
and kin, :mod:`pinakes_mcp.front`). This module is the keying both use; each caller names its
file and what else its answer depends on (a help width, a protocol version, server options).

A kept answer is believed only while all of these are as they were when it was made:

- the interpreter (``sys.executable``, ``sys.version``) and ``sys.path``, with the
  modification time of every folder on it: installing, removing or upgrading any distribution
  rewrites its ``*.dist-info`` folder and so changes the time of the folder that holds it;
- every module file loaded from outside the standard library when the answer was made (the
  framework, the plugins and what they import, our own modules), by modification time and
  size: an edit to an editable install shows at once.

Anything that cannot be read or written is ignored (no answer kept, none believed). Standard
library only, and nothing the interpreter has not loaded before ``main`` beyond ``os``/``sys``.
"""

import os
import sys

__all__ = ["installation", "keep", "kept", "loaded_files", "user_cache"]


def user_cache() -> str:
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


def installation() -> str:
    """One line naming the interpreter and every ``sys.path`` folder with its modification time."""
    parts = [sys.executable, sys.version.replace("\n", " ")]
    for entry in sys.path:
        try:
            stamp = os.stat(entry or ".").st_mtime_ns
        except OSError:
            stamp = -1
        parts.append(f"{entry}={stamp}")
    return "\0".join(parts)


def kept(path: str, header: str) -> str | None:
    """The answer kept in ``path`` under ``header``, if all it came from is unchanged; else ``None``.

    ``header`` is the caller's format and anything else its answer depends on (one line).
    """
    try:
        with open(path, encoding="utf-8", newline="") as f:
            first, found, count, rest = f.read().split("\n", 3)
        *files, text = rest.split("\n", int(count))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if first != header or found != installation() or len(files) != int(count):
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


def loaded_files() -> list[str] | None:
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


def keep(path: str, header: str, text: str, found: str) -> None:
    """Write ``text`` and what it depends on to ``path`` (atomically); never raise.

    ``found`` is :func:`installation` as it was before the answer was made (a ``sys.path``
    folder changed while it was made is then noticed); the module files are those loaded now.
    """
    import contextlib

    files = loaded_files()
    if files is None or "\n" in header:
        return
    lines = [header, found, str(len(files))]
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
