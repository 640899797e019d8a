"""Who the server says it is: its name, version and instructions (stdlib only).

Both the stdio front (:mod:`pinakes_mcp.front`, which answers ``initialize`` before fastmcp is
loaded) and the fastmcp server (:mod:`pinakes_mcp.server`) take them from here, so the two
replies cannot drift apart.
"""

from __future__ import annotations

from importlib.metadata import version

__all__ = ["INSTRUCTIONS", "NAME", "VERSION", "WRITE_INSTRUCTIONS", "instructions"]

#: the server's name in ``serverInfo``.
NAME = "pinakes"
#: the installed ``pinakes-mcp`` version (``serverInfo.version``).
VERSION = version("pinakes-mcp")

INSTRUCTIONS = """\
Pinakes serves local Markdown knowledge bases (the user's notes and docs).
Start with pinakes_search; read a hit's document with pinakes_read; follow links with
pinakes_links one hop at a time; pinakes_kbs lists the KBs; pinakes_recent shows what changed.
When a search says abstain=true, the KB probably does not know the answer: say so instead of
guessing."""
WRITE_INSTRUCTIONS = """
Writing is on: pinakes_write_note creates a note, pinakes_append adds to one, pinakes_link adds
a typed link. Each change is indexed before the call returns. Never overwrite without being
asked to."""


def instructions(*, allow_write: bool) -> str:
    """The ``instructions`` an agent gets at ``initialize`` (longer with the write tools)."""
    return INSTRUCTIONS + (WRITE_INSTRUCTIONS if allow_write else "")
