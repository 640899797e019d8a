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

MyST (Jupyter Book, Sphinx with myst-parser) writes a directive as a code fence whose info
string names it, and parses the body of an admonition, a margin or a card as Markdown::

    ```{note} Read first
    :class: dropdown
    See [the guide](guide.md).
    ```

CommonMark reads that as code. :func:`unindent_containers` also turns the fences of the
directives in :data:`MYST_PROSE` into colon fences (``:::{note} Read first``, ``:::``), which
CommonMark reads as text, so their bodies are parsed as Markdown; other directives (``{code-cell}``,
``{math}``, ``{raw}``, an extension's unknown one) stay code.
"""

from __future__ import annotations

import re

__all__ = ["MYST_PROSE", "unindent_containers"]

#: MyST directives whose body is Markdown a reader sees: docutils' and Sphinx's admonitions and
#: prose blocks, Jupyter Book's margin, sphinx-design's cards, grids, tabs and dropdowns,
#: sphinx-togglebutton's toggle, sphinx-exercise's blocks, images, and figures and tables (their
#: bodies are captions and tables). sphinx-proof's ``{prf:theorem}`` and kin are prose too.
MYST_PROSE = frozenset(
    [
        "admonition",
        "attention",
        "caution",
        "danger",
        "error",
        "hint",
        "important",
        "note",
        "seealso",
        "tip",
        "warning",
        "todo",
        "versionadded",
        "versionchanged",
        "deprecated",
        "only",
        "topic",
        "sidebar",
        "margin",
        "epigraph",
        "pull-quote",
        "highlights",
        "rubric",
        "container",
        "div",
        "dropdown",
        "toggle",
        "card",
        "grid",
        "grid-item",
        "grid-item-card",
        "tab-set",
        "tab-item",
        "tab-set-code",
        "image",
        "figure",
        "table",
        "list-table",
        "button-ref",
        "button-link",
        "glossary",
        "exercise",
        "solution",
    ]
)

# "!!! note", '??? tip "Title"', '???+ example ""', '!!! warning inline end "T"': an admonition
# or a collapsible block (pymdownx.details). '=== "Tab"', '===+ "Tab"': a content tab.
_OPENER = re.compile(
    r"""^(?P<indent>[ ]*)(?:(?:!!!|\?\?\?\+?)[ \t]+[\w-]+(?:[ \t]+[\w-]+)*(?:[ \t]+"[^"]*")?"""
    r"""|===\+?[ \t]+"[^"]*")[ \t]*$"""
)
_FENCE = re.compile(r"^[ ]*(`{3,}|~{3,})")
# A fence line: its indent, its run of backticks or tildes, and its info string.
_FENCE_LINE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*?)[ \t]*$")
# A MyST directive's info string: "{note} Title", "{prf:theorem}".
_DIRECTIVE = re.compile(r"\{(?P<name>[A-Za-z][\w:-]*)\}")
_WIDTH = 4


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def unindent_containers(lines: list[str]) -> list[str]:
    """``lines`` with admonition, details and content-tab bodies moved four spaces left.

    MyST prose directives' fences become colon fences first (see the module doc).

    Lines inside fenced code (examples of the syntax) are never openers. A body runs over blank
    lines and lines indented at least four spaces past its opener; a tab in the indent counts
    as four spaces there. A line inside n bodies moves 4n spaces. One pass over the lines with
    a stack of the open bodies, so deep nesting costs no more than its lines. Lines holding no
    opener are returned as they are (the same list when there is none).
    """
    lines = _myst_prose_fences(lines)
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


def _myst_prose_fences(lines: list[str]) -> list[str]:
    """``lines`` with the fences of MyST prose directives turned into colon fences.

    A directive's body is Markdown, so a code fence inside it is code and a longer fence of the
    same character closes it; one pass with a stack of the open directives. Returns ``lines``
    itself when no line changes.
    """
    if not any("{" in line and ("```" in line or "~~~" in line) for line in lines):
        return lines
    out = lines
    code: str | None = None  # the open code fence
    directives: list[str] = []  # the open directives' fences, innermost last
    for i, line in enumerate(lines):
        match = _FENCE_LINE.match(line)
        if match is None:
            continue
        fence, info = match.group("fence"), match.group("info")
        if code is not None:
            if not info and fence[0] == code[0] and len(fence) >= len(code):
                code = None
            continue
        name = _DIRECTIVE.match(info)
        top = directives[-1] if directives else ""
        if not info and fence[0] == top[:1] and len(fence) >= len(top):
            directives.pop()  # a shorter fence of its character opens code inside its body
            out = out if out is not lines else list(lines)
            out[i] = match.group("indent") + ":" * len(fence)
            continue
        if name is not None and _is_prose(name.group("name").lower()):
            directives.append(fence)
            out = out if out is not lines else list(lines)
            out[i] = match.group("indent") + ":" * len(fence) + info
        elif "`" not in info or fence[0] == "~":  # "``` a `b`" is inline code, no fence
            code = fence
    return out


def _is_prose(name: str) -> bool:
    return name in MYST_PROSE or name.startswith("prf:")
