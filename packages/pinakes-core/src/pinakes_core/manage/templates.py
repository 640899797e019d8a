"""KB templates: a starting layout, starter documents, config and seed schema (DESIGN §9).

A template is a folder::

    template.toml     name, version, description, folders = [...]
    pinakes.toml      a config fragment (any sections but [kb]; usually [schema])
    files/            starter documents, copied into the KB as they are

Three ship inside pinakes-core (``general``, ``research-papers``, ``engineering-docs``); any
local folder of that shape works too. ``pnk init --template`` stamps one: the fragment goes into
``pinakes.toml`` (comments and all), ``[kb]`` records the template's name and version, the
folders and starter documents are created (a file already there is kept, never overwritten),
and ``pinakes-template.lock`` records what was stamped — the fragment's values and a hash of
each starter file — so that ``pnk upgrade`` can later tell the user's edits from the
template's (see :mod:`pinakes_core.manage.upgrade`). The lock is committed with the KB: another machine
upgrades from the same base.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tomllib
from dataclasses import dataclass, field
from importlib.resources import files as package_files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any

import tomlkit
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pinakes_core.config import CONFIG_FILE, SidecarPolicy, load_config, validate_config
from pinakes_core.errors import ConfigError, TemplateError
from pinakes_core.manage._toml import set_path
from pinakes_core.read.sidecar import _atomic_write
from pinakes_core.uri import new_ulid

__all__ = [
    "LOCK_FILE",
    "StampReport",
    "Template",
    "TemplateInfo",
    "TemplateLock",
    "content_hash",
    "init_from_template",
    "list_templates",
    "load_template",
    "read_lock",
    "version_key",
    "write_lock",
]

MANIFEST = "template.toml"
FRAGMENT = "pinakes.toml"
FILES_DIR = "files"
LOCK_FILE = "pinakes-template.lock"
SHIPPED = ("general", "research-papers", "engineering-docs")
# A local template is untrusted input: bounded in files and bytes.
_MAX_FILES = 500
_MAX_BYTES = 5 * 1024 * 1024
_LOCK_HEADER = (
    "# Written by `pnk init --template` and `pnk upgrade`: what the template stamped into this\n"
    "# KB, so that `pnk upgrade` can tell your edits from the template's. Commit it; do not edit.\n"
)


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")]
    version: Annotated[str, Field(pattern=r"^\d+(\.\d+)*$")]
    description: str = ""
    folders: list[str] = []


@dataclass(frozen=True)
class Template:
    """A loaded template.

    Attributes:
        name: its name (from ``template.toml``).
        version: its version, dotted integers (``1.2``).
        description: one line saying what it is for.
        folders: folders it creates (KB-relative, POSIX).
        fragment: the text of its ``pinakes.toml`` fragment (``""`` when it has none).
        files: starter documents, KB-relative POSIX path → text.
        source: the local folder it came from, or ``None`` for a shipped template.
    """

    name: str
    version: str
    description: str
    folders: tuple[str, ...]
    fragment: str
    files: dict[str, str] = field(default_factory=dict)
    source: Path | None = None

    @property
    def config(self) -> dict[str, Any]:
        """The fragment's values (plain Python)."""
        return tomllib.loads(self.fragment) if self.fragment else {}


class TemplateInfo(BaseModel):
    """A template as ``pnk templates`` lists it."""

    name: str
    version: str
    description: str
    source: str = Field(description="'shipped' or the template's folder")
    entity_types: int
    relation_types: int
    attribute_types: int
    folders: list[str]
    files: list[str]


class StampReport(BaseModel):
    """What ``pnk init --template`` did.

    Attributes:
        root: the KB root.
        name: the KB name.
        kb_id: the KB's ULID.
        template: the template's name.
        version: the template's version.
        written: starter files written.
        kept: starter files not written because a file was already there.
        folders: folders created.
    """

    root: str
    name: str
    kb_id: str
    template: str
    version: str
    written: list[str]
    kept: list[str]
    folders: list[str]


class TemplateLock(BaseModel):
    """``pinakes-template.lock``: the base of the next upgrade's 3-way comparison."""

    model_config = ConfigDict(extra="forbid")

    template: str
    version: str
    files: dict[str, str] = {}
    config: dict[str, Any] = {}


def version_key(version: str) -> tuple[int, ...]:
    """Sort key of a dotted version (``"1.10"`` > ``"1.9"``)."""
    return tuple(int(part) for part in version.split("."))


def content_hash(text: str) -> str:
    """SHA-256 of a text file's content, line endings normalised (a checkout may convert them)."""
    normal = text.replace("\r\n", "\n").encode("utf-8")
    return "sha256:" + hashlib.sha256(normal).hexdigest()


def _safe_rel(rel: str, where: str) -> str:
    norm = posixpath.normpath(rel.replace("\\", "/"))
    if rel.startswith(("/", "\\")) or norm == ".." or norm.startswith("../") or ":" in rel:
        raise TemplateError(f"{where}: {rel!r} leads outside the KB.", "Use a relative path.")
    return norm


