"""MCP host configuration: the JSON each host needs to start ``pinakes-mcp``, merged safely.

Hosts read an ``mcpServers`` object (Claude Desktop, Claude Code's ``.mcp.json``, Cursor) or a
``servers`` object (VS Code's ``.vscode/mcp.json``), each entry naming a command and its
arguments. :func:`merge` never clobbers a file: it refuses one it cannot parse, backs up the
original before writing, touches only the one server entry, and writes atomically.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinakes_core import PinakesError
from pinakes_core.errors import UnsafeFileError
from pinakes_core.intake import read_limited
from pinakes_core.read.sidecar import atomic_write

__all__ = [
    "HOSTS",
    "HostConfigError",
    "MergeResult",
    "default_file",
    "executable",
    "merge",
    "server_entry",
    "snippet",
]

#: host → the top-level key holding server entries.
HOSTS = {
    "claude-desktop": "mcpServers",
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "vscode": "servers",
}


class HostConfigError(PinakesError):
    """A host config file cannot be read or merged safely."""


def executable() -> str:
    """Return the absolute path of the installed ``pinakes-mcp`` script.

    The one beside the running interpreter wins (the same install as this ``pnk``), then the
    first on ``PATH``.
    """
    beside = Path(sys.executable).with_name(
        "pinakes-mcp.exe" if sys.platform == "win32" else "pinakes-mcp"
    )
    if beside.exists():
        return str(beside.absolute())
    found = shutil.which("pinakes-mcp")
    if found is None:
        raise HostConfigError(
            "No pinakes-mcp executable was found beside this Python or on PATH.",
            "Install it: uv tool install pinakes-mcp (or pip install pinakes-mcp).",
        )
    return str(Path(found).absolute())


def _kb_root(kb: Path) -> Path:
    """``kb`` made absolute, if it is a KB folder or a folder inside one (issue 35).

    Raises:
        HostConfigError: if it does not exist or no ``pinakes.toml`` is at or above it: a host
            started with it could never serve it.
    """
    path = kb.expanduser().resolve()
    if not path.is_dir():
        raise HostConfigError(
            f"The KB folder {path} does not exist: a host configured with it could never start "
            "the server.",
            "Pass the folder of a KB (`pnk init PATH` makes one).",
        )
    if not any((folder / "pinakes.toml").is_file() for folder in (path, *path.parents)):
        raise HostConfigError(
            f"{path} is not a KB (no pinakes.toml in it or above it): a host configured with it "
            "could never start the server.",
            f"Run `pnk init {path}` first, or pass a KB's folder.",
        )
    return path


def server_entry(host: str, kbs: list[Path], extra: list[str]) -> dict[str, Any]:
    """Return the server entry for ``host``: absolute command, absolute ``--kb`` paths.

    Raises:
        HostConfigError: for a ``--kb`` that is no KB folder, or no pinakes-mcp executable.
    """
    args: list[str] = []
    for kb in kbs:
        args += ["--kb", str(_kb_root(kb))]
    entry: dict[str, Any] = {"command": executable(), "args": [*args, *extra]}
    if host in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    return entry


def snippet(host: str, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Return the whole JSON object to paste into ``host``'s config file."""
    return {HOSTS[host]: {name: entry}}


