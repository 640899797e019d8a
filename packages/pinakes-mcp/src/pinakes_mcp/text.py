"""Token budgets and heading sections for what the tools return.

Tokens here are *approximate*: characters / 4, the usual rule of thumb for English text under
BPE tokenizers. Budgets only need to keep a reply within an agent's context, not to match any
one model's tokenizer, and counting characters costs nothing.

Headings are found line by line (ATX ``#`` headings outside fenced code, after any YAML
frontmatter); that is enough to cut a document into sections for reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CHARS_PER_TOKEN", "Heading", "approx_tokens", "find_section", "headings", "truncate"]

#: characters per approximate token (see the module docstring).
CHARS_PER_TOKEN = 4

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_PATH_SEP = re.compile(r"\s+(?:›|>)\s+")


def approx_tokens(text: str) -> int:
    """Return the approximate token count of ``text`` (characters / 4, rounded up)."""
    return -(-len(text) // CHARS_PER_TOKEN)


def truncate(text: str, max_tokens: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``max_tokens`` approximate tokens.

    The cut falls at the last paragraph break (else line break) inside the budget when there is
    one in its second half, so a reader never gets half a line unless a single line is longer
    than the budget.

    Returns:
        The (possibly shortened) text and whether it was cut.
    """
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text, False
    cut = text.rfind("\n\n", 0, limit)
    if cut < limit // 2:
        cut = text.rfind("\n", 0, limit)
    if cut < limit // 2:
        cut = limit
    return text[:cut].rstrip() + "\n", True


@dataclass(frozen=True)
class Heading:
    """A Markdown heading: its level (1–6), its text, its path and its 0-based line."""

    level: int
    title: str
    path: tuple[str, ...]
    line: int


def _body_start(lines: list[str]) -> int:
    """Return the index of the first line after YAML frontmatter (0 when there is none)."""
    if lines and lines[0].rstrip() == "---":
        for i in range(1, len(lines)):
            if lines[i].rstrip() in ("---", "..."):
                return i + 1
    return 0


def headings(text: str) -> list[Heading]:
    """Return the ATX headings of ``text`` in order, skipping frontmatter and fenced code."""
    lines = text.split("\n")
    found: list[Heading] = []
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    for i in range(_body_start(lines), len(lines)):
        line = lines[i]
        opener = _FENCE.match(line)
        if fence is not None:
            if opener and opener.group(1)[0] == fence[0] and len(opener.group(1)) >= len(fence):
                fence = None
            continue
        if opener:
            fence = opener.group(1)
            continue
        match = _ATX.match(line)
        if not match:
            continue
        level, title = len(match.group(1)), (match.group(2) or "").strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        found.append(Heading(level, title, tuple(t for _, t in stack), i))
    return found


def find_section(text: str, name: str) -> tuple[Heading, str] | None:
    """Return the heading called ``name`` and its section's text, or ``None``.

    ``name`` matches a heading's text case-insensitively, or a heading path written with
    ``›`` or ``>`` between levels (as search hits give ``heading_path``). The section runs
    from the heading line to the next heading of the same or a higher level.
    """
    wanted = tuple(part.strip().casefold() for part in _PATH_SEP.split(name.strip()))
    found = headings(text)
    for index, heading in enumerate(found):
        path = tuple(part.casefold() for part in heading.path)
        if path[-len(wanted) :] != wanted:
            continue
        lines = text.split("\n")
        end = next((h.line for h in found[index + 1 :] if h.level <= heading.level), len(lines))
        return heading, "\n".join(lines[heading.line : end]).strip("\n") + "\n"
    return None
