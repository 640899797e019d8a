"""Token budgets, heading sections and line slices of a document (``KB.read``, MCP, ``pnk show``).

Tokens here are *approximate*: characters / 4, the usual rule of thumb for English text under
BPE tokenizers. Budgets only need to keep a reply within an agent's context, not to match any
one model's tokenizer, and counting characters costs nothing.

Headings are the chunker's (:func:`pinakes_core.index.chunking.heading_lines`: ATX and setext headings
outside code, after any frontmatter, inside admonitions and outlines), so a hit's heading path
always names a section a read can find.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pinakes_core.errors import PinakesError

__all__ = [
    "CHARS_PER_TOKEN",
    "MAX_HEADINGS",
    "Heading",
    "Slice",
    "SliceError",
    "approx_tokens",
    "find_section",
    "headings",
    "section_span",
    "slice_document",
    "truncate",
]

#: most heading paths a read lists.
MAX_HEADINGS = 50

#: characters per approximate token (see the module docstring).
CHARS_PER_TOKEN = 4

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


#: A frontmatter block's opening line → the lines that may close it: YAML (``---`` … ``---``
#: or ``...``) and TOML as Hugo and Zola write it (``+++`` … ``+++``).
FRONTMATTER_FENCES = {"---": ("---", "..."), "+++": ("+++",)}
#: Most blank lines read before a TOML frontmatter fence.
MAX_LEADING_BLANKS = 16


def frontmatter_block(lines: list[str]) -> tuple[str, int, int] | None:
    """The leading frontmatter block: its opening fence and the indexes of its two fence lines.

    A YAML block opens on the first line (after blank lines, ``---`` is a Markdown rule). A TOML
    block may follow blank lines, as Zola and Hugo read it (129 of Zola's 180 docs pages start
    with one). ``None`` when the document does not open with a fence or the block never closes.
    """
    start = 0
    while start < len(lines) and start < MAX_LEADING_BLANKS and not lines[start].strip():
        start += 1
    if start < len(lines) and start and lines[start].strip() != "+++":
        start = 0  # only a TOML fence may follow blank lines
    closers = FRONTMATTER_FENCES.get(lines[start].rstrip()) if start < len(lines) else None
    if closers is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].rstrip() in closers), None)
    return None if end is None else (lines[start].rstrip(), start, end)


def _body_start(lines: list[str]) -> int:
    """Return the index of the first line after the frontmatter (0 when there is none)."""
    block = frontmatter_block(lines)
    return 0 if block is None else block[2] + 1


def headings(text: str) -> list[Heading]:
    """Return the headings of ``text`` in order, with their paths, as search hits show them."""
    from pinakes_core.read.blocks import heading_lines  # Markdown parsing: only when one is read

    lines = text.split("\n")
    start = _body_start(lines)
    found: list[Heading] = []
    stack: list[tuple[int, str]] = []
    for line, level, title in heading_lines(lines[start:]):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        found.append(Heading(level, title, tuple(t for _, t in stack), start + line))
    return found


def _flat(name: str) -> str:
    # Code and emphasis marks do not count: "Install `pnk`" finds the heading "Install pnk".
    plain = name.replace("`", "").replace("*", "")
    return " › ".join(" ".join(p.split()) for p in _PATH_SEP.split(plain.strip())).casefold()


def section_span(
    text: str, name: str, found: list[Heading] | None = None
) -> tuple[Heading, int, int] | None:
    """Return the heading called ``name`` and its section's 0-based [start, end) line span.

    ``found``: ``headings(text)`` when the caller has it already (finding them parses the text).
    """
    # Compared as text with every separator alike, so that a heading that itself holds one
    # ("Input > Output", "A › B") is found by its own text and inside a heading path.
    wanted = _flat(name)
    if found is None:
        found = headings(text)
    for index, heading in enumerate(found):
        suffixes = (heading.path[-k:] for k in range(1, len(heading.path) + 1))
        if not any(_flat(" › ".join(parts)) == wanted for parts in suffixes):
            continue
        end = next(
            (h.line for h in found[index + 1 :] if h.level <= heading.level), text.count("\n") + 1
        )
        return heading, heading.line, end
    return None


def find_section(text: str, name: str) -> tuple[Heading, str] | None:
    """Return the heading called ``name`` and its section's text, or ``None``.

    ``name`` matches a heading's text case-insensitively, or a heading path written with
    ``›`` or ``>`` between levels (as search hits give ``heading_path``). The section runs
    from the heading line to the next heading of the same or a higher level.
    """
    span = section_span(text, name)
    if span is None:
        return None
    heading, start, end = span
    return heading, "\n".join(text.split("\n")[start:end]).strip("\n") + "\n"


class SliceError(PinakesError):
    """A read asked for lines or a section the document does not have."""


@dataclass(frozen=True)
class Slice:
    """The part of a document a read returns.

    Attributes:
        text: the text served (possibly cut to the token budget).
        lines: its first and last line in the file, 1-based and inclusive.
        section: the heading path of the section served, when one was asked.
        headings: the document's heading paths (at most :data:`MAX_HEADINGS`).
        tokens: approximate tokens in ``text``.
        total_tokens: approximate tokens in the whole slice before the budget cut it.
        truncated: whether ``text`` was cut to fit the budget.
    """

    text: str
    lines: tuple[int, int]
    section: str | None
    headings: list[str]
    tokens: int
    total_tokens: int
    truncated: bool


def slice_document(
    path: str,
    text: str,
    *,
    lines: tuple[int, int] | None = None,
    section: str | None = None,
    max_tokens: int | None = None,
) -> Slice:
    """Cut ``text`` (the file ``path``) to a line range or a heading section, then to a budget.

    Args:
        path: the document's KB-relative path, for error messages.
        text: the whole document.
        lines: first and last line, 1-based and inclusive; a last line past the end is clamped.
        section: a heading's text or heading path (see :func:`find_section`).
        max_tokens: cap on the returned text in approximate tokens; ``None`` for no cap.

    Raises:
        SliceError: for both ``lines`` and ``section``, a line range that is empty, starts past
            the end or below 1, an unknown section, or a budget below 1.
    """
    all_lines = text.split("\n")
    if text.endswith("\n"):
        all_lines.pop()  # the newline ends the last line; it does not start another
    count = max(len(all_lines), 1)
    found = headings(text)
    listed = [" › ".join(h.path) for h in found[:MAX_HEADINGS]]
    if lines is not None and section:
        raise SliceError("Give either a line range or a section, not both.", "Drop one of the two.")
    if max_tokens is not None and max_tokens < 1:
        raise SliceError(f"max_tokens must be at least 1, not {max_tokens}.")
    chosen: str | None = None
    span = (1, count)
    body = text
    if lines is not None:
        first, last = lines
        if first < 1 or last < first:
            raise SliceError(
                f"The line range {first}-{last} is not valid.",
                "Use A-B with 1 <= A <= B, e.g. 10-40.",
            )
        if first > count:
            raise SliceError(
                f"{path} has {count} lines; the range {first}-{last} starts past the end.",
                f"Use a range within 1-{count}.",
            )
        span = (first, min(last, count))
        body = "\n".join(all_lines[first - 1 : span[1]]) + "\n"
    elif section:
        found_span = section_span(text, section, found)
        if found_span is None:
            names = ", ".join(repr(h.title) for h in found[:20]) or "none"
            raise SliceError(f"{path} has no heading {section!r}.", f"Its headings: {names}.")
        heading, start, end = found_span
        # The section runs to the line before the next heading; blank lines at its end go.
        while end - 1 > start and end - 1 < len(all_lines) and not all_lines[end - 1].strip():
            end -= 1
        end = min(end, len(all_lines))
        span = (start + 1, max(end, start + 1))
        chosen = " › ".join(heading.path)
        body = "\n".join(all_lines[start:end]) + "\n"
    capped, truncated = truncate(body, max_tokens) if max_tokens is not None else (body, False)
    if truncated:
        span = (span[0], span[0] + max(capped.count("\n"), 1) - 1)
    return Slice(
        text=capped,
        lines=span,
        section=chosen,
        headings=listed,
        tokens=approx_tokens(capped),
        total_tokens=approx_tokens(body),
        truncated=truncated,
    )
