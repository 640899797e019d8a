"""``pnk``'s click side: the root group with every command module registered on it.

The ``pnk`` script enters through :mod:`pinakes_cli.door`, which answers a repeated
``pnk --help`` / ``pnk --version`` from its cache and hands everything else to :func:`main`.

Importing a command module registers its commands on :data:`pinakes_cli.root.cli`; plugins
add theirs through the ``register_commands`` hook (:mod:`pinakes_cli.plugins`). Nothing
imported here loads the engine, so ``pnk --help`` and ``pnk --version`` stay light (issue 37).
"""

from __future__ import annotations

import gc

from pinakes_cli import (
    check_commands,
    fleet_commands,
    index_commands,
    paid_commands,
    read_commands,
    search_commands,
    setup_commands,
)
from pinakes_cli.plugins import register_plugin_commands
from pinakes_cli.root import SETTLE, cli

__all__ = ["cli", "main"]

#: the command modules, each registered on :data:`cli` when imported.
COMMAND_MODULES = (
    index_commands,
    search_commands,
    read_commands,
    check_commands,
    setup_commands,
    fleet_commands,
    paid_commands,
)

# Commands from other Pinakes distributions (pnk mcp from pinakes-mcp, …) come through the
# register_commands hook; a known one that is not installed says what to install.
register_plugin_commands(cli)


def main() -> None:
    """Run ``pnk`` through click (:func:`pinakes_cli.door.main` calls it).

    When the command is done (click then exits through ``SystemExit``), every object left is
    frozen into the collector's permanent generation, so the interpreter's shutdown does not
    walk them all again looking for cycles: that walk cost a cold ``pnk search`` about as much
    CPU as loading the embedding model (issue 14). Nothing else is skipped: atexit handlers
    run, files flush and close, and the KB was closed when the command's context closed.
    Objects still alive at exit are all a freeze leaves unfinalised, which Python never
    promised to finalise anyway.
    """
    try:
        cli(obj={SETTLE: True})
    finally:
        gc.freeze()
