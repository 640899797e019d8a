"""``pnk upgrade``: bring a KB up to a newer version of its template, never over the user's edits.

A 3-way comparison per starter file and per config key. The base is what the template stamped
last time (``pinakes-template.lock``); "theirs" is the template now; "yours" is the KB.

* A starter file you never touched (its hash is the base's) is updated; one you changed is
  kept and reported as a conflict; one you deleted stays deleted; a file new in the template is
  added unless a file of yours is in the way (kept, reported).
* A config or schema key the template changed is updated when yours still holds the base
  value (or already holds the new one), and reported as a conflict when you changed it.

The plan is computed without writing (:func:`plan_upgrade`) and shown as diffs;
:func:`apply_upgrade` recomputes it and writes ``pinakes.toml`` (round-trip, comments kept),
the files, and finally the lock. A rerun finds nothing to do. A KB with no template record
can adopt one with an explicit template: every difference then counts as yours.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from tomlkit.toml_document import TOMLDocument

from pinakes_core.config import CONFIG_FILE, load_config
from pinakes_core.errors import ConfigError, TemplateError
from pinakes_core.manage._toml import (
    MISSING,
    Key,
    edit_config,
    flatten,
    get_path,
    parse,
    set_path,
    unified_diff,
)
from pinakes_core.manage.templates import (
    Template,
    content_hash,
    load_template,
    make_folders,
    read_lock,
    source_record,
    stamp_files,
    version_key,
    write_lock,
)
from pinakes_core.read.sidecar import _atomic_write

if TYPE_CHECKING:
    from pinakes_core.kb import KB

__all__ = ["ConfigChange", "FileChange", "UpgradePlan", "apply_upgrade", "plan_upgrade"]

FileAction = Literal["add", "update", "conflict", "kept-deleted", "dropped"]
ConfigAction = Literal["set", "remove", "conflict", "same"]


class FileChange(BaseModel):
    """One starter file in the upgrade.

    Attributes:
        path: KB-relative path.
        action: ``add`` (new in the template), ``update`` (you never changed it), ``conflict``
            (you changed it, or a file of yours is in the way: kept), ``kept-deleted`` (you
            deleted it: not re-added), ``dropped`` (the template no longer has it: yours kept).
        diff: for ``add``/``update``, the change written; for ``conflict``, your file against
            the template's new version (nothing is written).
    """

    path: str
    action: FileAction
    diff: str = ""


class ConfigChange(BaseModel):
    """One ``pinakes.toml`` key the template changed.

    Attributes:
        key: the dotted key, e.g. ``schema.relation_types.cites.inverse``.
        action: ``set``/``remove`` (applied), ``conflict`` (you changed it: yours kept),
            ``same`` (yours already matches the new template).
        base: the value the template stamped before (``None`` if absent).
        template: the template's value now (``None`` if removed).
        yours: the value in your ``pinakes.toml`` (``None`` if absent).
    """

    key: str
    action: ConfigAction
    base: Any = None
    template: Any = None
    yours: Any = None


class UpgradePlan(BaseModel):
    """What ``pnk upgrade`` would do (or did).

    Attributes:
        template: the template's name.
        from_version: the KB's recorded template version (``None`` when adopting one).
        from_template: the template the KB recorded before, when it adopts another one
            (``None`` when it had none, or upgrades the one it has).
        to_version: the template's version.
        up_to_date: ``True`` when the KB is at the template's version: nothing to do.
        config_diff: unified diff of ``pinakes.toml`` (config, schema, ``[kb]`` record).
        config: every config key the template changed, with the decision.
        files: every starter file the upgrade touches or reports (unchanged ones are left out).
        folders: folders the template has that the KB lacks (created).
        conflicts: one line per conflict (file or key), for the report.
        applied: whether the plan was written.
    """

    template: str
    from_version: str | None
    to_version: str
    from_template: str | None = None
    up_to_date: bool = False
    config_diff: str = ""
    config: list[ConfigChange] = []
    files: list[FileChange] = []
    folders: list[str] = []
    conflicts: list[str] = Field(default_factory=list)
    applied: bool = False

    @property
    def changes(self) -> bool:
        """Whether applying the plan would write anything."""
        return bool(
            self.config_diff
            or self.folders
            or any(f.action in ("add", "update") for f in self.files)
            or not self.up_to_date
        )


def _plain(value: Any) -> Any:
    return None if value is MISSING else value


def _header(fragment: str) -> str:
    """The comment lines a template's fragment starts with (what it says about itself)."""
    lines = []
    for line in fragment.lstrip("\n").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines)


