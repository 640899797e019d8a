"""Git hooks that keep the index fresh: ``pnk hooks install`` / ``uninstall`` / status.

The hooks (post-commit, post-merge, post-checkout, post-rewrite) run whatever hook was there
before — it is renamed ``<hook>.pinakes-chained`` and called with the same arguments and
standard input, and its exit status is the hook's — and then start a quiet incremental sync of
each registered KB in the background, so git never waits. The sync command is the absolute
path of the interpreter running now, so a hook works from any shell, outside the clone's
virtualenv too; when that interpreter is gone (its environment moved or was deleted) the hook
runs the ``pnk`` on git's ``PATH`` instead, and ``pnk hooks status`` and ``pnk doctor`` say so. KBs are recorded relative to the repository's top, so one set of hooks serves
every worktree and several KBs in one repository; ``core.hooksPath`` is honoured (git tells
where hooks live). Uninstall removes this KB; when no KB is left it puts the previous hook back
byte for byte (a rename), or removes the file when there was none.

A background sync that finds another sync running waits for it; of several waiting, one stays
(the others leave: the one that stays sees all their changes). Its outcome is written to
``.pinakes/hook-sync.json``, which ``pnk doctor`` reports.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from pinakes_core.derived import open_nofollow, store_dir
from pinakes_core.errors import HookError, LockError, PinakesError, UnsafeFileError
from pinakes_core.index.lock import _alive
from pinakes_core.intake import read_limited
from pinakes_core.models import DoctorFinding, SyncReport
from pinakes_core.read.sidecar import _atomic_write

__all__ = [
    "HOOKS",
    "HookState",
    "HooksReport",
    "hook_findings",
    "hooks_status",
    "install_hooks",
    "run_hook_sync",
    "uninstall_hooks",
]

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite")
CHAINED = ".pinakes-chained"
STATUS_FILE = "hook-sync.json"
_PENDING = "hook-sync.pending"
_MARKER = "# pinakes-hook 1:"
_KB_LINE = "# pinakes-kb: "
_CMD_LINE = "# pinakes-command: "

State = Literal["installed", "other-kbs", "modified", "foreign", "absent"]


class HookState(BaseModel):
    """One git hook as it stands.

    Attributes:
        name: the hook (``post-commit`` …).
        path: its file.
        state: ``installed`` (syncs this KB), ``other-kbs`` (a Pinakes hook for other KBs
            only), ``modified`` (a Pinakes hook edited by hand), ``foreign`` (another tool's
            hook; this KB is not synced), ``absent``.
        chained: whether a previous hook is kept beside it and run first.
        command: the sync command the hook runs (for a Pinakes hook).
        command_ok: whether that command's interpreter still exists.
    """

    name: str
    path: str
    state: State
    chained: bool = False
    command: list[str] = []
    command_ok: bool = True


class HooksReport(BaseModel):
    """The hooks of the repository holding a KB, and what an install or uninstall changed.

    Attributes:
        repo: the repository's top folder.
        hooks_dir: where git runs hooks from (``core.hooksPath`` honoured).
        kb_path: the KB's folder relative to ``repo`` (``.`` at the top).
        hooks: the state of each of the four hooks.
        changed: one line per file written, renamed or removed.
        last_sync: the last background sync's outcome (``.pinakes/hook-sync.json``), if any.
    """

    repo: str
    hooks_dir: str
    kb_path: str
    hooks: list[HookState]
    changed: list[str] = []
    last_sync: dict[str, object] | None = None


def _git(root: Path, *args: str) -> list[str]:
    git = shutil.which("git")
    if git is None:
        raise HookError("git is not installed (not found on PATH).", "Install git first.")
    result = subprocess.run(
        [git, "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise HookError(
            f"{root} is not inside a git work tree ({result.stderr.strip() or 'git failed'}).",
            "Hooks need a git repository: run `git init` in the KB or a folder above it.",
        )
    return result.stdout.splitlines()


def _locate(root: Path) -> tuple[Path, Path, str]:
    """Return the repository top, the hooks folder and the KB's path relative to the top."""
    lines = _git(root, "rev-parse", "--show-toplevel", "--git-path", "hooks")
    if len(lines) != 2 or not lines[0]:
        raise HookError(f"{root} is not inside a git work tree (a bare repository?).")
    top = Path(lines[0]).resolve()
    hooks_dir = (root / lines[1]).resolve()
    rel = Path(os.path.relpath(root.resolve(), top)).as_posix()
    if rel.startswith("..") or "\n" in rel or "\r" in rel:
        raise HookError(f"The KB at {root} is not inside the repository at {top}.")
    return top, hooks_dir, rel


