"""The plugin manager: everything in the ``pinakes`` entry-point group, loaded once.

This module sits low (issue 37, STYLE "Layering"): it imports only :mod:`pinakes_core.hookspecs`
and :mod:`pinakes_core.errors`, so any room, and ``pnk --help`` (which collects the
``register_commands`` hook through it), can use it without loading the engine. The search room
registers core's own channels on the same manager when it first builds its channel registry
(:func:`pinakes_core.search.registry.channel_registry`), so core's channels still go through the
plugin path.

The entry points are read straight from each ``*.dist-info``/``*.egg-info`` folder's
``entry_points.txt`` on ``sys.path``, the way :func:`importlib.metadata.entry_points` finds
them (same folders, same order, the first distribution of a name wins), without importing
:mod:`importlib.metadata`: that import (email, zipfile, csv, …) and its scan cost a ``pnk``
start more than a third of what ``import click`` does, on every run (issue 37). Where the
reader cannot see what importlib.metadata would (a zip or ``.egg`` on ``sys.path``, another
finder that lists distributions), it asks importlib.metadata instead.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pluggy

import pinakes_core.hookspecs as hookspecs
from pinakes_core.errors import PluginMissingError

if TYPE_CHECKING:
    import logging
    from pathlib import Path

__all__ = [
    "EntryPoint",
    "PluginSettings",
    "after_sync",
    "doctor_checks",
    "entry_points",
    "plugin_manager",
    "require_plugins",
]

# The sync's callback types, spelt out rather than imported from the index room above this
# module: :data:`pinakes_core.index.sync.ProgressFn` and
# :data:`pinakes_core.index.refresh.AfterSync` (whose first argument is the open ``Store``).
_Progress = Callable[[str, int, int], None]
_AfterSync = Callable[[Any, list[str], list[str], list[str]], None]


def _log() -> logging.Logger:
    import logging  # only when a plugin fails to load: pnk --help need not load it

    return logging.getLogger(__name__)


class EntryPoint(NamedTuple):
    """One entry point: ``name = value`` in a distribution's ``entry_points.txt``."""

    name: str
    value: str

    def load(self) -> object:
        """Import the module ``value`` names and return it, or its ``:attr`` (dotted) in it."""
        module, _, attrs = self.value.partition("[")[0].partition(":")
        found: object = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            found = getattr(found, attr)
        return found


class _Unreadable(Exception):
    """A ``sys.path`` entry or finder this reader cannot list distributions from."""


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _read_group(text: str, group: str) -> list[EntryPoint]:
    """The entries of ``[group]`` in an ``entry_points.txt`` (importlib.metadata's syntax)."""
    found: list[EntryPoint] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group and "=" in line:
            name, _, value = line.partition("=")
            found.append(EntryPoint(name.strip(), value.strip()))
    return found


def _scan(group: str, path: list[str]) -> list[EntryPoint]:
    """Entry points of ``group`` in the distribution folders on ``path``.

    Raises:
        _Unreadable: a ``path`` entry is a file (a zip) or an ``.egg``.
    """
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is PathFinder or getattr(finder, "find_distributions", None) is None:
            continue
        # The importlib_metadata backport, once imported (litellm and others do), adds a finder
        # that lists the same folders on sys.path as PathFinder, after it: importlib.metadata
        # keeps the first distribution of a name, so it adds nothing this scan misses.
        if type(finder).__module__.partition(".")[0] == "importlib_metadata":
            continue
        raise _Unreadable(finder)
    seen: set[str] = set()
    found: list[EntryPoint] = []
    for entry in path:
        root = entry or "."
        if root.lower().endswith(".egg"):
            raise _Unreadable(root)
        try:
            with os.scandir(root) as children:
                names = [child.name for child in children]
        except NotADirectoryError as exc:
            raise _Unreadable(root) from exc
        except OSError:
            continue
        for child in names:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            dist = _normalize(low.rpartition(".")[0].partition("-")[0])
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(root, child, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            found.extend(_read_group(text, group))
    return found


def entry_points(group: str) -> list[EntryPoint]:
    """Return the entry points of ``group`` installed for this interpreter.

    The same entries, in the same order, as ``importlib.metadata.entry_points(group=group)``.
    """
    try:
        return _scan(group, sys.path)
    except _Unreadable:
        import importlib.metadata

        return [
            EntryPoint(entry.name, entry.value)
            for entry in importlib.metadata.entry_points(group=group)
        ]


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading the entry points once.

    A plugin whose entry module fails to import is logged once and skipped (a broken plugin
    must not take core down with it); a blocked or repeated name is left out.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    for entry in entry_points(hookspecs.PROJECT):
        if pm.has_plugin(entry.name) or pm.is_blocked(entry.name):
            continue
        try:
            plugin = entry.load()
        except Exception as exc:  # a broken plugin must not take core down with it
            _log().warning(
                "Pinakes plugin %r (%s) failed to load and is ignored: %s",
                entry.name,
                entry.value,
                exc,
            )
            continue
        pm.register(plugin, name=entry.name)
    return pm


class _Switch(Protocol):
    @property
    def enabled(self) -> bool: ...


class PluginSettings(Protocol):
    """What :func:`require_plugins` reads of a config (a :class:`~pinakes_core.config.Config`).

    A protocol rather than the config class, so this module need not import the config (and
    pydantic) below which it sits.
    """

    @property
    def ner(self) -> _Switch:
        """The ``[ner]`` section: ``enabled`` asks for the pinakes-ner plugin."""
        ...


def require_plugins(config: PluginSettings, source: Path) -> None:
    """Check that every plugin ``config`` asks for is installed.

    Args:
        config: the KB's :class:`~pinakes_core.config.Config`.
        source: the file it was read from, named in the error.

    Raises:
        PluginMissingError: ``[ner] enabled = true`` without the pinakes-ner plugin; the
            message names the file and carries the install command.
    """
    if config.ner.enabled and not plugin_manager().has_plugin("ner"):
        raise PluginMissingError(
            f"{source} sets [ner] enabled = true, but the pinakes-ner plugin is not installed.",
            "Install it: uv pip install pinakes-ner (or pip install 'pinakes-cli[ner]'), "
            "or set [ner] enabled = false.",
        )


def after_sync(kb: Any, progress: _Progress | None) -> _AfterSync:
    """The plugins' ``after_sync`` hook for a sync of ``kb``, as the sync calls it.

    ``kb`` is what the hook receives as ``kb`` (the :class:`~pinakes_core.kb.KB` being synced);
    ``progress`` is passed on (a no-op when ``None``).
    """

    def run(store: Any, changed: list[str], removed: list[str], relinked: list[str]) -> None:
        plugin_manager().hook.after_sync(
            kb=kb,
            store=store,
            changed=changed,
            removed=removed,
            relinked=relinked,
            progress=progress or (lambda stage, done, total: None),
        )

    return run


def doctor_checks(kb: Any) -> Callable[[Any], list[Any]]:
    """The plugins' ``doctor_checks`` hook for ``kb``, given the store: one list of findings per plugin."""
    return lambda store: list(plugin_manager().hook.doctor_checks(kb=kb, store=store))
