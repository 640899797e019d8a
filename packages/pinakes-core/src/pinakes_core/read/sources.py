"""Source types and what each becomes in the index (issue 18): Markdown, text, PDF, code.

A document's *source type* comes from its file name: :data:`MARKDOWN_SUFFIXES` are ``markdown``,
``.pdf`` is ``pdf``, a known code suffix (:data:`pinakes_core.read.code.CODE_SUFFIXES`) is ``code``,
anything else the include globs select is ``text``.

A PDF is indexed as its *extracted text*: each page's text under a marker line
``[page N]``, pages separated by a blank line. Line numbers of PDF chunks and hits, and the
``lines`` of a read, count lines of that text (markers included); a chunk never spans two
pages and never holds a marker, so markers add nothing to search and a hit's page is exact. :class:`PdfText` keeps the line of every
marker, which is how a chunk's line span becomes its page span and how ``read`` serves a page
range.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pinakes_core.read.code import is_code

__all__ = [
    "MARKDOWN_SUFFIXES",
    "SOURCE_TYPES",
    "PdfText",
    "page_marker",
    "pdf_text",
    "source_type",
    "text_from_chunks",
]

#: Every source type, as the ``source_type`` filter accepts them.
SOURCE_TYPES = ("markdown", "text", "pdf", "code")
#: Markdown files; ``.mdx`` is read through :func:`pinakes_core.read.mdx.markdown_of` first.
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".mdown", ".mkd", ".mkdn", ".mdwn", ".qmd", ".rmd")


def source_type(rel: str) -> str:
    """Return the source type of the document at KB-relative path ``rel``."""
    lower = rel.lower()
    if lower.endswith(MARKDOWN_SUFFIXES):
        return "markdown"
    if lower.endswith(".pdf"):
        return "pdf"
    if is_code(lower):
        return "code"
    return "text"


def page_marker(number: int) -> str:
    """The marker line that opens page ``number`` in a PDF's indexed text."""
    return f"[page {number}]"


@dataclass(frozen=True)
class PdfText:
    """A PDF's indexed text and where each page starts.

    Attributes:
        text: the pages' text, each under its ``[page N]`` marker line.
        page_lines: the 1-based line of each page's marker (``page_lines[0]`` is page 1's).
    """

    text: str
    page_lines: tuple[int, ...]

    @property
    def pages(self) -> int:
        """Number of pages in the text."""
        return len(self.page_lines)

    def page_spans(self) -> list[tuple[int, int]]:
        """Each page's body as a 0-based, end-exclusive line range (its marker line left out)."""
        total = self.text.count("\n") + 1
        ends = [*(line - 1 for line in self.page_lines[1:]), total]
        return [(start, end) for start, end in zip(self.page_lines, ends, strict=True)]

    def page_of(self, line: int) -> int:
        """The page holding 1-based ``line`` (a marker line belongs to its page)."""
        return max(bisect.bisect_right(self.page_lines, line), 1)


def pdf_text(pages: Iterable[str]) -> PdfText:
    """Assemble the indexed text of a PDF from its pages' texts (page 1 first)."""
    parts: list[str] = []
    starts: list[int] = []
    line = 1
    for number, page in enumerate(pages, 1):
        body = page.strip("\n")
        block = page_marker(number) + ("\n" + body if body else "")
        starts.append(line)
        parts.append(block)
        line += block.count("\n") + 2  # the block's lines and the blank line after it
    return PdfText("\n\n".join(parts), tuple(starts))


def text_from_chunks(
    rows: Iterable[Mapping[str, Any]], page_lines: Iterable[int], line_count: int
) -> str:
    """Rebuild a PDF's indexed text from its stored chunks and page markers.

    Every non-blank line of the text is in exactly one chunk, so the text comes back line for
    line; pieces of one over-long line (split at sentences or words) are joined with spaces.
    This is how ``read`` serves a PDF without parsing it again (DESIGN §13: no untrusted parser
    in a read-only call).
    """
    lines = [""] * line_count
    for row in rows:
        start, end = int(row["start_line"]), int(row["end_line"])
        if start < 1 or end > line_count:
            continue
        chunk_lines = str(row["text"]).split("\n")
        if start == end and lines[start - 1]:
            lines[start - 1] += " " + chunk_lines[0]
            continue
        for offset, text in enumerate(chunk_lines[: end - start + 1]):
            lines[start - 1 + offset] = text
    for number, line in enumerate(page_lines, 1):
        if 1 <= line <= line_count:
            lines[line - 1] = page_marker(number)
    return "\n".join(lines)
