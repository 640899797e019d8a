"""Heading-aware chunking (DESIGN §4).

Markdown is parsed with a CommonMark parser (markdown-it-py), so fenced code whose lines start
with ``#``, setext headings and frontmatter are handled by the grammar rather than by regular
expressions. A chunk never crosses a heading that has a body; a section longer than the token
budget is split at block (paragraph, list, code, table) boundaries, then at line boundaries (a
block into pieces of about equal size, never full ones and a runt), and
a single line longer than the budget at sentence, then word boundaries; text with no boundary at
all (a pasted blob) is cut by tokens as a last resort. Every non-blank line of the body lands in
exactly one chunk, in order, but link reference definitions (``[label]: https://…`` lines, which
a reader never sees: the page shows the label where it is used), which are left out of chunk
text. Inline ``data:`` URIs (pasted images) are shortened to their media type first: their
payload is not text anyone searches; a table's delimiter row keeps three dashes a column. A
heading's attribute list (``## Setup { #setup .new }``, as Python-Markdown, Pandoc and kramdown
write it) is part of neither its heading path nor chunk text: the page does not show it, and a
site that gives every heading an id would put one in every result's snippet. Site-generator
markup outside code (Hugo shortcodes, Liquid tags, ``:::note`` and ``/// note`` fences:
:mod:`pinakes_core.read.markup`) leaves chunk text and heading paths; the words between it stay.

No chunk is only headings, rules or HTML tags and comments (issue 9): a reader shown ``## Details`` alone learns nothing,
and such a chunk matches any query that names the heading. A heading with no body of its own
(``## Commands`` directly followed by ``### ls``) joins the chunk that follows it, which keeps
the heading path of the section that has the text; body-less headings at the very end join the
chunk before them; a document that is nothing but headings has no chunks (like one that is
only frontmatter: its title is all there is, and every chunk carries the title anyway).

The work is in three modules: :mod:`pinakes_core.read.blocks` reads a body into blocks and
finds the lines chunk text leaves out, :mod:`pinakes_core.index.packer` packs the blocks' lines
into :class:`~pinakes_core.index.packer.Chunk` objects under the budget, and this module runs
them in order (:func:`chunk_document`, :func:`chunk_sections`), bounds a document's chunks and
says what text each chunk is embedded as (:func:`embed_text`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from pinakes_core.index.packer import CHARS_PER_TOKEN_CAP, Chunk, Packer, char_cost, within_cap
from pinakes_core.index.tokens import TokenCounter
from pinakes_core.models import heading_trail
from pinakes_core.read.blocks import (
    HEADING_ATTRS,
    POINTER_SHARE,
    code_elements,
    code_lines,
    hidden_properties,
    markdown_blocks,
    markdown_parser,
    reference_lines,
    table_rules,
    text_blocks,
    without_markup,
)
from pinakes_core.read.containers import unindent_containers

if TYPE_CHECKING:
    pass

__all__ = [
    "CHUNKER_VERSION",
    "chunk_document",
    "chunk_sections",
    "chunking_id",
    "embed_text",
    "heading_trail",
    "with_description",
]

#: Bump whenever a change to this module changes the chunks it makes: a store chunked by another
#: version (or another ``chunk_tokens``) is re-chunked at the next sync, reusing the vectors of
#: chunk texts that did not change. 2: body-less headings join a neighbouring chunk (issue 9).
#: 3: so do headings whose body is only images, note embeds and links. 4: link reference
#: definitions leave chunk text; heading attribute lists leave heading paths. 5: so do comment
#: delimiters; HTML blocks of nothing but tags and comments are no content. 6: headings carried
#: onto a long line shrink the budget of its first piece only. 7: MkDocs admonition and tab
#: bodies are parsed as Markdown; headings inside a top-level list (an outliner's ``- ## X``)
#: open sections; Logseq's hidden block properties and long URL query strings leave chunk text.
#: 8: long URL queries stay inside code and inline code; a long description is cut as a long
#: line is; a description that is not text (``summary: false``, a number, a date) is none.
#: 9: site-generator markup (Hugo shortcodes, Liquid and Markdoc tags, kramdown attribute
#: lists, colon-fence markers; :mod:`pinakes_core.read.markup`) leaves chunk text, outside code.
#: 10: a macro call's quoted arguments stay as the words the page shows (MDN's
#: ``{{jsxref("Array")}}`` reads "Array"; it was removed whole). 11: a table's delimiter row
#: keeps three dashes a column (Prettier pads it to the widest cell). 12: pymdownx.blocks fences
#: (``/// note | Title`` … ``///``) leave chunk text but their titles; a mkdocstrings directive
#: (``::: fastapi.FastAPI``) keeps its whole identifier (it lost the part before the first dot).
#: 13: a heading's attribute list leaves chunk text too. 14: include directives (``--8<--``,
#: ``{!file!}``, ``{* file *}``, ``{{#include}}``) leave chunk text. 15: a block over the budget
#: is split into pieces of about equal size, not full ones and a runt.
#: 16: an MDX-read page's ``<script>`` and ``<style>`` elements leave chunk text whole
#: (VitePress's ``<script setup>`` imports took its ``</script>`` and the rest of the page became
#: one HTML block: no headings, no title).
#: 17: ``<script>`` and ``<style>`` elements leave chunk text in any Markdown page.
#: 18: MyST prose directives fenced with backticks are read as Markdown, not code; their
#: fences, MyST option lines (``:class: x``) and targets (``(label)=``) leave chunk text.
#: 19: so do options written as a YAML block (``---`` … ``---``) after a directive's opener.
#: 20: body-less headings (and pointer-only sections) carried onto a chunk hold at most half
#: the character cap, the oldest of more are left out (100,000 empty headings made one chunk of a
#: million characters, after ten minutes of summing the run again at every heading); no chunk
#: passes the character cap: runs of blank lines go, then what is past it (issue 34).
CHUNKER_VERSION = 20
_TITLE_SEP = " › "
# data:[<media type>][;params],<payload>: the payload goes, the media type stays.
_DATA_URI = re.compile(
    r"\b(data:(?:[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+(?:=[\w.+%-]*)?)*),[^\s)\"'<>\]]{64,}"
)


# A column's dashes in a table's delimiter row ("| :-----: |"), past the three that make it one.
_RULE_DASHES = re.compile(r"-{4,}")


# What ends a URL in running text (_cut_long_queries); kept as separators by re.split.
_URL_END = re.compile(r"""([\s()<>\[\]"']+)""")


#: A URL's query string of this many characters or more leaves chunk text (_cut_long_queries).
LONG_QUERY_CHARS = 64


def with_description(
    chunks: list[Chunk],
    description: str | None,
    lines: tuple[int, int],
    *,
    title: str,
    budget: int,
    count: TokenCounter,
) -> list[Chunk]:
    """``chunks`` led by a chunk holding the document's frontmatter ``description``.

    A docs page's description (``description:``, ``summary:``, Dendron's ``desc:``) is its
    author's one-paragraph account of what the page covers, often in words the body never uses,
    and it sits in the frontmatter, which is never body text. It becomes a chunk of its own, on
    the lines its key occupies (``lines``), without a heading path, at most ``budget`` tokens
    (cut at a word). Nothing is added when it only repeats the title or the first chunk's text
    already holds it (pages that also open with it). A long one keeps its first piece as a
    long body line would be cut: whole sentences, then words, within the character cap.
    """
    text = " ".join((description or "").split())
    folded = text.casefold()
    if not text or folded == title.strip().casefold():
        return chunks
    if chunks and folded in " ".join(chunks[0].text.split()).casefold():
        return chunks
    packer = Packer([text], 0, budget, count)
    cost, tokens = packer.measure(text)
    if cost > budget:  # its first piece, cut as a long body line is (sentences, words, blobs)
        packer.emit_long_line((), 0)
        _, text, _, _, tokens = packer.out[0]
    lead = Chunk(0, (), text, lines[0], lines[1], tokens)
    return [lead, *(replace(c, ordinal=c.ordinal + 1) for c in chunks)]


def _cut_query(word: str) -> str:
    """``word`` without the query of a URL in it when that query is long (see below)."""
    at = word.find("://")
    if at < 1 or not (word[at - 1].isalnum() and word[at - 1].isascii()):
        return word
    query = word.find("?", at + 4)  # after a host of one character at least
    fragment = word.find("#", at + 3)
    if query < 0 or 0 <= fragment < query or len(word) - query - 1 < LONG_QUERY_CHARS:
        return word
    return word[:query] + "?…"


def _cut_long_queries(line: str) -> str:
    """``line`` with the long query strings of its URLs cut to ``?…``, outside inline code.

    A query of :data:`LONG_QUERY_CHARS` characters or more is a signed address's expiry,
    signature and key (a CDN or S3 image pasted from an app) or a tracking blob: the address
    stays, the query goes. Text between backticks is code a user wrote (an API call's
    parameters) and stays. Linear in the line: split at what ends a URL, no backtracking
    search (a pattern anchored anywhere in a 100 KB line once took a minute).
    """
    if "://" not in line or "?" not in line:
        return line
    spans = line.split("`")
    for i in range(0, len(spans), 2):  # even spans are outside `code`
        if "://" in spans[i] and "?" in spans[i]:
            spans[i] = "".join(_cut_query(part) for part in _URL_END.split(spans[i]))
    return "`".join(spans)


def chunking_id(budget: int) -> str:
    """The store's record of how its chunks were made: chunker version and token budget."""
    return f"{CHUNKER_VERSION}:{budget}"


def embed_text(title: str, chunk: Chunk) -> str:
    """Return the text that is embedded for ``chunk``: ``title › heading path`` then the text.

    A leading heading equal to the title (the usual H1) is not repeated.
    """
    return _TITLE_SEP.join(heading_trail(title, chunk.heading_path)) + "\n" + chunk.text


def bound_chunks(chunks: list[Chunk], *, limit: int, budget: int) -> tuple[list[Chunk], str | None]:
    """At most ``limit`` chunks: small neighbours merged first, then the rest left out.

    A note of 100,000 short sections made 100,000 chunks (hours of embedding). Past ``limit``
    (``[sync] max_chunks_per_doc``), neighbouring chunks are merged while the merged one stays
    within ``budget`` tokens and the character cap (its heading path: what the two share); if
    that is still too many, the chunks past ``limit`` are not indexed. Returns the chunks and,
    when anything changed, one sentence saying what.
    """
    if len(chunks) <= limit:
        return chunks, None
    cap = budget * CHARS_PER_TOKEN_CAP
    merged: list[Chunk] = []
    for chunk in chunks:
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.tokens + chunk.tokens <= budget
            and len(last.text) + 2 + len(chunk.text) <= cap
        ):
            shared = 0
            for a, b in zip(last.heading_path, chunk.heading_path, strict=False):
                if a != b:
                    break
                shared += 1
            merged[-1] = replace(
                last,
                heading_path=last.heading_path[:shared],
                text=f"{last.text}\n\n{chunk.text}",
                end_line=chunk.end_line,
                tokens=last.tokens + chunk.tokens,
                page_end=chunk.page_end,
            )
        else:
            merged.append(chunk)
    kept = [replace(c, ordinal=i) for i, c in enumerate(merged[:limit])]
    note = f"{len(chunks):,} chunks, over [sync] max_chunks_per_doc = {limit:,}: small sections were merged into {len(merged):,}"
    if len(merged) > limit:
        left = merged[limit:]
        note += (
            f", and the last {len(left):,} (lines {left[0].start_line}-{left[-1].end_line}) "
            "are not indexed"
        )
    return kept, note


