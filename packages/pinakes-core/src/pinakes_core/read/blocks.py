"""A document body read into blocks: the units the chunker packs (DESIGN §4).

Markdown is parsed with a CommonMark parser (markdown-it-py) into top-level :class:`Block` objects,
each with its line range and what it is (a heading and its path text, content a reader can use,
a paragraph of nothing but links and images, HTML of nothing but tags); an outliner's page is
cut at the headings inside its lists. The line sets :mod:`pinakes_core.index.chunking` leaves
out of chunk text are found here too (link reference definitions, ``<script>`` and ``<style>``
elements, table delimiter rows, an outliner's hidden properties, site-generator markup), and
:func:`heading_lines` gives the headings every heading path (and
:func:`pinakes_core.read.sections.headings`) is read from.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinakes_core.read.containers import unindent_containers
from pinakes_core.read.markup import CODE_ELEMENT, CODE_ELEMENT_END, has_markup, strip_markup

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "HEADING_ATTRS",
    "MAX_HEADING_CHARS",
    "POINTER_SHARE",
    "Block",
    "code_elements",
    "code_lines",
    "first_heading",
    "heading_lines",
    "hidden_properties",
    "markdown_blocks",
    "markdown_parser",
    "reference_lines",
    "table_rules",
    "text_blocks",
    "without_markup",
]

# A heading's trailing attribute list: "{ #id .class key=value }" (Python-Markdown's attr_list,
# Pandoc, Hugo, kramdown's "{: #id}"), ids, classes and key=value pairs only.
_ATTR = r"""(?:[#.][\w:.-]+|[\w:-]+=(?:"[^"]*"|'[^']*'|[^\s"'}]+))"""
HEADING_ATTRS = re.compile(r"\s*\{:?\s*" + _ATTR + r"(?:\s+" + _ATTR + r")*\s*\}\s*$")


# Comment delimiters and tags in a heading's source: "<!-- x -->" reads "x".
_HTML_MARKS = re.compile(r"<!--|-->|</?[A-Za-z][^<>]*>")


# What of an HTML block is markup: comments and tags.
_HTML_ONLY = re.compile(r"<!--.*?(?:-->|$)|</?[A-Za-z][^<>]*>", re.DOTALL)


# The line that opens a link reference definition: "[label]: destination", up to 3 spaces in.
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:")


# Logseq's hidden block properties, each with a value of its own shape (hidden_properties).
_HIDDEN_PROPERTY = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:"
    r"id::[ \t]+[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?:created|updated|last-modified)[-_]at::[ \t]+\d{10,13}"
    r"|collapsed::[ \t]+(?:true|false)"
    r"|card-(?:last-interval|repeats|ease-factor|next-schedule|last-reviewed|last-score)::[ \t]+\S+"
    r"|logseq\.order-list-type::[ \t]+[\w-]+"
    r")[ \t]*$"
)


#: Longest heading text kept in a chunk's heading path (longer ones are cut with "…").
MAX_HEADING_CHARS = 200


@functools.cache
def markdown_parser() -> MarkdownIt:
    """The CommonMark parser (with tables), built at the first Markdown document."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


@dataclass
class Block:
    """A top-level block of a body: its lines and what kind of text it is."""

    start: int  # body line, 0-based inclusive
    end: int  # body line, exclusive
    heading: tuple[int, str] | None = None  # (level, text) for heading blocks
    content: bool = True  # False for headings and thematic breaks: no text a reader can use
    pointer: bool = False  # a paragraph of nothing but images, embeds and links
    markup: bool = False  # an HTML block of nothing but tags and comments


#: A paragraph of images, embeds and links joins the next chunk only while it holds at most
#: this fraction of the token budget (a few images or a "see [[X]]" line, not a gallery).
POINTER_SHARE = 4
# A wikilink or note embed (``[[note]]``, ``![[note#section]]``): its words name another note.
_WIKILINK = re.compile(r"!?\[\[[^\]]*\]\]")


_PROSE = re.compile(r"\w")


# List markers ("-", "*", "+", "1.", "2)") at a line's start: no words of their own.
_BULLETS = re.compile(r"(?m)^[ \t]*(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)")


def _pointer_only(inline: Any) -> bool:
    """Whether a paragraph holds no words of its own: only images, embeds and links.

    Such a paragraph points at text that lives elsewhere (a screenshot, a transcluded section,
    a "see [[Schemas]]" stub); under a heading of its own it would be a chunk that matches by
    its heading and link text and answers nothing.
    """
    words: list[str] = []
    depth = 0  # inside a Markdown link's text
    for child in inline.children or ():  # an image's alt text is its child, not listed here
        if child.type == "link_open":
            depth += 1
        elif child.type == "link_close":
            depth -= 1
        elif child.type in ("text", "code_inline") and depth == 0:
            words.append(child.content)
    return not _PROSE.search(_WIKILINK.sub(" ", " ".join(words)))


def markdown_blocks(lines: list[str], tokens: list[Any] | None = None) -> list[Block]:
    """The top-level blocks of a Markdown body (``tokens``: its parse, if already made)."""
    if tokens is None:
        tokens = markdown_parser().parse("\n".join(lines))
    blocks: list[Block] = []
    outliner = _outliner_page(lines, tokens)
    for i, tok in enumerate(tokens):
        if tok.level != 0 or tok.map is None or tok.nesting == -1:
            continue
        if outliner and tok.type in ("bullet_list_open", "ordered_list_open"):
            outline = _outline_blocks(lines, tokens, i)
            if outline:
                blocks.extend(outline)
                continue
        heading = None
        if tok.type == "heading_open":
            heading = (int(tok.tag[1]), _heading_text(tokens[i + 1]))
        pointer = tok.type == "paragraph_open" and _pointer_only(tokens[i + 1])
        content = heading is None and tok.type != "hr" and not pointer
        if tok.type == "html_block":
            # Tags and comments alone ("<div class=result markdown>", "</div>", "<!-- more
            # -->", "<iframe src=…>") are no text a reader sees: they make no chunk by
            # themselves unless the page holds nothing else (an embed page keeps them, so its
            # title still finds it, whatever their size); <script> and <style> bodies count
            # here, and leave the text by code_elements.
            content = bool(_PROSE.search(_HTML_ONLY.sub(" ", tok.content)))
        markup = tok.type == "html_block" and not content
        blocks.append(Block(tok.map[0], tok.map[1], heading, content, pointer, markup))
    return blocks


def heading_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """The headings chunks take their heading paths from: ``(line, level, text)``, in order.

    ``lines`` is a Markdown body (no frontmatter); lines are 0-based. Setext headings, headings
    inside admonitions and an outline's ``- ## X`` count; a ``#`` line in code does not.
    :func:`pinakes_core.read.sections.headings` reads sections by them, so every hit's heading path
    names a section a read can find.
    """
    blocks = markdown_blocks(unindent_containers(lines))
    return [(b.start, *b.heading) for b in blocks if b.heading is not None]


def _heading_text(inline: Any) -> str:
    """The plain text of a heading's inline token, as its heading path shows it."""
    # Link targets and emphasis markers are dropped.
    # Site-generator markup (a "{{< new-in 0.1 >}}" badge) is no heading text; code is.
    plain = "".join(
        strip_markup(child.content) if child.type == "text" else child.content
        for child in inline.children or ()
        if child.type in ("text", "code_inline")
    )
    # A heading with no visible text (an image, or an HTML comment a site's macros expand,
    # "#### <!-- md:setting config.enabled -->") keeps its source words.
    text = " ".join((plain or _HTML_MARKS.sub(" ", inline.content)).split())
    text = HEADING_ATTRS.sub("", text) or text
    if len(text) > MAX_HEADING_CHARS:
        text = text[: MAX_HEADING_CHARS - 1].rstrip() + "…"
    return text


# A page property line of an outliner (Logseq's "title:: Ideas" above the page's bullets).
_PAGE_PROPERTY = re.compile(r"^[ \t]*[\w.-]+::(?:[ \t]|$)")


def _outliner_page(lines: list[str], tokens: list[Any]) -> bool:
    """Whether the page is an outline: its top-level blocks are lists (after page properties).

    Outliners (Logseq, Roam and Workflowy exports) write every block as a list item. In any
    other note a heading inside a list is the list's text (``- # of guests: 40``), not a
    section of the page.
    """
    lists = False
    for tok in tokens:
        if tok.level != 0 or tok.map is None or tok.nesting == -1:
            continue
        if tok.type in ("bullet_list_open", "ordered_list_open"):
            lists = True
            continue
        first, last = tok.map
        properties = all(_PAGE_PROPERTY.match(line) for line in lines[first:last])
        if lists or tok.type != "paragraph_open" or not properties:
            return False  # a block of its own that is no list, or one after the lists
    return lists


def _outline_blocks(lines: list[str], tokens: list[Any], start: int) -> list[Block]:
    """A top-level list holding headings in its items, cut into blocks at those headings.

    Outliners (:func:`_outliner_page`) write every block as a list item, the page's sections
    too: ``- ## Usage`` then its bullets nested below. Each such heading opens a
    section as a top-level heading does; the list's lines between them are its body. A list
    with no heading inside is one block (an empty list here), as any other.
    """
    end = next(
        j for j in range(start + 1, len(tokens)) if tokens[j].level == 0 and tokens[j].nesting == -1
    )
    first, last = tokens[start].map
    cut: list[Block] = []
    for j in range(start + 1, end):
        tok = tokens[j]
        if tok.type != "heading_open" or tok.map is None:
            continue
        h_start, h_end = tok.map
        if h_start > first:
            body = "\n".join(lines[first:h_start])
            cut.append(Block(first, h_start, content=bool(_PROSE.search(_BULLETS.sub(" ", body)))))
        cut.append(Block(h_start, h_end, (int(tok.tag[1]), _heading_text(tokens[j + 1])), False))
        first = h_end
    if not cut:
        return []
    if first < last:
        body = "\n".join(lines[first:last])
        cut.append(Block(first, last, content=bool(_PROSE.search(_BULLETS.sub(" ", body)))))
    return cut


_CONTAINERS = frozenset(
    {"blockquote_open", "bullet_list_open", "ordered_list_open", "list_item_open"}
)


def reference_lines(lines: list[str], tokens: list[Any]) -> set[int]:
    """Body lines holding link reference definitions (``[label]: url "title"``).

    CommonMark makes no block of a definition, so the lines no leaf block (paragraph, heading,
    code, HTML, table, rule) covers are the definitions, at the top level or inside a list item
    (where docs often indent them under a list's last item).
    """
    covered = [False] * len(lines)
    for tok in tokens:
        if tok.map is None or tok.nesting == -1 or tok.type in _CONTAINERS:
            continue
        for i in range(tok.map[0], min(tok.map[1], len(lines))):
            covered[i] = True
    found: set[int] = set()
    run = False  # inside a run of uncovered lines that opened with a definition
    for i, line in enumerate(lines):
        if covered[i] or not line.strip():
            run = False
            continue
        run = run or bool(_REFERENCE.match(line))
        if run:
            found.add(i)
    return found


def code_elements(tokens: list[Any]) -> set[int]:
    """Body lines of HTML ``<script>`` and ``<style>`` elements: code the browser runs, unseen.

    VitePress and VuePress pages hold Vue ``<script setup>`` and ``<style>`` blocks (VuePress
    category pages, a redirect table at the end of a page); kept, their code was the text of the
    section they closed. An element with no end tag (CommonMark reads it to the end of the
    page) is kept: it may be prose that opens with a tag's name.
    """
    found: set[int] = set()
    for tok in tokens:
        if (
            tok.type == "html_block"
            and tok.map is not None
            and CODE_ELEMENT.match(tok.content)
            and CODE_ELEMENT_END.search(tok.content)
        ):
            found.update(range(*tok.map))
    return found


def table_rules(tokens: list[Any]) -> set[int]:
    """The lines of the tables' delimiter rows (``| --- | :-: |``), the line after the header.

    A formatter (Prettier, an editor's table mode) pads each column's dashes to its widest
    cell: the tokenizer reads every dash as a token, so a wide table's rule alone took a
    chunk's budget (and was split into chunks of nothing but dashes) and filled the embedding
    window with no words.
    """
    return {tok.map[1] for tok in tokens if tok.type == "thead_open" and tok.map}


def code_lines(tokens: list[Any]) -> set[int]:
    """Body lines inside fenced or indented code."""
    return {
        i
        for tok in tokens
        if tok.type in ("fence", "code_block") and tok.map is not None
        for i in range(tok.map[0], tok.map[1])
    }


def hidden_properties(lines: list[str], code: set[int]) -> set[int]:
    """Body lines holding an outliner's bookkeeping properties, outside code.

    Logseq stores a block's reference id, fold state, timestamps, flashcard schedule and list
    numbering as ``key:: value`` lines under the block (``id:: 6103e488-…``,
    ``collapsed:: true``, ``updated-at:: 1609231528688``, ``card-repeats:: 4``) and never shows
    them: they are no text a reader sees, only UUIDs and numbers a search would match. Only
    these keys with values of their own shape go; a user's properties (``type:: [[Feature]]``)
    are text. ``code``: the lines inside code (:func:`code_lines`), which stay.
    """
    return {
        i
        for i, line in enumerate(lines)
        if "::" in line and i not in code and _HIDDEN_PROPERTY.match(line)
    }


def without_markup(lines: list[str], code: set[int]) -> set[int]:
    """Take site-generator markup out of ``lines`` outside code; return the lines it emptied.

    Hugo shortcodes, Liquid and Markdoc tags, kramdown attribute lists and colon-fence
    admonition markers (:mod:`pinakes_core.read.markup`) are no words a reader sees; the words
    between them, an admonition's title and a figure's caption stay. Runs of lines outside code
    are cleaned as one text, so a shortcode whose arguments span lines goes whole; code (a page
    about shortcodes shows them in fences) is never touched. Lines are changed in place, one for
    one; those left blank that were not are returned, to be left out of chunk text.
    """
    if not any(has_markup(line) for line in lines):
        return set()
    emptied: set[int] = set()
    start = 0
    while start < len(lines):
        if start in code:
            start += 1
            continue
        end = start
        while end < len(lines) and end not in code:
            end += 1
        run = "\n".join(lines[start:end])
        cleaned = strip_markup(run)
        if cleaned is not run:
            for i, line in enumerate(cleaned.split("\n"), start):
                if line.strip() != lines[i].strip():
                    if lines[i].strip() and not line.strip():
                        emptied.add(i)
                    lines[i] = line.rstrip()
        start = end
    return emptied


def text_blocks(lines: list[str]) -> list[Block]:
    """The blocks of a plain-text body: its runs of non-blank lines."""
    blocks: list[Block] = []
    start: int | None = None
    for i, line in enumerate(lines):
        if line.strip():
            if start is None:
                start = i
        elif start is not None:
            blocks.append(Block(start, i))
            start = None
    if start is not None:
        blocks.append(Block(start, len(lines)))
    return blocks


def first_heading(text: str) -> str | None:
    """Return the text of the first level-1 heading of a Markdown body, if any."""
    for block in markdown_blocks(text.split("\n")):
        if block.heading and block.heading[0] == 1 and block.heading[1]:
            return block.heading[1]
    return None