def _switched_header(text: str, old: str | None, new: Template) -> str:
    """``text`` with the header comment of the template ``old`` replaced by ``new``'s.

    Switching templates rewrote ``template =`` but left "# From the `general` template: …"
    above the new template's settings (issue 35). Only a header found word for word is
    replaced: one you edited, or of a template that cannot be loaded, stays as it is.
    """
    if old is None or old == new.name:
        return text
    try:
        before = _header(load_template(old).fragment)
    except TemplateError:
        return text
    after = _header(new.fragment)
    if not before or not after or text.count(before) != 1:
        return text
    return text.replace(before, after)


def _find_template(kb: KB, spec: str | os.PathLike[str] | None) -> Template:
    if spec is not None:
        return load_template(spec)
    record = kb.config.kb
    if record.template is None:
        raise TemplateError(
            f"KB {record.name!r} was not made from a template.",
            "Give one to adopt it: pnk upgrade --template general (your files and settings are "
            "kept; differences are reported).",
        )
    if record.template_source:
        source = Path(record.template_source).expanduser()
        folder = source if source.is_absolute() else kb.root / source
        try:
            return load_template(folder)
        except TemplateError as exc:
            raise TemplateError(
                f"The template {record.template!r} was stamped from {record.template_source}, "
                f"which cannot be read now: {exc.message}",
                "Point at its current folder: pnk upgrade --template PATH.",
            ) from None
    return load_template(record.template)


def _config_changes(
    doc: TOMLDocument, base: dict[str, Any], new: dict[str, Any]
) -> tuple[list[ConfigChange], list[tuple[Key, Any]]]:
    """Decide each key the template changed; returns the decisions and the writes to make."""
    old_leaves = dict(flatten(base)) if base else {}
    new_leaves = dict(flatten(new)) if new else {}
    changes, writes = [], []
    for path in sorted(set(old_leaves) | set(new_leaves)):
        if not path:
            continue
        old, fresh = old_leaves.get(path, MISSING), new_leaves.get(path, MISSING)
        if old == fresh:
            continue
        yours = get_path(doc, path)
        if yours == fresh:
            action: ConfigAction = "same"
        elif yours == old:
            action = "remove" if fresh is MISSING else "set"
            writes.append((path, fresh))
        else:
            action = "conflict"
        changes.append(
            ConfigChange(
                key=".".join(path),
                action=action,
                base=_plain(old),
                template=_plain(fresh),
                yours=_plain(yours),
            )
        )
    return changes, writes


def _file_changes(root: Path, template: Template, recorded: dict[str, str]) -> list[FileChange]:
    out: list[FileChange] = []
    for rel, text in sorted(template.files.items()):
        base, fresh = recorded.get(rel), content_hash(text)
        target = root / rel
        try:
            yours_text: str | None = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            yours_text = None
        except (OSError, UnicodeDecodeError):
            yours_text = "\0"  # unreadable: certainly not the template's
        yours = content_hash(yours_text) if yours_text is not None else None
        if yours == fresh or base == fresh:
            continue  # already the template's text, or the template did not change it
        if yours is None:
            action: FileAction = "kept-deleted" if base is not None else "add"
        elif yours == base:
            action = "update"
        else:
            action = "conflict"
        diff = "" if action == "kept-deleted" else unified_diff(rel, yours_text or "", text)
        out.append(FileChange(path=rel, action=action, diff=diff))
    for rel in sorted(set(recorded) - set(template.files)):
        if (root / rel).exists():
            out.append(FileChange(path=rel, action="dropped"))
    return out