def _read_files(base: Traversable, where: str) -> dict[str, str]:
    found: dict[str, str] = {}
    total = 0
    stack: list[tuple[Traversable, str]] = [(base, "")]
    while stack:
        folder, prefix = stack.pop()
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            rel = f"{prefix}{entry.name}"
            if entry.name == "__pycache__" or entry.name.endswith((".pyc", ".pyo")):
                continue
            if isinstance(entry, Path) and entry.is_symlink():
                raise TemplateError(
                    f"{where}/{rel} is a symlink; a template holds plain files only.",
                    "Replace it with a copy of the file.",
                )
            if entry.is_dir():
                stack.append((entry, rel + "/"))
                continue
            raw = entry.read_bytes()
            total += len(raw)
            if len(found) >= _MAX_FILES or total > _MAX_BYTES:
                raise TemplateError(
                    f"{where} holds more than {_MAX_FILES} files or {_MAX_BYTES >> 20} MB.",
                    "A template's starter files should be a handful of short documents.",
                )
            try:
                found[rel] = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise TemplateError(
                    f"{where}/{rel} is not UTF-8 text; starter files are text documents."
                ) from None
    return found


def _load(folder: Traversable, where: str, source: Path | None) -> Template:
    manifest_file = folder / MANIFEST
    if not manifest_file.is_file():
        raise TemplateError(f"{where} has no {MANIFEST}.", "A template needs name and version.")
    try:
        raw = tomllib.loads(manifest_file.read_text(encoding="utf-8"))
        manifest = _Manifest.model_validate(raw)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TemplateError(f"{where}/{MANIFEST} is not valid TOML: {exc}.") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise TemplateError(
            f"{where}/{MANIFEST}: key {key!r} is invalid: {first['msg']}.",
            "It needs name (lower-case), version (dotted numbers such as 1.0), and may have "
            "description and folders.",
        ) from None
    fragment_file = folder / FRAGMENT
    fragment = fragment_file.read_text(encoding="utf-8") if fragment_file.is_file() else ""
    try:
        values = tomllib.loads(fragment)
    except tomllib.TOMLDecodeError as exc:
        raise TemplateError(f"{where}/{FRAGMENT} is not valid TOML: {exc}.") from None
    if "kb" in values:
        raise TemplateError(
            f"{where}/{FRAGMENT} has a [kb] section; `pnk init` writes that one.",
            "Remove [kb] from the template's fragment.",
        )
    try:
        validate_config({"kb": {"name": "template-check", "id": new_ulid()}, **values}, Path(where))
    except ConfigError as exc:
        raise TemplateError(
            f"{where}/{FRAGMENT} is not a valid pinakes.toml fragment: {exc.message}"
        ) from None
    files_dir = folder / FILES_DIR
    starter = _read_files(files_dir, f"{where}/{FILES_DIR}") if files_dir.is_dir() else {}
    starter = {_safe_rel(rel, where): text for rel, text in starter.items()}
    folders = tuple(_safe_rel(f, f"{where}/{MANIFEST}") for f in manifest.folders)
    return Template(
        name=manifest.name,
        version=manifest.version,
        description=manifest.description,
        folders=folders,
        fragment=fragment,
        files=starter,
        source=source,
    )


def _shipped(name: str) -> Traversable:
    return package_files("pinakes_core") / "data" / "templates" / name


def load_template(spec: str | os.PathLike[str]) -> Template:
    """Load a template by shipped name or from a local folder.

    A folder holding ``template.toml`` wins over a shipped template of the same name.

    Raises:
        TemplateError: if no such template exists or it is malformed; the message names the
            file and the fix.
    """
    path = Path(spec).expanduser()
    if (path / MANIFEST).is_file():
        folder = path.resolve()
        return _load(folder, str(folder), folder)
    name = str(spec)
    if name in SHIPPED:
        return _load(_shipped(name), f"shipped template {name!r}", None)
    if path.exists() or os.sep in name or "/" in name:
        raise TemplateError(
            f"{path} is not a template folder (it has no {MANIFEST}).",
            "Point --template at a folder with template.toml, pinakes.toml and files/.",
        )
    raise TemplateError(
        f"No template named {name!r}.",
        f"Shipped templates: {', '.join(SHIPPED)}; or give the path of a template folder.",
    )


def describe(template: Template) -> TemplateInfo:
    """Summarise a template for listing."""
    schema = template.config.get("schema", {})
    return TemplateInfo(
        name=template.name,
        version=template.version,
        description=template.description,
        source=str(template.source) if template.source else "shipped",
        entity_types=len(schema.get("entity_types", {})),
        relation_types=len(schema.get("relation_types", {})),
        attribute_types=len(schema.get("attribute_types", {})),
        folders=list(template.folders),
        files=sorted(template.files),
    )


def list_templates() -> list[TemplateInfo]:
    """The templates that ship with Pinakes."""
    return [describe(load_template(name)) for name in SHIPPED]


# -- the lock ---------------------------------------------------------------------------------


