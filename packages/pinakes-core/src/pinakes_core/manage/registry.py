"""The fleet registry: ``$XDG_CONFIG_HOME/pinakes/fleet.toml`` names the KBs a fleet spans (DESIGN §10).

The file is the user's: it is edited round-trip (comments, order and layout kept) and replaced
atomically, and it is validated on every read, so a typo is an error naming the file and the
entry instead of a KB silently left out. A KB is identified by its ``[kb] id``, never by its
folder: adding a moved folder again updates the entry's path instead of adding a second one.

Format::

    # KBs searched by `pnk search --fleet` and resolved in cross-KB links.
    [[kb]]
    name = "notes"                      # the name used on the command line and in hits
    id = "01JAXR3T5W6Z8Q9N0P1R2S3T4V"   # the KB's [kb] id
    path = "/home/me/notes"             # its folder (the one holding pinakes.toml)
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from pinakes_core.config import CONFIG_FILE, load_config
from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.manage.folder import find_root
from pinakes_core.read.sidecar import _atomic_write
from pinakes_core.uri import is_ulid

if TYPE_CHECKING:
    from tomlkit.items import AoT
    from tomlkit.toml_document import TOMLDocument

# tomlkit is imported where the registry file is read or written: the MCP server imports this
# module at start for registry_path() and the class, and may never read the file (issue 37).

__all__ = ["ENV_VAR", "FleetEntry", "FleetRegistry", "names_kb", "registry_path"]

#: Environment variable naming the registry file (tests and several setups use it).
ENV_VAR = "PINAKES_FLEET"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEYS = ("name", "id", "path")
_HEADER = (
    "Pinakes fleet registry: the knowledge bases `pnk search --fleet`, `pnk fleet sync` and\n"
    "cross-KB links span. Edit with `pnk fleet add/remove`, or by hand: comments are kept."
)


def registry_path() -> Path:
    """Return the registry file: ``$PINAKES_FLEET``, else ``$XDG_CONFIG_HOME/pinakes/fleet.toml``.

    Without ``XDG_CONFIG_HOME`` the platform's user config folder is used (``~/.config`` on
    Linux).
    """
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or platformdirs.user_config_dir()
    return Path(base).expanduser() / "pinakes" / "fleet.toml"


@dataclass(frozen=True)
class FleetEntry:
    """One registered KB.

    Attributes:
        name: the registry's name for it (unique in the registry; defaults to ``[kb] name``).
        kb_id: its ``[kb] id`` (ULID), the KB's identity.
        path: its root folder (absolute).
    """

    name: str
    kb_id: str
    path: Path

    def state(self) -> str:
        """Where the entry's folder stands now.

        Returns:
            ``"ok"``, ``"missing"`` (no ``pinakes.toml`` at the path: moved or deleted),
            ``"invalid"`` (its ``pinakes.toml`` does not load) or ``"other"`` (the folder now
            holds a KB with another id).
        """
        return self.check()[0]

    def check(self) -> tuple[str, str]:
        """The :meth:`state` and, unless ``"ok"``, the reason in one sentence."""
        if not (self.path / CONFIG_FILE).is_file():
            return "missing", (
                f"KB {self.name!r} is not at {self.path} any more; if it moved, run "
                "`pnk fleet add NEW-PATH`, else `pnk fleet remove " + self.name + "`."
            )
        try:
            config = load_config(self.path)
        except ConfigError as exc:
            return "invalid", exc.message
        if config.kb.id != self.kb_id:
            return "other", (
                f"{self.path} now holds another KB ({config.kb.id}, not {self.kb_id}); run "
                f"`pnk fleet remove {self.name}` and add it again."
            )
        return "ok", ""


def _root_of(path: Path) -> Path:
    """The KB root at or above ``path`` (the folder holding ``pinakes.toml``)."""
    return find_root(path)


class FleetRegistry:
    """The registry file, loaded; change it with :meth:`add`/:meth:`remove`, then :meth:`save`.

    Raises:
        ConfigError: (from :meth:`load`) if the file is not TOML or an entry is invalid.
    """

    def __init__(self, path: Path, document: TOMLDocument, entries: list[FleetEntry]) -> None:
        self.path = path
        self._document = document
        self._entries = entries

    # -- reading --------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path | None = None) -> FleetRegistry:
        """Read the registry (``path`` or :func:`registry_path`); a missing file is an empty fleet.

        Raises:
            ConfigError: naming the file and the entry if anything in it is invalid.
        """
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        path = path or registry_path()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            document = tomlkit.document()
            for line in _HEADER.splitlines():
                document.add(tomlkit.comment(line))
            document.add(tomlkit.nl())
            return cls(path, document, [])
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"The fleet registry {path} cannot be read ({exc}).") from None
        try:
            document = tomlkit.parse(text)
        except TOMLKitError as exc:
            raise ConfigError(f"The fleet registry {path} is not valid TOML: {exc}.") from None
        return cls(path, document, cls._validate(path, document.unwrap()))

    @staticmethod
    def _validate(path: Path, data: dict[str, Any]) -> list[FleetEntry]:
        extra = sorted(set(data) - {"kb"})
        if extra:
            raise ConfigError(
                f"{path}: unknown key {extra[0]!r}; the registry holds only [[kb]] entries.",
                "Remove the key.",
            )
        raw = data.get("kb", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{path}: 'kb' must be an array of [[kb]] tables.")
        entries: list[FleetEntry] = []
        names: dict[str, int] = {}
        ids: dict[str, int] = {}
        for number, item in enumerate(raw, 1):
            where = f"{path}: [[kb]] entry {number}"
            if not isinstance(item, dict):
                raise ConfigError(f"{where} is not a table.")
            unknown = sorted(set(item) - set(_KEYS))
            if unknown:
                raise ConfigError(
                    f"{where}: unknown key {unknown[0]!r}; allowed keys are name, id, path.",
                    "Fix the spelling or remove the key.",
                )
            missing = [k for k in _KEYS if k not in item]
            if missing:
                raise ConfigError(f"{where}: required key {missing[0]!r} is missing.")
            name, kb_id, folder = item["name"], item["id"], item["path"]
            if not isinstance(name, str) or not _NAME.match(name):
                raise ConfigError(
                    f"{where}: name {name!r} is not a valid KB name.",
                    "Use letters, digits, '.', '_' or '-'.",
                )
            if not isinstance(kb_id, str) or not is_ulid(kb_id):
                raise ConfigError(
                    f"{where}: id {kb_id!r} is not a 26-character ULID.",
                    "Copy it from the KB's pinakes.toml, or re-add the KB with `pnk fleet add`.",
                )
            if not isinstance(folder, str) or not folder.strip():
                raise ConfigError(f"{where}: path {folder!r} is not a folder path.")
            for table, key, what in ((names, name, "name"), (ids, kb_id, "id")):
                if key in table:
                    raise ConfigError(
                        f"{where} repeats the {what} {key!r} of entry {table[key]}.",
                        "Each KB appears once; remove one of the two entries.",
                    )
                table[key] = number
            entries.append(FleetEntry(name, kb_id, Path(folder).expanduser()))
        return entries

    def __iter__(self) -> Iterator[FleetEntry]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[FleetEntry]:
        """The registered KBs, in file order."""
        return list(self._entries)

    def find(self, ref: str) -> FleetEntry | None:
        """Return the entry ``ref`` names: a registry name, a KB id, a ``[kb] name`` or a folder.

        Registry names win over ids, ids over the KBs' own ``[kb] name`` (read from their
        ``pinakes.toml``, and used only when exactly one KB has it), and those over paths.
        """
        ref = ref.strip()
        for entry in self._entries:
            if entry.name == ref:
                return entry
        for entry in self._entries:
            if entry.kb_id == ref.upper():
                return entry
        own = [e for e in self._entries if _kb_name(e) == ref]
        if len(own) == 1:
            return own[0]
        candidate = Path(ref).expanduser()
        if candidate.is_dir():
            resolved = candidate.resolve()
            for entry in self._entries:
                if entry.path.resolve() == resolved:
                    return entry
        return None

    def get(self, ref: str) -> FleetEntry:
        """Return the entry ``ref`` names (see :meth:`find`).

        Raises:
            ConfigError: if no entry matches.
        """
        entry = self.find(ref)
        if entry is None:
            known = ", ".join(e.name for e in self._entries) or "none yet"
            raise ConfigError(
                f"No KB called {ref!r} in the fleet registry {self.path}.",
                f"Registered: {known}. Add one with `pnk fleet add PATH`.",
            )
        return entry

    # -- changing -------------------------------------------------------------------------

    def add(
        self, folder: str | os.PathLike[str], name: str | None = None
    ) -> tuple[FleetEntry, str]:
        """Register the KB at ``folder`` (or the nearest folder above it holding ``pinakes.toml``).

        A KB already registered under its id keeps its entry: a new path is recorded ("moved"),
        a given ``name`` renames it ("renamed"); otherwise nothing changes ("unchanged").

        Returns:
            The entry and what happened: ``"added"``, ``"moved"``, ``"renamed"`` or ``"unchanged"``.

        Raises:
            ConfigError: if ``folder`` is not inside a KB, the name is invalid or taken by
                another KB, or the folder is registered under another id.
        """
        root = _root_of(Path(folder))
        config = load_config(root)
        kb_id = config.kb.id
        existing = next((e for e in self._entries if e.kb_id == kb_id), None)
        wanted = name or (existing.name if existing else config.kb.name)
        if not _NAME.match(wanted):
            raise ConfigError(
                f"{wanted!r} is not a valid KB name.", "Use letters, digits, '.', '_' or '-'."
            )
        holder = next((e for e in self._entries if e.name == wanted and e.kb_id != kb_id), None)
        if holder is not None:
            raise ConfigError(
                f"The name {wanted!r} is taken by the KB at {holder.path}.",
                "Pass --name to register this one under another name.",
            )
        for entry in self._entries:
            if entry.kb_id != kb_id and entry.path.resolve() == root:
                # The folder used to hold another KB (pinakes.toml re-created): say so.
                raise ConfigError(
                    f"{root} is registered as {entry.name!r} with id {entry.kb_id}, but its "
                    f"pinakes.toml now says {kb_id}.",
                    f"Run `pnk fleet remove {entry.name}` first.",
                )
        fresh = FleetEntry(wanted, kb_id, root)
        if existing is None:
            import tomlkit

            self._entries.append(fresh)
            table = tomlkit.table()
            table["name"], table["id"], table["path"] = wanted, kb_id, str(root)
            table.add(tomlkit.nl())
            self._aot().append(table)
            return fresh, "added"
        index = self._entries.index(existing)
        self._entries[index] = fresh
        table = self._aot()[index]
        if existing.path.resolve() != root:
            table["path"] = str(root)
            action = "moved"
        elif existing.name != wanted:
            action = "renamed"
        else:
            action = "unchanged"
        table["name"] = wanted
        return fresh, action

    def remove(self, ref: str) -> FleetEntry:
        """Drop the entry ``ref`` names (see :meth:`find`); the KB's folder is not touched.

        Raises:
            ConfigError: if no entry matches.
        """
        entry = self.get(ref)
        index = self._entries.index(entry)
        del self._entries[index]
        del self._aot()[index]
        return entry

    def save(self) -> None:
        """Write the registry back atomically, keeping the user's comments and layout."""
        import tomlkit

        # Through a symlink (a registry kept in a dotfiles repository stays a link).
        target = self.path.resolve() if self.path.is_symlink() else self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(target, tomlkit.dumps(self._document))

    def _aot(self) -> AoT:
        import tomlkit
        from tomlkit.items import AoT

        current = self._document.get("kb")
        if not isinstance(current, AoT):
            current = tomlkit.aot()
            self._document["kb"] = current
        return current


def _kb_name(entry: FleetEntry) -> str | None:
    try:
        return load_config(entry.path).kb.name
    except ConfigError:
        return None


def names_kb(ref: str, kb_id: str, kb_name: str) -> bool:
    """Whether ``ref`` (a URI's KB part) names the KB ``kb_id``: its id, ``[kb] name`` or fleet name.

    An unreadable fleet registry names nothing.
    """
    if ref.upper() == kb_id or ref == kb_name:
        return True
    try:
        entry = FleetRegistry.load().find(ref)
    except PinakesError:
        return False
    return entry is not None and entry.kb_id == kb_id
