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
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinakes_core import PinakesError

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


def server_entry(host: str, kbs: list[Path], extra: list[str]) -> dict[str, Any]:
    """Return the server entry for ``host``: absolute command, absolute ``--kb`` paths."""
    args: list[str] = []
    for kb in kbs:
        args += ["--kb", str(kb.expanduser().resolve())]
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
            base = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
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


def _backup_path(file: Path) -> Path:
    candidate = file.with_name(file.name + ".bak")
    number = 1
    while candidate.exists():
        number += 1
        candidate = file.with_name(f"{file.name}.bak{number}")
    return candidate


def merge(host: str, file: Path, name: str, entry: dict[str, Any]) -> MergeResult:
    """Add or replace the ``name`` entry in ``file`` for ``host``; keep everything else.

    Raises:
        HostConfigError: if the file is not a JSON object (e.g. JSON with comments), or its
            servers key is not an object; the file is then left as it was.
    """
    key = HOSTS[host]
    file = file.expanduser()
    data: dict[str, Any] = {}
    original: str | None = None
    if file.exists():
        original = file.read_text(encoding="utf-8")
        try:
            data = json.loads(original) if original.strip() else {}
        except json.JSONDecodeError as exc:
            raise HostConfigError(
                f"{file} is not plain JSON (line {exc.lineno}: {exc.msg}); it was not changed.",
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
    file.parent.mkdir(parents=True, exist_ok=True)
    if original is not None:
        backup = _backup_path(file)
        shutil.copy2(file, backup)
    fd, tmp = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return MergeResult(file, action, backup, name)
