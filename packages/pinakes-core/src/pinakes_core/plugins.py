"""The plugin manager: core channels plus everything in the ``pinakes`` entry-point group."""

from __future__ import annotations

import functools

import pluggy

from pinakes_core import hookspecs
from pinakes_core.channels import Channel
from pinakes_core.errors import PluginMissingError

__all__ = ["channel_registry", "plugin_manager"]

#: Channels that ship in plugins, with the distribution that provides them.
_PROVIDERS = {"expand": "pinakes-graph", "ppr": "pinakes-graph"}


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """Return the process-wide plugin manager, loading entry points once."""
    from pinakes_core import channels

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(channels, name="pinakes_core.channels")
    pm.load_setuptools_entrypoints(hookspecs.PROJECT)
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