#: A hook script is a few lines; a bigger "hook" is not read (it is kept aside unread).
_MAX_HOOK_BYTES = 1 << 20


def render_hook(
    name: str, kbs: Sequence[str], command: Sequence[str], *, fallback: bool = True
) -> str:
    """The text of a Pinakes hook ``name`` syncing ``kbs`` (paths relative to the repo top).

    With ``fallback`` (what install writes since issue 35), a hook whose interpreter is gone
    (its environment was moved or deleted) runs the ``pnk`` on git's ``PATH`` instead of
    nothing; ``fallback=False`` is the text earlier installs wrote, still read as installed.
    """
    cmd = shlex.join(command)
    listed = " ".join(shlex.quote(kb) for kb in kbs)
    sync = ' hooks sync --kb "$top/$kb" </dev/null >/dev/null 2>&1 &)'
    launch = (
        [
            f"        if [ -x {shlex.quote(command[0] if command else '')} ]; then",
            f"            ({cmd}{sync}",
            "        elif command -v pnk >/dev/null 2>&1; then  # its environment is gone",
            f"            (pnk{sync}",
            "        fi",
        ]
        if fallback
        else [f"        ({cmd}{sync}"]
    )
    lines = [
        "#!/bin/sh",
        f"{_MARKER} written by `pnk hooks install`; `pnk hooks uninstall` puts back what was here.",
        "# Runs the hook that was here before (if any), then refreshes the Pinakes KBs below with",
        "# a quiet incremental sync in the background, so git never waits for it.",
        *(f"{_KB_LINE}{kb}" for kb in kbs),
        f"{_CMD_LINE}{cmd}",
        "status=0",
        f'previous="$(dirname "$0")/{name}{CHAINED}"',
        'if [ -x "$previous" ]; then',
        '    "$previous" "$@" || status=$?',
        "fi",
        "top=$(pwd)  # git runs hooks from the top of the work tree",
        f"for kb in {listed}; do",
        '    if [ -f "$top/$kb/pinakes.toml" ]; then',
        *launch,
        "    fi",
        "done",
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def _parse(text: str) -> tuple[list[str], list[str]] | None:
    """``(kbs, command)`` of a Pinakes hook, or ``None`` for any other file."""
    lines = text.splitlines()
    if len(lines) < 2 or not lines[1].startswith(_MARKER):
        return None
    kbs = [line[len(_KB_LINE) :] for line in lines if line.startswith(_KB_LINE)]
    cmd = next((line[len(_CMD_LINE) :] for line in lines if line.startswith(_CMD_LINE)), "")
    try:
        return kbs, shlex.split(cmd)
    except ValueError:
        return kbs, []


def _read(path: Path) -> str | None:
    """A hook file's text, ``None`` if there is none.

    Anything else there — a symlink to nothing, a folder, a FIFO, a file too big or unreadable —
    is someone's hook all the same: ``""``, so it is kept aside and put back like any other.
    """
    if not os.path.lexists(path):
        return None
    try:
        return read_limited(path, limit=_MAX_HOOK_BYTES).decode("utf-8", errors="replace")
    except (OSError, UnsafeFileError):  # never a blocking open: FIFOs are refused unopened
        return ""


def _kbs(path: Path) -> list[str]:
    """The KBs a Pinakes hook syncs (none for any other file)."""
    parsed = _parse(_read(path) or "")
    return parsed[0] if parsed else []


def _state(name: str, path: Path, rel: str) -> HookState:
    text = _read(path)
    chained = os.path.lexists(path.with_name(name + CHAINED))
    if text is None:
        return HookState(name=name, path=str(path), state="absent", chained=chained)
    parsed = _parse(text)
    if parsed is None:
        return HookState(name=name, path=str(path), state="foreign", chained=chained)
    kbs, command = parsed
    state: State
    if text not in (
        render_hook(name, kbs, command),
        render_hook(name, kbs, command, fallback=False),
    ):
        state = "modified"
    else:
        state = "installed" if rel in kbs else "other-kbs"
    ok = bool(command) and Path(command[0]).exists()
    return HookState(
        name=name, path=str(path), state=state, chained=chained, command=command, command_ok=ok
    )


def _last_sync(root: Path) -> dict[str, object] | None:
    try:
        data = json.loads((store_dir(root) / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def hooks_status(root: Path) -> HooksReport:
    """The four hooks of the repository holding the KB at ``root``.

    Raises:
        HookError: if git is missing or ``root`` is not in a git work tree.
    """
    top, hooks_dir, rel = _locate(root)
    return HooksReport(
        repo=str(top),
        hooks_dir=str(hooks_dir),
        kb_path=rel,
        hooks=[_state(name, hooks_dir / name, rel) for name in HOOKS],
        last_sync=_last_sync(root),
    )


def _write_hook(path: Path, text: str) -> None:
    _atomic_write(path, text)
    path.chmod(0o755)


def _refuse_modified(report: HooksReport) -> None:
    edited = [h.path for h in report.hooks if h.state == "modified"]
    if edited:
        raise HookError(
            f"{edited[0]} was written by `pnk hooks install` and edited since; nothing was changed.",
            f"Move your lines into {Path(edited[0]).name}{CHAINED} (run before the sync) or "
            "delete the file, then run the command again.",
        )


def install_hooks(root: Path, command: Sequence[str]) -> HooksReport:
    """Install (or refresh) the four hooks so they sync the KB at ``root``.

    Args:
        root: the KB root.
        command: the absolute command that runs ``pnk`` (``[python, "-m", "pinakes_cli"]``);
            the hooks append ``hooks sync --kb <path>``.

    Idempotent: a second install changes nothing but a moved interpreter path.

    Raises:
        HookError: if git is missing, ``root`` is not in a work tree, or a Pinakes hook was
            edited by hand (nothing is changed then).
    """
    report = hooks_status(root)
    _refuse_modified(report)
    hooks_dir = Path(report.hooks_dir)
    hooks_dir.mkdir(parents=True, exist_ok=True)
    changed = []
    for hook in report.hooks:
        path = Path(hook.path)
        if hook.state == "foreign":
            chained = path.with_name(hook.name + CHAINED)
            if os.path.lexists(chained):  # a dangling symlink is a hook too: never replaced
                raise HookError(
                    f"Both {path} and {chained} exist and neither is a Pinakes hook.",
                    f"Merge them by hand into {chained.name}, then run the command again.",
                )
            os.replace(path, chained)  # bytes and mode kept: uninstall renames it back
            changed.append(f"kept the existing {hook.name} hook as {chained.name}; it runs first")
        kbs = _kbs(path)
        if report.kb_path not in kbs:
            kbs.append(report.kb_path)
        text = render_hook(hook.name, kbs, list(command))
        if _read(path) != text:
            _write_hook(path, text)
            changed.append(f"wrote {path}")
    return hooks_status(root).model_copy(update={"changed": changed})


def uninstall_hooks(root: Path) -> HooksReport:
    """Stop the hooks syncing the KB at ``root``; restore the previous hooks when none is left.

    A hook file that another tool wrote is left alone.

    Raises:
        HookError: if git is missing, ``root`` is not in a work tree, or a Pinakes hook was
            edited by hand (nothing is changed then).
    """
    report = hooks_status(root)
    _refuse_modified(report)
    changed = []
    for hook in report.hooks:
        if hook.state not in ("installed", "other-kbs"):
            continue
        path = Path(hook.path)
        kbs = [kb for kb in _kbs(path) if kb != report.kb_path]
        if kbs:
            if hook.state == "installed":
                _write_hook(path, render_hook(hook.name, kbs, hook.command))
                changed.append(f"removed this KB from {path}")
            continue
        chained = path.with_name(hook.name + CHAINED)
        if os.path.lexists(chained):
            if chained.is_dir() and not chained.is_symlink():
                path.unlink()  # a rename cannot put a folder over a file
            os.replace(chained, path)
            changed.append(f"restored the previous {hook.name} hook")
        else:
            path.unlink()
            changed.append(f"removed {path}")
    return hooks_status(root).model_copy(update={"changed": changed})


def _waiting(store: Path) -> bool:
    """Whether another live hook sync is waiting to run (a marker left by a dead one is removed)."""
    marker = store / _PENDING
    try:
        pid = int(marker.read_text().strip() or "0")
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        pid = 0
    if pid > 0 and pid != os.getpid() and _alive(pid):
        return True
    if pid != os.getpid():
        marker.unlink(missing_ok=True)
    return False


def _claim_pending(store: Path) -> bool:
    """Become the one waiting hook sync; ``False`` when another live one already waits."""
    marker = store / _PENDING
    for _ in range(2):
        try:
            fd = open_nofollow(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _waiting(store):
                return False
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(str(os.getpid()))
        return True
    return False


def _release_pending(store: Path) -> None:
    marker = store / _PENDING
    with contextlib.suppress(OSError, ValueError):
        if int(marker.read_text().strip() or "0") == os.getpid():
            marker.unlink()


def run_hook_sync(
    root: Path,
    *,
    sync: Callable[[], SyncReport],
    wait_s: float = 600.0,
    poll_s: float = 0.5,
) -> dict[str, object]:
    """The sync a hook starts: incremental, quiet, waiting its turn behind a running sync.

    Of several hook syncs waiting at once only one stays. The outcome (``ok``, ``error``,
    counts, times) is written to ``.pinakes/hook-sync.json`` and returned. Never raises for a
    :class:`PinakesError`: the outcome records it.

    Args:
        root: the KB root.
        sync: syncs the KB at ``root`` once (opening and closing it); called again after a
            :class:`LockError` until ``wait_s`` has passed.
        wait_s: how long to wait behind a running sync.
        poll_s: how often to try again meanwhile.
    """
    started = time.time()
    outcome: dict[str, object] = {"started": started, "pid": os.getpid()}
    try:
        store = store_dir(root, create=True)
    except PinakesError as exc:  # nowhere safe to record it: the next command says it again
        outcome.update(ok=False, error=str(exc))
        return outcome
    if _waiting(store):  # it syncs after the running sync, so it will see this change too
        outcome.update(ok=True, error=None, skipped="another hook sync is waiting")
        return outcome
    deadline = started + wait_s
    while True:
        _release_pending(store)
        try:
            report = sync()
            outcome.update(
                ok=True,
                error=None,
                added=len(report.added),
                changed=len(report.changed),
                removed=len(report.removed),
            )
            break
        except LockError as exc:
            if time.time() > deadline:
                outcome.update(ok=False, error=str(exc))
                break
            if not _claim_pending(store):
                outcome.update(ok=True, error=None, skipped="another hook sync is waiting")
                return outcome
            time.sleep(poll_s)
        except PinakesError as exc:
            outcome.update(ok=False, error=str(exc))
            break
    outcome["finished"] = time.time()
    with contextlib.suppress(OSError):
        _atomic_write(store / STATUS_FILE, json.dumps(outcome) + "\n")
    return outcome


def hook_findings(root: Path) -> list[DoctorFinding]:
    """Doctor findings on hook status; nothing when the KB is not in a git work tree."""
    try:
        report = hooks_status(root)
    except HookError:
        return []
    mine = [h for h in report.hooks if h.state == "installed"]
    missing = [h.name for h in report.hooks if h.state != "installed"]
    findings = []
    if not mine:
        findings.append(
            DoctorFinding(
                check="git-hooks",
                severity="info",
                message="No Pinakes git hooks: the index is refreshed only by `pnk sync`; "
                "`pnk hooks install` refreshes it after every commit, merge and checkout.",
            )
        )
        return findings
    if missing:
        findings.append(
            DoctorFinding(
                check="git-hooks",
                severity="warning",
                message=f"Git hooks sync this KB after some events but not after {', '.join(missing)}.",
                items=[f"{h.name}: {h.state}" for h in report.hooks if h.state != "installed"],
                fixable=False,
            )
        )
    else:
        findings.append(
            DoctorFinding(
                check="git-hooks",
                severity="info",
                message=f"Git hooks in {report.hooks_dir} refresh the index after commit, merge, "
                "checkout and rewrite.",
            )
        )
    stale = sorted({h.command[0] for h in mine if not h.command_ok and h.command})
    if stale:
        findings.append(
            DoctorFinding(
                check="git-hooks-command",
                severity="warning",
                message=f"The hooks run {stale[0]}, which no longer exists; they sync nothing.",
                items=["Run `pnk hooks install` again to point them at this Pinakes."],
            )
        )
    last = report.last_sync
    if last and last.get("ok") is False:
        findings.append(
            DoctorFinding(
                check="git-hooks-sync",
                severity="warning",
                message=f"The last background sync started by a hook failed: {last.get('error')}",
            )
        )
    return findings