def _plan(
    kb: KB, spec: str | os.PathLike[str] | None
) -> tuple[UpgradePlan, Template, list[tuple[Key, Any]]]:
    template = _find_template(kb, spec)
    record = kb.config.kb
    adopting = record.template is None or (spec is not None and record.template != template.name)
    current = None if adopting else record.template_version
    if current is not None and version_key(template.version) < version_key(current):
        raise TemplateError(
            f"Template {template.name!r} is at version {template.version}, older than this "
            f"KB's {current}.",
            "Point --template at the newer template folder.",
        )
    lock = read_lock(kb.root)
    if lock is not None and lock.template != template.name:
        lock = None  # adopting another template: nothing it stamped is known
    previous = (
        f"{record.template} {record.template_version or ''}".strip()
        if adopting and record.template is not None
        else None
    )
    plan = UpgradePlan(
        template=template.name,
        from_version=current,
        to_version=template.version,
        from_template=previous,
    )
    if current == template.version and lock is not None and lock.version == current:
        return plan.model_copy(update={"up_to_date": True}), template, []
    doc = parse((kb.root / CONFIG_FILE).read_text(encoding="utf-8"), CONFIG_FILE)
    changes, writes = _config_changes(doc, lock.config if lock else {}, template.config)
    source = source_record(kb.root, template)
    record_writes: list[tuple[Key, Any]] = [
        (("kb", "template"), template.name),
        (("kb", "template_version"), template.version),
        (("kb", "template_source"), source if source else MISSING),
    ]

    def change(target: TOMLDocument) -> None:
        for path, value in [*writes, *record_writes]:
            set_path(target, path, value)

    try:
        before, after = edit_config(kb.root, change, write=False)
        after = _switched_header(after, record.template if adopting else None, template)
    except ConfigError as exc:
        raise TemplateError(
            f"Upgrading to {template.name} {template.version} would make {CONFIG_FILE} "
            f"invalid: {exc.message}",
            "Edit the conflicting keys by hand first, then run pnk upgrade again.",
        ) from None
    files = _file_changes(kb.root, template, lock.files if lock else {})
    conflicts = [
        f"{CONFIG_FILE}: {c.key} is {c.yours!r} in yours; the template "
        + (
            f"sets it to {c.template!r}"  # it had not stamped it ("from None" read as a value)
            if c.base is None
            else f"changed it from {c.base!r} to {c.template!r}"
        )
        + " (yours kept)"
        for c in changes
        if c.action == "conflict"
    ]
    conflicts += [
        f"{f.path}: you changed it and the template did too (yours kept)"
        if (lock and f.path in lock.files)
        else f"{f.path}: a file of yours is where the template puts a new one (yours kept)"
        for f in files
        if f.action == "conflict"
    ]
    plan = plan.model_copy(
        update={
            "config_diff": unified_diff(CONFIG_FILE, before, after),
            "config": changes,
            "files": files,
            "folders": [f for f in template.folders if not (kb.root / f).is_dir()],
            "conflicts": conflicts,
        }
    )
    return plan, template, writes


def plan_upgrade(kb: KB, template: str | os.PathLike[str] | None = None) -> UpgradePlan:
    """Compute the upgrade to the template's current version; nothing is written.

    Args:
        kb: the KB.
        template: a template name or folder; default the one ``[kb]`` records (its
            ``template_source`` folder for a local template).

    Raises:
        TemplateError: if the KB has no template and none is given, the template cannot be
            found, is older than the KB's, or its changes would make ``pinakes.toml`` invalid.
    """
    return _plan(kb, template)[0]


def apply_upgrade(kb: KB, template: str | os.PathLike[str] | None = None) -> UpgradePlan:
    """Recompute the plan and write it: config, folders, added and updated files, then the lock.

    Conflicting files and keys are left as they are. The lock is written last, so an
    interrupted upgrade is finished by running it again; a complete one makes the next run a
    no-op. ``kb.config`` is reloaded.
    """
    plan, loaded, writes = _plan(kb, template)
    if plan.up_to_date:
        return plan
    source = source_record(kb.root, loaded)

    def change(target: TOMLDocument) -> None:
        for path, value in writes:
            set_path(target, path, value)
        set_path(target, ("kb", "template"), loaded.name)
        set_path(target, ("kb", "template_version"), loaded.version)
        set_path(target, ("kb", "template_source"), source if source else MISSING)

    previous = kb.config.kb.template
    edit_config(kb.root, change, write=True)
    path = kb.root / CONFIG_FILE
    text = path.read_text(encoding="utf-8")
    switched = _switched_header(text, previous, loaded)
    if switched != text:  # comments only: the settings are the ones just validated
        _atomic_write(path, switched)
    make_folders(kb.root, loaded)
    stamp_files(kb.root, loaded, only={f.path for f in plan.files if f.action == "add"})
    for item in plan.files:
        if item.action == "update":
            _atomic_write(kb.root / item.path, loaded.files[item.path])
    write_lock(kb.root, loaded)
    kb.config = load_config(kb.root)
    return plan.model_copy(update={"applied": True})
