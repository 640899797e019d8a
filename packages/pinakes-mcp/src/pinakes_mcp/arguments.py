"""The argument types the MCP tools share (``kb``, a document reference, a list item).

Plain pydantic annotations, no framework: the tool bodies the stdio front runs before fastmcp
has loaded (:mod:`pinakes_mcp.search`) take them as they are, and fastmcp builds each tool's
input schema from them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = ["Doc", "Item", "Kb"]

#: one item of a list argument (a tag, an entity, a concept, a meta filter).
Item = Annotated[str, Field(min_length=1, max_length=200)]
#: the ``kb`` argument every tool takes.
Kb = Annotated[
    str | None,
    Field(
        max_length=200,
        description="Name (or KB ULID) of one served KB; omit to use every served KB (see pinakes_kbs).",
    ),
]
#: a document reference (``doc``, ``src``, ``dst``).
Doc = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1_000,
        description=(
            "The document: its doc_id (ULID) from a search hit or link, a pnk:// URI, a path "
            "relative to the KB root of an indexed document (no '..', not absolute), or a "
            "note's name, title or alias as its wikilinks write it ('0002-retry-policy')."
        ),
    ),
]