def chunk_document(
    text: str,
    *,
    markdown: bool,
    budget: int,
    count: TokenCounter,
    skip_lines: int = 0,
    notes: list[str] | None = None,
) -> list[Chunk]:
    """Split a document into heading-bounded chunks of at most ``budget`` tokens.

    Args:
        text: the whole document (newlines normalised to LF).
        markdown: parse as Markdown (headings, code fences); otherwise blank-line paragraphs.
        budget: the chunk size limit in tokens (``[sync] chunk_tokens``).
        count: the token counter.
        skip_lines: number of leading lines (frontmatter) that are not body text.
        notes: when given, a line is appended for any text left out to keep the cap below.

    Returns:
        The chunks in document order; none is longer than 16 characters per budgeted token,
        and none is over the budget but by the tokens of body-less headings carried onto it.
    """
    all_lines = text.split("\n")
    lines = [
        _DATA_URI.sub(r"\1,…", line) if "data:" in line else line for line in all_lines[skip_lines:]
    ]
    if markdown:
        # MkDocs admonitions and content tabs are read with their four-space bodies moved
        # left (else CommonMark makes code of them); the text stays the document's own.
        parsed = unindent_containers(lines)
        tokens = markdown_parser().parse("\n".join(parsed))
        blocks = markdown_blocks(parsed, tokens)
        code = code_lines(tokens)
        dropped = reference_lines(parsed, tokens) | hidden_properties(lines, code)
        dropped |= without_markup(lines, code)
        elements = code_elements(tokens)
        if any(b.content and b.start not in elements for b in blocks):
            dropped |= elements  # a page of nothing else keeps them, as it keeps other markup
        for block in blocks:
            if block.heading is not None:  # "## Setup { #setup }" reads "## Setup" (see above)
                for i in range(block.start, block.end):
                    bare = HEADING_ATTRS.sub("", lines[i])
                    if bare.strip("#= \t-"):  # "## {#only-an-id}" keeps it, as its path does
                        lines[i] = bare
        rules = table_rules(tokens)
    else:
        blocks, dropped, code, rules = text_blocks(lines), set(), set(), set()
    lines = [line if i in code else _cut_long_queries(line) for i, line in enumerate(lines)]
    for i in rules:
        lines[i] = _RULE_DASHES.sub("---", lines[i])
    for i in dropped:
        lines[i] = ""  # costs nothing, is no content, and is left out of the text
    # A heading whose body only points elsewhere (images, embeds, links) joins the next chunk
    # like a body-less one, if that body is small: a long gallery or link list is text to split
    # like any other (carried whole, it would push the next chunk far over the budget). A page
    # of nothing else keeps them as its text.
    limit = budget // POINTER_SHARE
    for block in blocks:
        if block.pointer:
            text = "\n".join(lines[block.start : block.end])
            block.content = char_cost(text) > limit or count(text) > limit  # chars first: cheap
    if not any(block.content for block in blocks):
        for block in blocks:
            block.content = block.content or block.pointer or block.markup
    content = [False] * len(lines)
    for block in blocks:
        if block.content:
            for i in range(block.start, block.end):
                content[i] = bool(lines[i].strip())
    headings = {i for b in blocks if b.heading for i in range(b.start, b.end)}
    packer = Packer(lines, skip_lines, budget, count, content, dropped, headings)

    stack: list[tuple[int, str]] = []
    path: tuple[str, ...] = ()
    units: list[tuple[int, int]] = []
    section_start = 0
    for index, block in enumerate(blocks):
        unit_end = blocks[index + 1].start if index + 1 < len(blocks) else len(lines)
        if block.heading is not None:
            if units:
                packer.pack(path, units)
            level, title = block.heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            path = tuple(t for _, t in stack)
            units = [(block.start, unit_end)]
            section_start = block.start
            continue
        start = block.start if units else section_start
        units.append((start, unit_end))
    if units:
        packer.pack(path, units)
    packer.finish()
    if packer.left_out and notes is not None:
        notes.append(
            f"{packer.left_out:,} lines of headings with no text under them are not indexed: "
            "more followed one another than a chunk has room for"
        )
    return within_cap(packer.out, budget, count, notes)


def chunk_sections(
    text: str,
    sections: Sequence[tuple[tuple[str, ...], int, int]],
    *,
    budget: int,
    count: TokenCounter,
    notes: list[str] | None = None,
) -> list[Chunk]:
    """Chunk ``text`` section by section: no chunk crosses a section's bounds.

    Used for code (one section per top-level definition, :mod:`pinakes_core.read.code`). Inside a
    section, blank-line blocks are packed into windows of at most ``budget`` tokens, an
    oversize block split at lines and an oversize line at sentences, then words, exactly as
    :func:`chunk_document` does.

    Args:
        text: the whole document (newlines normalised to LF).
        sections: ``(heading path, first line, end line)``, 0-based and end-exclusive, in order.
        budget: the chunk size limit in tokens.
        count: the token counter.
        notes: as for :func:`chunk_document`.
    """
    lines = text.split("\n")
    packer = Packer(lines, 0, budget, count)
    for path, start, end in sections:
        units = [(start + b.start, start + b.end) for b in text_blocks(lines[start:end])]
        if units:
            packer.pack(path, units)
    return within_cap(packer.out, budget, count, notes)
