"""The plugin manager: core channels plus everything in the ``pinakes`` entry-point group."""

from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy

import pinakes_core.hookspecs as hookspecs
from pinakes_core.config import Config
from pinakes_core.errors import PluginMissingError
from pinakes_core.search.context import Channel

if TYPE_CHECKING:
    from pinakes_core.index.refresh import AfterSync
    from pinakes_core.index.sync import ProgressFn

__all__ = ["after_sync", "channel_registry", "doctor_checks", "plugin_manager", "require_plugins"]

log = logging.getLogger(__name__)

#: Channels that ship in plugins, with the distribution that provides them.
_PROVIDERS = {
    name: "pinakes-graph"
    for name in ("expand", "ppr", "ppr-auto", "ppr-rerank", "ppr-rank", "link-rerank", "salience")
}


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading entry points once."""
    from pinakes_core.search import channels

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(channels, name="pinakes_core.search.channels")
    for entry in importlib.metadata.entry_points(group=hookspecs.PROJECT):
        if pm.has_plugin(entry.name) or pm.is_blocked(entry.name):
            continue
        try:
            plugin = entry.load()
        except Exception as exc:  # a broken plugin must not take core down with it
            log.warning(
                "Pinakes plugin %r (%s) failed to load and is ignored: %s",
                entry.name,
                entry.value,
                exc,
            )
            continue
        pm.register(plugin, name=entry.name)
    return pm


@functools.cache
def _registry() -> dict[str, Channel]:
    registry: dict[str, Channel] = {}
    for group in plugin_manager().hook.register_channels():
        for channel in group:
            registry.setdefault(channel.name, channel)
    return registry


def channel_registry(names: list[str] | None = None) -> dict[str, Channel]:
    """Return registered channels by name, optionally only ``names`` (in that order).

    Raises:
        PluginMissingError: if a requested channel is not registered; the message carries the
            install command of the plugin that provides it.
    """
    registry = _registry()
    if names is None:
        return dict(registry)
    out: dict[str, Channel] = {}
    for name in names:
        if name not in registry:
            provider = _PROVIDERS.get(name)
            hint = (
                f"Install it: uv pip install {provider}"
                if provider
                else (f"Known channels: {', '.join(sorted(registry))}.")
            )
            raise PluginMissingError(f"No retrieval channel named {name!r} is installed.", hint)
        out[name] = registry[name]
    return out


def require_plugins(config: Config, source: Path) -> None:
    """Check that every plugin ``config`` asks for is installed.

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


def after_sync(kb: Any, progress: ProgressFn | None) -> AfterSync:
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
