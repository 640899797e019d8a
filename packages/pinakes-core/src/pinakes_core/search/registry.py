"""The channel registry: every retrieval channel by name, core's and the plugins' alike.

Core's own channels (:mod:`pinakes_core.search.channels`) join the plugin manager here, the
first time the registry is built, and come back through the same ``register_channels`` hook as
a plugin's: the plugin path is always exercised (STYLE "Layering"), and the plugin manager
itself stays below the search room.
"""

from __future__ import annotations

import functools

from pinakes_core.errors import PluginMissingError
from pinakes_core.plugins import plugin_manager
from pinakes_core.search import channels
from pinakes_core.search.context import Channel

__all__ = ["CORE_CHANNELS", "channel_registry"]

#: the name core's channels module is registered under in the plugin manager.
CORE_CHANNELS = "pinakes_core.search.channels"

#: Channels that ship in plugins, with the distribution that provides them.
_PROVIDERS = {
    name: "pinakes-graph"
    for name in ("expand", "ppr", "ppr-auto", "ppr-rerank", "ppr-rank", "link-rerank", "salience")
}


@functools.cache
def _registry() -> dict[str, Channel]:
    manager = plugin_manager()
    if not manager.has_plugin(CORE_CHANNELS):
        manager.register(channels, name=CORE_CHANNELS)
    registry: dict[str, Channel] = {}
    # Core's hook implementation runs last (trylast), so a plugin's channel of the same name
    # comes first and wins, and the registry lists the plugins' channels before core's.
    for group in manager.hook.register_channels():
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