def default_file(host: str) -> Path:
    """Return the config file ``host`` reads (user-wide for the desktop apps, else this folder)."""
    home = Path.home()
    if host == "claude-desktop":
        if sys.platform == "darwin":
            base = home / "Library" / "Application Support"
        elif sys.platform == "win32":
            base = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
        else:
            # An empty XDG_CONFIG_HOME is unset (the XDG spec; the fleet registry reads it so):
            # Path("") would put the file in the current folder.
            base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return base / "Claude" / "claude_desktop_config.json"
    if host == "claude-code":
        return Path.cwd() / ".mcp.json"
    if host == "cursor":
        return home / ".cursor" / "mcp.json"
    return Path.cwd() / ".vscode" / "mcp.json"


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge` did: ``action`` is ``created``, ``added``, ``replaced`` or ``unchanged``."""

    file: Path
    action: str
    backup: Path | None
    name: str

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "file": str(self.file),
            "action": self.action,
            "backup": str(self.backup) if self.backup else None,
            "name": self.name,
        }

    def describe(self) -> str:
        """One line for a human."""
        if self.action == "unchanged":
            return f"{self.file} already has this {self.name!r} entry; nothing written."
        saved = f" (the previous file is saved as {self.backup})" if self.backup else ""
        return f"{self.action.capitalize()} the {self.name!r} server entry in {self.file}{saved}."


#: A host's MCP config is a few KB; anything over this is not one (and is not read).
_MAX_CONFIG_BYTES = 8 << 20


def _backup_path(file: Path) -> Path:
    candidate = file.with_name(file.name + ".bak")
    number = 1
    while candidate.exists():
        number += 1
        candidate = file.with_name(f"{file.name}.bak{number}")
    return candidate


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (rewriting would silently drop one)."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(f"the key {key!r} appears twice in one object")
        data[key] = value
    return data


def _read_config(file: Path, target: Path) -> str:
    try:
        return read_limited(target, limit=_MAX_CONFIG_BYTES, name=str(file)).decode("utf-8")
    except UnsafeFileError as exc:
        raise HostConfigError(
            exc.message, "Pass --file with the host's JSON config file."
        ) from None
    except UnicodeDecodeError:
        raise HostConfigError(
            f"{file} is not UTF-8 text; it was not changed.",
            "Save it as UTF-8, or add the entry by hand: run the command without --write.",
        ) from None
    except OSError as exc:
        raise HostConfigError(
            f"{file} cannot be read ({exc.strerror}); it was not changed."
        ) from None


def merge(host: str, file: Path, name: str, entry: dict[str, Any]) -> MergeResult:
    """Add or replace the ``name`` entry in ``file`` for ``host``; keep everything else.

    Raises:
        HostConfigError: if the file is not a JSON object (e.g. JSON with comments), or its
            servers key is not an object; the file is then left as it was.
    """
    key = HOSTS[host]
    file = file.expanduser()
    # A config kept in a dotfiles repository is often a symlink: write the file it leads to,
    # so the link stays a link.
    try:
        target = file.resolve() if file.is_symlink() else file
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError on a symlink loop
        raise HostConfigError(
            f"{file} is a symlink that loops back on itself; nothing was written.",
            "Remove the link, or pass --file with the host's real config file.",
        ) from None
    # A link (to the file or to a folder above it) into a dotfiles checkout that is not there:
    # writing would create the missing folders wherever the link points, or fail half-way.
    for link in (file, target, *target.parents):
        if os.path.islink(link) and not link.exists():
            raise HostConfigError(
                f"{link} is a symlink to {os.readlink(link)}, which does not exist; "
                "nothing was written.",
                "Restore what it points to, or remove the link, then run the command again.",
            )
    data: dict[str, Any] = {}
    original: str | None = None
    if os.path.lexists(target):
        original = _read_config(file, target)
        try:
            data = (
                json.loads(original.removeprefix("\ufeff"), object_pairs_hook=_no_duplicates)
                if original.strip("\ufeff \t\r\n")
                else {}
            )
        except json.JSONDecodeError as exc:
            raise HostConfigError(
                f"{file} is not plain JSON (line {exc.lineno}: {exc.msg}); it was not changed.",
                "Add the entry by hand: run the command without --write to print it.",
            ) from None
        except (_DuplicateKey, RecursionError) as exc:
            why = exc if isinstance(exc, _DuplicateKey) else "it nests too deeply to read"
            raise HostConfigError(
                f"{file}: {why}; it was not changed.",
                "Add the entry by hand: run the command without --write to print it.",
            ) from None
        if not isinstance(data, dict):
            raise HostConfigError(f"{file} does not hold a JSON object; it was not changed.")
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise HostConfigError(f"{file}: {key!r} is not a JSON object; it was not changed.")
    if servers.get(name) == entry:
        return MergeResult(file, "unchanged", None, name)
    action = "created" if original is None else "replaced" if name in servers else "added"
    servers[name] = entry
    backup = None
    target.parent.mkdir(parents=True, exist_ok=True)
    if original is not None:
        backup = _backup_path(file)
        shutil.copy2(target, backup)
    text = json.dumps(data, indent=2) + "\n"
    if original is not None:  # the file's own BOM and line ends
        text = ("\ufeff" if original.startswith("\ufeff") else "") + text
        text = text.replace("\n", "\r\n") if "\r\n" in original else text
    atomic_write(target, text)  # the replaced file's permissions are kept
    return MergeResult(file, action, backup, name)
