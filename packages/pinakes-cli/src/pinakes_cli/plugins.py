"""``pnk`` commands from other distributions, and ``pnk plugins``: what is installed.

Front-ends never import each other (STYLE "Layering"): a distribution adds its ``pnk``
subcommands through core's ``register_commands`` hook in its ``pinakes`` entry-point module,
the way llm plugins do. A known command whose distribution is missing stays visible in
``pnk --help`` and, when run, says exactly what to install.

The commands are collected through core's :func:`~pinakes_core.plugins.plugin_manager`, which
loads the entry modules and nothing else (core's channels join it only when the search room
first builds its registry), so ``pnk --help`` stays light (issue 37) and every entry point is
scanned and loaded once per process. An entry module must stay light itself (STYLE "Layering").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import click

import pinakes_core.hookspecs as hookspecs
from pinakes_cli import render
from pinakes_cli.root import cli
from pinakes_core.errors import PluginMissingError
from pinakes_core.plugins import entry_points, plugin_manager

if TYPE_CHECKING:
    import logging

# rich and importlib.metadata load only when the listing is drawn (issues 14 and 37, start-up
# cost): pnk --help finds the plugin commands through core's light entry-point reader.

__all__ = ["KNOWN_COMMANDS", "commands_complete", "plugins", "register_plugin_commands"]

#: commands other Pinakes distributions provide: name → (distribution, what it does).
KNOWN_COMMANDS = {"mcp": ("pinakes-mcp", "Serve KBs to agents over MCP.")}

#: the Pinakes distributions, in dependency order.
DISTRIBUTIONS = ("pinakes-core", "pinakes-graph", "pinakes-ner", "pinakes-cli", "pinakes-mcp")


class _MissingCommand(click.Command):
    """A known command whose distribution is not installed; running it says what to install."""

    def __init__(self, name: str, dist: str, callback: Any, summary: str) -> None:
        hint = f"{summary} (not installed: pip install {dist})"
        super().__init__(
            name,
            callback=callback,
            help=hint,
            short_help=hint,
            context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        )
        self.dist = dist


def _missing(name: str, dist: str, summary: str) -> click.Command:
    def run() -> NoReturn:
        raise PluginMissingError(
            f"pnk {name} needs the {dist} package, which is not installed.",
            f"Install it beside pinakes-cli: pip install {dist} "
            f"(or uv tool install pinakes-cli --with {dist}).",
        )

    return _MissingCommand(name, dist, run, summary)


def _log() -> logging.Logger:
    import logging  # only when something goes wrong: pnk --help need not load it

    return logging.getLogger(__name__)


#: whether a plugin's ``register_commands`` raised in this process (see :func:`commands_complete`).
_REGISTER_FAILED: list[bool] = []


def register_plugin_commands(group: click.Group) -> None:
    """Let installed plugins add their commands; add install hints for known missing ones."""
    try:
        plugin_manager().hook.register_commands(cli=group)
    except Exception:  # a broken plugin must not take pnk down with it
        _REGISTER_FAILED.append(True)
        _log().warning("A Pinakes plugin failed to register its commands.", exc_info=True)
    for name, (dist, summary) in KNOWN_COMMANDS.items():
        if name not in group.commands:
            group.add_command(_missing(name, dist, summary))


def commands_complete() -> bool:
    """Whether every ``pinakes`` entry point loaded and registered its commands without a warning.

    The front door (:mod:`pinakes_cli.door`) keeps ``pnk --help`` only then, so a broken
    plugin's warning is given on every run.
    """
    manager = plugin_manager()
    return not _REGISTER_FAILED and all(
        manager.has_plugin(entry.name) or manager.is_blocked(entry.name)
        for entry in entry_points(hookspecs.PROJECT)
    )


def _installed() -> list[dict[str, Any]]:
    import importlib.metadata

    rows = []
    for dist in DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = None
        rows.append({"distribution": dist, "version": version})
    return rows


def _entry_points() -> list[dict[str, Any]]:
    import importlib.metadata

    manager = plugin_manager()
    rows = []
    for entry in importlib.metadata.entry_points(group=hookspecs.PROJECT):
        plugin = manager.get_plugin(entry.name)
        hooks = (
            sorted(h.name for h in manager.get_hookcallers(plugin) or [])
            if plugin is not None
            else []
        )
        dist = entry.dist
        rows.append(
            {
                "name": entry.name,
                "module": entry.value,
                "distribution": dist.name if dist is not None else None,
                "version": dist.version if dist is not None else None,
                "loaded": plugin is not None,
                "hooks": hooks,
            }
        )
    return rows


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.pass_context
def plugins(ctx: click.Context, as_json: bool) -> None:
    """List the installed Pinakes distributions, plugins and the commands they add."""
    root = ctx.find_root().command
    commands = root.commands if isinstance(root, click.Group) else {}
    missing = {
        name: command.dist
        for name, command in commands.items()
        if isinstance(command, _MissingCommand)
    }
    data: dict[str, Any] = {
        "distributions": _installed(),
        "plugins": _entry_points(),
        "missing_commands": {name: f"pip install {dist}" for name, dist in missing.items()},
    }
    console = render.console(soft_wrap=True)
    if as_json:
        render.print_data(console, data)
        return
    for row in data["distributions"]:
        version = row["version"] or "not installed"
        console.print(render.line((f"{row['distribution']:<14}", "bold"), f" {version}"))
    for row in data["plugins"]:
        state = ", ".join(row["hooks"]) if row["loaded"] else "failed to load (see the log)"
        console.print(render.line(f"plugin {row['name']} ({row['module']}): {state}"))
    for name, command in data["missing_commands"].items():
        console.print(render.line(("missing", "yellow"), f" pnk {name}: {command}"))
