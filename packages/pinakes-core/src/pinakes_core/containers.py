"""Indented containers of docs-site Markdown, read as the site's generator reads them.

MkDocs (Python-Markdown's admonition and pymdownx extensions) writes admonitions, collapsible
blocks and content tabs as an opener line and a body indented by four spaces::

    !!! note "Phony"

        Text with a [link](other.md).

    === "Tab"

        - a list

CommonMark reads such a body as an indented code block, so its links, lists, headings and link
reference definitions are lost to whoever parses it as CommonMark. :func:`unindent_containers`
returns the lines with each such body moved four spaces left (the opener's own indent kept,
nested containers too), the same number of lines, so a parse of the result maps back to the
document's own lines. Only the parse uses it: chunk text stays the document's text.
"""

from __future__ import annotations

import re

__all__ = ["unindent_containers"]

# "!!! note", '??? tip "Title"', '???+ example ""', '!!! warning inline end "T"': an admonition
# or a collapsible block (pymdownx.details). '=== "Tab"', '===+ "Tab"': a content tab.
_OPENER = re.compile(
    r"""^(?P<indent>[ ]*)(?:(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+[\w-]+)*(?:[ \t]+"[^"]*")?"""
    r"""|===\+?[ \t]+"[^"]*")[ \t]*$"""
)
_FENCE = re.compile(r"^[ ]*(`{3,}|~{3,})")
_WIDTH = 4


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def unindent_containers(lines: list[str]) -> list[str]:
    """``lines`` with admonition, details and content-tab bodies moved four spaces left.

    Lines inside fenced code (examples of the syntax) are never openers. A body runs over blank
    lines and lines indented at least four spaces past its opener; a tab in the indent counts
    as four spaces there. A line inside n bodies moves 4n spaces. One pass over the lines with
    a stack of the open bodies, so deep nesting costs no more than its lines. Lines holding no
    opener are returned as they are (the same list when there is none).
    """
    if not any("!!!" in line or "???" in line or "===" in line for line in lines):
        return lines
    out = [line.expandtabs(_WIDTH) if line.startswith((" ", "\t")) else line for line in lines]
    changed = False
    fence: str | None = None
    bodies: list[int] = []  # the indent each open body's lines have at least, innermost last
    for i, line in enumerate(out):
        if not line.strip():
            continue  # a blank line neither ends a body nor moves
        indent = _indent(line)
        while bodies and indent < bodies[-1]:
            bodies.pop()
        if bodies:
            out[i] = line[_WIDTH * len(bodies) :]
            changed = True
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            continue
        if opener:
            fence = opener.group(1)
        elif _OPENER.match(line):
            bodies.append(indent + _WIDTH)
    return out if changed else lines