def read_lock(root: Path) -> TemplateLock | None:
    """Read ``pinakes-template.lock``; ``None`` when the KB has none.

    Raises:
        TemplateError: if it exists but is not a valid lock.
    """
    path = root / LOCK_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return TemplateLock.model_validate(tomllib.loads(text))
    except (tomllib.TOMLDecodeError, ValidationError) as exc:
        raise TemplateError(
            f"{path} is damaged ({str(exc).splitlines()[0]}).",
            "Restore it from git, or delete it: the next upgrade then treats every difference "
            "as yours and reports it.",
        ) from None


def write_lock(root: Path, template: Template) -> None:
    """Record what ``template`` stamps: its fragment's values and each starter file's hash."""
    doc = tomlkit.document()
    for line in _LOCK_HEADER.splitlines():
        doc.add(tomlkit.comment(line.removeprefix("# ")))
    doc["template"] = template.name
    doc["version"] = template.version
    doc["files"] = {rel: content_hash(text) for rel, text in sorted(template.files.items())}
    if template.config:
        doc["config"] = template.config
    _atomic_write(root / LOCK_FILE, tomlkit.dumps(doc))


def source_record(root: Path, template: Template) -> str | None:
    """How ``[kb] template_source`` names a local template: relative to the KB root."""
    if template.source is None:
        return None
    try:
        return Path(os.path.relpath(template.source, root)).as_posix()
    except ValueError:  # another drive (Windows): only an absolute path reaches it
        return str(template.source)


# -- stamping ---------------------------------------------------------------------------------


def _stamped_config(root: Path, template: Template) -> None:
    """Put the fragment into the fresh ``pinakes.toml`` after ``[kb]``, comments and all.

    Sections of the plain config that the fragment also has are replaced by the fragment's.
    """
    path = root / CONFIG_FILE
    base = tomlkit.parse(path.read_text(encoding="utf-8"))
    own = set(template.config)
    head, tail = tomlkit.document(), tomlkit.document()
    for key, item in base.body:
        if key is None:
            if "kb" not in head:
                head.add(item)  # the header comment
        elif key.key == "kb":
            head.append(key, item)
        elif key.key not in own:
            tail.append(key, item)
    set_path(head, ("kb", "template"), template.name)
    set_path(head, ("kb", "template_version"), template.version)
    source = source_record(root, template)
    if source:
        set_path(head, ("kb", "template_source"), source)
    parts = [tomlkit.dumps(head).strip("\n"), template.fragment.strip("\n")]
    rest = tomlkit.dumps(tail).strip("\n")
    text = "\n\n".join([*parts, *([rest] if rest else [])]) + "\n"
    validate_config(tomllib.loads(text), path)
    _atomic_write(path, text)


def stamp_files(root: Path, template: Template, only: set[str] | None = None) -> list[str]:
    """Write starter files that do not exist yet (``only``: just these); return those written.

    An existing file is never touched: creation is exclusive, so a file that appears meanwhile
    is kept too.
    """
    written = []
    for rel, text in sorted(template.files.items()):
        if only is not None and rel not in only:
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with target.open("x", encoding="utf-8", newline="") as handle:
                handle.write(text)
        except FileExistsError:
            continue
        written.append(rel)
    return written


def make_folders(root: Path, template: Template) -> list[str]:
    """Create the template's folders that are missing; return those created."""
    made = []
    for rel in template.folders:
        folder = root / rel
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            made.append(rel)
    return made


def init_from_template(
    path: str | os.PathLike[str],
    template: str | os.PathLike[str],
    name: str | None = None,
    *,
    sidecars: SidecarPolicy | None = None,
) -> StampReport:
    """Make ``path`` a KB stamped from ``template`` (``pnk init --template``).

    The template is loaded and checked before anything is written. Then ``KB.init`` writes
    ``pinakes.toml`` and ``.gitignore``, the fragment and the ``[kb]`` template record go into
    ``pinakes.toml``, folders and starter files are created (existing files kept), and
    ``pinakes-template.lock`` is written.

    Raises:
        TemplateError: if the template is unknown or malformed.
        ConfigError: if ``path`` is a KB already or the name is invalid.

    ``sidecars`` is passed to ``KB.init`` unless the template's fragment sets ``[sidecars]``
    itself (the template's word wins).
    """
    from pinakes_core.kb import KB

    loaded = load_template(template)
    if re.search(r"(?m)^\s*\[\s*sidecars\s*\]", loaded.fragment):
        sidecars = None
    kb = KB.init(path, name=name, sidecars=sidecars)
    root = kb.root
    _stamped_config(root, loaded)
    folders = make_folders(root, loaded)
    written = stamp_files(root, loaded)
    write_lock(root, loaded)
    config = load_config(root)
    return StampReport(
        root=str(root),
        name=config.kb.name,
        kb_id=config.kb.id,
        template=loaded.name,
        version=loaded.version,
        written=written,
        kept=sorted(set(loaded.files) - set(written)),
        folders=folders,
    )
