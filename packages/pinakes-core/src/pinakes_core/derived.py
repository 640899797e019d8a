"""The derived folder ``.pinakes/`` and the rule that keeps every write inside it (DESIGN §13).

Everything Pinakes writes, truncates, renames or deletes on its own account lives in the KB's
``.pinakes/`` folder. That folder is not trusted as ours just because of its name: a notes
repository someone clones can commit ``.pinakes`` itself as a symbolic link, or a link inside
it (``cache/extract`` pointing at the home folder, ``sync.lock`` at a user's file), and a
cleanup that walks into such a link deletes files outside the KB (issue 34).

The rule: :func:`store_dir` hands out the folder only after checking that

- ``.pinakes`` is a real folder (not a link, not a file), and
- nothing inside it is a symbolic link (but the store's own ``index.db`` pointer, and the temp
  link a publish renames over it, each naming a generation file beside it), a device, FIFO
  or socket, or a file with a second hard link, and
- no file in it is tracked by git (a repository that commits ``.pinakes`` content is refused).

Otherwise it raises :class:`UnsafeStoreError`, one sentence naming the path and the fix; the
check never follows a link and never changes anything. :func:`store_problems` is the same
check for ``pnk doctor``, as findings instead of an error. Writers still open their files
with ``O_NOFOLLOW`` (:func:`open_nofollow`), so a link made after the check is not followed
either.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from pinakes_core.errors import PinakesError

__all__ = [
    "STORE_DIR",
    "UnsafeStoreError",
    "open_nofollow",
    "replace_file",
    "store_dir",
    "store_problems",
]

#: The derived folder's name, in the KB's root.
STORE_DIR = ".pinakes"

#: The links the store makes itself: ``index.db`` naming the current generation's file, and
#: the temp link a publish renames over it (``.index.db.<pid>.link``; a publish killed before
#: its rename leaves one, which the next sync's garbage collection removes).
_POINTER = re.compile(r"index\.db|\.index\.db\.\d+\.link")
_POINTER_TARGET = re.compile(r"index\.\d+\.db")

#: How long the git check may take before it is skipped (git missing or hung: the other
#: checks still hold, and a tracked file is no way out of the folder on its own).
_GIT_SECONDS = 5.0

_COMMITTED = "committed to git"

#: The git verdicts already reached, by (root, folder inode, folder mtime): a checkout that
#: adds a tracked file changes the folder's mtime, so a stale verdict cannot survive one.
_git_clean: set[tuple[str, int, int]] = set()


class UnsafeStoreError(PinakesError):
    """The KB's ``.pinakes/`` folder could lead a write outside the KB, so nothing is written."""


def store_dir(root: Path, *, create: bool = False) -> Path:
    """Return the KB's derived folder ``root/.pinakes`` once it is proven safe to write in.

    Args:
        root: the KB's root folder.
        create: make the folder (mode 0700 under the umask) when it does not exist.

    Raises:
        UnsafeStoreError: the folder (or something inside it) fails the rule in the module
            docstring; the message names the path and what to do.
    """
    problems = store_problems(root)
    if problems:
        if _COMMITTED in problems[0]:
            hint = (
                f"Take it out of the repository (`git rm -r --cached {STORE_DIR}`), keep "
                f"'{STORE_DIR}/' in .gitignore, and sync again."
            )
        else:
            hint = (
                "Pinakes writes nothing there until it is fixed; the index is disposable, so "
                f"removing {root / STORE_DIR} (a link is removed, not what it points at) and "
                "syncing again is always safe."
            )
        raise UnsafeStoreError(problems[0], hint)
    folder = root / STORE_DIR
    if create and not os.path.lexists(folder):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            return store_dir(root)  # made by a concurrent sync: check what is there now
        except NotADirectoryError:
            raise UnsafeStoreError(
                f"{root} is not a folder, so it cannot hold the KB's index.",
                "Open the KB at its folder.",
            ) from None
    return folder


def store_problems(root: Path) -> list[str]:
    """Every way ``root/.pinakes`` breaks the rule, one sentence each; empty when it is safe.

    A missing folder is safe (it is created on demand). Never follows a link, never writes.
    """
    folder = root / STORE_DIR
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{folder} cannot be examined ({exc.strerror})."]
    if stat.S_ISLNK(info.st_mode):
        return [
            f"{folder} is a symbolic link (to {_link_target(folder)}), not the KB's own folder."
        ]
    if not stat.S_ISDIR(info.st_mode):
        return [f"{folder} is not a folder."]
    problems = _inside_problems(folder)
    if not problems:
        problems = _tracked_problems(root, info)
    return problems


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link as the last component (``ELOOP``).

    The parents are covered by :func:`store_dir`'s check; this closes the gap of a link made
    after it. Adds ``O_CLOEXEC`` so a child process never inherits the descriptor.
    """
    extra = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.open(path, flags | extra, mode)


def replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a new temp file beside it, renamed over it.

    The temp file is created exclusively and without following links, and a rename replaces a
    link rather than writing through it, so nothing outside the folder is touched.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # a temp file a killed process left (or a link in its place)
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _inside_problems(folder: Path) -> list[str]:
    """Links, special files and hard-linked files anywhere under ``folder`` (never followed)."""
    problems: list[str] = []
    pending = [folder]
    while pending and len(problems) < 5:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError as exc:
            if current != folder:
                problems.append(f"{current} cannot be read ({exc.strerror}).")
            continue
        for entry in entries:
            path = Path(entry.path)
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile (a concurrent sync's temp file)
            if stat.S_ISLNK(info.st_mode):
                if current == folder and _POINTER.fullmatch(entry.name) and _own_pointer(path):
                    continue
                problems.append(
                    f"{path} is a symbolic link (to {_link_target(path)}) inside the KB's "
                    f"index folder, which Pinakes never makes."
                )
            elif stat.S_ISDIR(info.st_mode):
                pending.append(path)
            elif not stat.S_ISREG(info.st_mode):
                problems.append(f"{path} is not a plain file (a device, pipe or socket).")
            elif info.st_nlink > 1:
                problems.append(
                    f"{path} has {info.st_nlink} hard links, so writing it would change "
                    f"another file too."
                )
    return problems


def _own_pointer(path: Path) -> bool:
    """Whether ``path`` is the store's pointer: a link naming a generation file beside it."""
    try:
        return _POINTER_TARGET.fullmatch(os.readlink(path)) is not None
    except OSError:
        return False


def _link_target(path: Path) -> str:
    try:
        return repr(os.readlink(path))[:200]
    except OSError:
        return "an unreadable target"


def _tracked_problems(root: Path, info: os.stat_result) -> list[str]:
    """A sentence when git tracks a file under ``.pinakes`` (a committed index is refused)."""
    key = (str(root), info.st_ino, info.st_mtime_ns)
    if key in _git_clean:
        return []
    git = shutil.which("git")
    if git is None:
        return []
    try:
        done = subprocess.run(
            [git, "-C", str(root), "ls-files", "-z", "--", STORE_DIR],
            capture_output=True,
            timeout=_GIT_SECONDS,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if done.returncode != 0:  # not a repository (or git refuses it): nothing is tracked
        _git_clean.add(key)
        return []
    tracked = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
    if not tracked:
        _git_clean.add(key)
        return []
    return [
        f"{root / STORE_DIR} holds {len(tracked)} file(s) {_COMMITTED} "
        f"(first: {tracked[0][:120]!r}); the index must never come from a repository."
    ]
