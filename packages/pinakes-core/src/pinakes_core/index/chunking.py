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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pinakes_core.index.tokens import TokenCounter
from pinakes_core.models import heading_trail
from pinakes_core.read.containers import unindent_containers
from pinakes_core.read.markup import CODE_ELEMENT, CODE_ELEMENT_END, has_markup, strip_markup

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = [
    "CHUNKER_VERSION",
    "Chunk",
    "chunk_document",
    "chunk_sections",
    "chunking_id",
    "embed_text",
    "first_heading",
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
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# A unit of text costs at least one token per this many characters. Real text runs 3 to 6
# characters per token, but the tokenizer counts a "word" of over 100 characters (a blob of
# base64 or minified code) as one unknown token, which would let one chunk grow without bound.
_CHARS_PER_TOKEN_CAP = 16
# Three or more line breaks with nothing but spaces between them (a run of blank lines).
_BLANK_RUN = re.compile(r"\n(?:[ \t\r\f\v]*\n){2,}")
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
# A heading's trailing attribute list: "{ #id .class key=value }" (Python-Markdown's attr_list,
# Pandoc, Hugo, kramdown's "{: #id}"), ids, classes and key=value pairs only.
_ATTR = r"""(?:[#.][\w:.-]+|[\w:-]+=(?:"[^"]*"|'[^']*'|[^\s"'}]+))"""
_HEADING_ATTRS = re.compile(r"\s*\{:?\s*" + _ATTR + r"(?:\s+" + _ATTR + r")*\s*\}\s*$")
# Comment delimiters and tags in a heading's source: "<!-- x -->" reads "x".
_HTML_MARKS = re.compile(r"<!--|-->|</?[A-Za-z][^<>]*>")
# What of an HTML block is markup: comments and tags.
_HTML_ONLY = re.compile(r"<!--.*?(?:-->|$)|</?[A-Za-z][^<>]*>", re.DOTALL)
# The line that opens a link reference definition: "[label]: destination", up to 3 spaces in.
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:")
# Logseq's hidden block properties, each with a value of its own shape (_hidden_properties).
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


@dataclass(frozen=True)
class Chunk:
    """One retrieval unit.

    Attributes:
        ordinal: position in the document, from 0.
        heading_path: the headings enclosing the chunk, outermost first.
        text: the chunk's source text (trimmed of blank lines at both ends).
        start_line: first line in the file, 1-based (frontmatter lines count).
        end_line: last line in the file, 1-based, inclusive.
        tokens: WordPiece token count of ``text``.
        page_start: first page the chunk's text is on (paged sources: PDF), else ``None``.
        page_end: last page, inclusive.
    """

    ordinal: int
    heading_path: tuple[str, ...]
    text: str
    start_line: int
    end_line: int
    tokens: int
    page_start: int | None = None
    page_end: int | None = None


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
    packer = _Packer([text], 0, budget, count)
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


@functools.cache
def _parser() -> MarkdownIt:
    """The CommonMark parser (with tables), built at the first Markdown document."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


@dataclass
class _Block:
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


def _markdown_blocks(lines: list[str], tokens: list[Any] | None = None) -> list[_Block]:
    if tokens is None:
        tokens = _parser().parse("\n".join(lines))
    blocks: list[_Block] = []
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
            # here, and leave the text by _code_elements.
            content = bool(_PROSE.search(_HTML_ONLY.sub(" ", tok.content)))
        markup = tok.type == "html_block" and not content
        blocks.append(_Block(tok.map[0], tok.map[1], heading, content, pointer, markup))
    return blocks


def heading_lines(lines: list[str]) -> list[tuple[int, int, str]]:
    """The headings chunks take their heading paths from: ``(line, level, text)``, in order.

    ``lines`` is a Markdown body (no frontmatter); lines are 0-based. Setext headings, headings
    inside admonitions and an outline's ``- ## X`` count; a ``#`` line in code does not.
    :func:`pinakes_core.read.sections.headings` reads sections by them, so every hit's heading path
    names a section a read can find.
    """
    blocks = _markdown_blocks(unindent_containers(lines))
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
    text = _HEADING_ATTRS.sub("", text) or text
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


def _outline_blocks(lines: list[str], tokens: list[Any], start: int) -> list[_Block]:
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
    cut: list[_Block] = []
    for j in range(start + 1, end):
        tok = tokens[j]
        if tok.type != "heading_open" or tok.map is None:
            continue
        h_start, h_end = tok.map
        if h_start > first:
            body = "\n".join(lines[first:h_start])
            cut.append(_Block(first, h_start, content=bool(_PROSE.search(_BULLETS.sub(" ", body)))))
        cut.append(_Block(h_start, h_end, (int(tok.tag[1]), _heading_text(tokens[j + 1])), False))
        first = h_end
    if not cut:
        return []
    if first < last:
        body = "\n".join(lines[first:last])
        cut.append(_Block(first, last, content=bool(_PROSE.search(_BULLETS.sub(" ", body)))))
    return cut


_CONTAINERS = frozenset(
    {"blockquote_open", "bullet_list_open", "ordered_list_open", "list_item_open"}
)


def _references(lines: list[str], tokens: list[Any]) -> set[int]:
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


def _code_elements(tokens: list[Any]) -> set[int]:
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


def _table_rules(tokens: list[Any]) -> set[int]:
    """The lines of the tables' delimiter rows (``| --- | :-: |``), the line after the header.

    A formatter (Prettier, an editor's table mode) pads each column's dashes to its widest
    cell: the tokenizer reads every dash as a token, so a wide table's rule alone took a
    chunk's budget (and was split into chunks of nothing but dashes) and filled the embedding
    window with no words.
    """
    return {tok.map[1] for tok in tokens if tok.type == "thead_open" and tok.map}


def _code_lines(tokens: list[Any]) -> set[int]:
    """Body lines inside fenced or indented code."""
    return {
        i
        for tok in tokens
        if tok.type in ("fence", "code_block") and tok.map is not None
        for i in range(tok.map[0], tok.map[1])
    }


def _hidden_properties(lines: list[str], code: set[int]) -> set[int]:
    """Body lines holding an outliner's bookkeeping properties, outside code.

    Logseq stores a block's reference id, fold state, timestamps, flashcard schedule and list
    numbering as ``key:: value`` lines under the block (``id:: 6103e488-…``,
    ``collapsed:: true``, ``updated-at:: 1609231528688``, ``card-repeats:: 4``) and never shows
    them: they are no text a reader sees, only UUIDs and numbers a search would match. Only
    these keys with values of their own shape go; a user's properties (``type:: [[Feature]]``)
    are text. ``code``: the lines inside code (:func:`_code_lines`), which stay.
    """
    return {
        i
        for i, line in enumerate(lines)
        if "::" in line and i not in code and _HIDDEN_PROPERTY.match(line)
    }


def _without_markup(lines: list[str], code: set[int]) -> set[int]:
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


def _text_blocks(lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    start: int | None = None
    for i, line in enumerate(lines):
        if line.strip():
            if start is None:
                start = i
        elif start is not None:
            blocks.append(_Block(start, i))
            start = None
    if start is not None:
        blocks.append(_Block(start, len(lines)))
    return blocks


def first_heading(text: str) -> str | None:
    """Return the text of the first level-1 heading of a Markdown body, if any."""
    for block in _markdown_blocks(text.split("\n")):
        if block.heading and block.heading[0] == 1 and block.heading[1]:
            return block.heading[1]
    return None


class _Packer:
    """Greedy packing of line ranges into windows of at most ``budget`` tokens.

    A window that holds no content line (only headings, rules and markup) is never a chunk: its
    lines join the chunk before when they hold no heading and that chunk is of the same section
    (markup closing the section), else they are carried onto the next chunk, or, at the end of
    the document, onto the last one. Joined or carried lines may take that chunk over the budget
    by their own (few) tokens.
    """

    def __init__(
        self,
        lines: list[str],
        offset: int,
        budget: int,
        count: TokenCounter,
        content: list[bool] | None = None,
        dropped: set[int] | None = None,
        headings: set[int] | None = None,
    ) -> None:
        self.lines = lines
        self.dropped = dropped or set()
        self.headings = headings or set()  # body lines of headings
        self.offset = offset
        self.budget = budget
        self.count = count
        measured = [self.measure(line) if line.strip() else (0, 0) for line in lines]
        self.costs = [cost for cost, _ in measured]
        self.tokens = [tokens for _, tokens in measured]
        self.content = content if content is not None else [bool(line.strip()) for line in lines]
        # Body-less headings waiting for a chunk: [carry, carry_end) in body lines, and what
        # they cost (kept as they grow: summing the run again at every heading was quadratic,
        # ten minutes for 100,000 empty headings).
        self.carry: int | None = None
        self.carry_end = 0
        self.carry_cost = 0
        self.carry_chars = 0
        #: Body-less heading lines left out because too many were waiting.
        self.left_out = 0
        self.out: list[tuple[tuple[str, ...], str, int, int, int]] = []

    def measure(self, text: str) -> tuple[int, int]:
        """Return what ``text`` counts against the budget, and its tokens.

        The cost is its token count, or more for very long words (see ``_CHARS_PER_TOKEN_CAP``).
        Text over budget by its length alone is not tokenized (a multi-megabyte line would take
        seconds) and its tokens are returned as 0: such text is never emitted whole.
        """
        chars = _char_cost(text)
        if chars > self.budget:
            return chars, 0
        tokens = self.count(text)
        return max(tokens, chars), tokens

    def emit(self, path: tuple[str, ...], start: int, end: int) -> None:
        lo, hi = start, end
        while lo < hi and not self.lines[lo].strip():
            lo += 1
        while hi > lo and not self.lines[hi - 1].strip():
            hi -= 1
        if lo == hi:
            return
        if not any(self.content[lo:hi]):
            if (
                self.carry is None
                and self.out
                and self.out[-1][0] == path
                and self.headings.isdisjoint(range(lo, hi))
            ):
                # Markup closing a section (a "</div>" left after the budget cut) stays with
                # the section's text before it rather than leading the next section's chunk.
                last_path, last_text, start, _, tokens = self.out[-1]
                self.out[-1] = (
                    last_path,
                    last_text + "\n" + self.join(self.out[-1][3] - self.offset, hi),
                    start,
                    hi + self.offset,
                    tokens + sum(self.tokens[lo:hi]),
                )
                return
            if self.carry is None:
                self.carry, self.carry_end, self.carry_cost, self.carry_chars = lo, lo, 0, 0
            self.carry_cost += sum(self.costs[self.carry_end : hi])
            self.carry_chars += sum(len(line) + 1 for line in self.lines[self.carry_end : hi])
            self.carry_end = hi
            return
        if self.carry is not None:
            self.trim_carry()
            lo, self.carry = self.carry, None
        text = self.join(lo, hi)
        self.out.append(
            (path, text, lo + 1 + self.offset, hi + self.offset, sum(self.tokens[lo:hi]))
        )

    def trim_carry(self) -> None:
        """Leave out the oldest carried lines past half a chunk's characters (counted).

        They are about to lead a chunk, and the other half is for its text: a page of 100,000
        empty headings made one chunk of a million characters.
        """
        assert self.carry is not None
        while self.carry_chars > self.budget * _CHARS_PER_TOKEN_CAP // 2 and (
            self.carry < self.carry_end
        ):
            self.carry_cost -= self.costs[self.carry]
            self.carry_chars -= len(self.lines[self.carry]) + 1
            self.left_out += bool(self.lines[self.carry].strip())
            self.carry += 1

    def join(self, lo: int, hi: int) -> str:
        """The text of body lines ``[lo, hi)``, without the dropped ones."""
        if not self.dropped or self.dropped.isdisjoint(range(lo, hi)):
            return "\n".join(self.lines[lo:hi])
        kept: list[str] = []
        gap = False  # just past dropped lines
        for i in range(lo, hi):
            if i in self.dropped:
                gap = True
                continue
            # A gap left by dropped lines is one blank line, as between any two blocks.
            if gap and not self.lines[i].strip() and (not kept or not kept[-1].strip()):
                continue
            gap = False
            kept.append(self.lines[i])
        while kept and not kept[-1].strip():
            kept.pop()
        return "\n".join(kept)

    def emit_long_line(self, path: tuple[str, ...], line: int) -> None:
        # Sentences first, words only for a sentence that alone exceeds the budget, and a cut
        # by tokens only for a word that alone exceeds it. Parts are joined again with single
        # spaces, where the tokenizer splits words anyway, so a piece's tokens are the sum of
        # its parts' tokens. Body-less headings carried onto the first piece take their room
        # from that piece's budget (with one unit per joining newline) unless they would leave
        # it less than half; the first piece holds at least one part, so the headings take it
        # over the budget by at most their own tokens. (They once shrank every piece's budget: seven headings before a long list
        # item cut the item into one-character chunks.)
        budget = self.budget
        first = budget
        if self.carry is not None:
            self.trim_carry()
            first -= sum(self.costs[self.carry : line]) + (line - self.carry)
            if first < budget // 2:  # headings alone nearly fill it: they lead a full piece
                first = budget
        parts: list[tuple[str, int, int]] = []
        for sentence in _SENTENCE_END.split(self.lines[line].strip()):
            cost, tokens = self.measure(sentence)
            if cost <= budget:
                if sentence:
                    parts.append((sentence, cost, tokens))
                continue
            for word in sentence.split():
                cost, tokens = self.measure(word)
                if cost <= budget:
                    parts.append((word, cost, tokens))
                else:
                    parts.extend(self.hard_split(word, budget))
        if parts and parts[0][1] > first:
            # The first part alone would take the first piece past its room (a blob cut to
            # the full budget): it is cut to that room, so the piece keeps the character cap.
            parts[:1] = self.hard_split(parts[0][0], first)
        piece: list[str] = []
        used = counted = 0
        limit = first
        for part, cost, tokens in parts:
            if piece and used + cost > limit:
                self._piece(path, line, piece, counted)
                piece, used, counted, limit = [], 0, 0, budget
            piece.append(part)
            used += cost
            counted += tokens
        if piece:
            self._piece(path, line, piece, counted)

    def hard_split(self, text: str, budget: int | None = None) -> list[tuple[str, int, int]]:
        """Cut text that has no word boundary into pieces within ``budget`` (last resort).

        Each piece is sized from the last one's characters per token, so a long blob costs
        about one token count per piece. ``budget`` defaults to the packer's. Returns
        ``(piece, cost, tokens)`` triples.
        """
        budget = self.budget if budget is None else budget
        widest = budget * _CHARS_PER_TOKEN_CAP
        pieces = []
        start, width = 0, widest
        while start < len(text):
            piece = text[start : start + width]
            cost, tokens = self.measure(piece)
            if cost > budget and width > 1:
                width = max(1, min(width // 2 + 1, int(width * budget / cost * 0.95)))
                continue
            pieces.append((piece, cost, tokens))
            start += len(piece)
            if cost < budget * 0.8:
                width = min(widest, width + width // 4 + 1)
        return pieces

    def _piece(self, path: tuple[str, ...], line: int, words: list[str], tokens: int) -> None:
        number = line + 1 + self.offset
        text = " ".join(words)
        start = number
        if self.carry is not None:  # body-less headings lead the first piece
            text = "\n".join([self.join(self.carry, line), text]) if self.carry < line else text
            tokens += sum(self.tokens[self.carry : line])
            start, self.carry = self.carry + 1 + self.offset, None
        self.out.append((path, text, start, number, tokens))

    def pack(self, path: tuple[str, ...], units: list[tuple[int, int]]) -> None:
        """Pack consecutive units (line ranges) into windows, splitting oversize units."""
        win_start: int | None = None
        win_end = 0
        used = 0
        if self.carry is not None:  # headings carried from a body-less section open the window
            self.trim_carry()
            win_start, win_end, self.carry = self.carry, self.carry_end, None
            used = self.carry_cost
        for start, end in units:
            cost = sum(self.costs[start:end])
            if (
                win_start is not None
                and used + cost > self.budget
                and cost <= self.budget
                and any(self.content[win_start:win_end])
            ):
                self.emit(path, win_start, win_end)
                win_start, used = None, 0
            if cost <= self.budget:
                if win_start is None:
                    win_start = start
                win_end, used = end, used + cost
                continue
            # An oversize unit: split at line boundaries (the open window, e.g. a heading line,
            # joins the first piece), and a single oversize line at sentences, then words. The
            # pieces are of about equal size (a line goes to the next piece once its middle
            # passes the share), not full ones and a runt: a long code block once left "};\n}"
            # as a chunk of its own, a long table its last two rows.
            line_start = start if win_start is None else win_start
            line_used = used
            win_start = None
            left = used + cost  # what the pieces from line_start on share
            share = _even_share(left, self.budget)
            for line in range(start, end):
                line_cost = self.costs[line]
                if line_cost > self.budget and self.content[line]:
                    self.emit(path, line_start, line)
                    self.emit_long_line(path, line)
                    left -= line_used + line_cost
                    line_start, line_used = line + 1, 0
                    share = _even_share(left, self.budget)
                    continue
                over = line_used + line_cost > self.budget or line_used + line_cost / 2 > share
                if over and any(self.content[line_start:line]):
                    self.emit(path, line_start, line)
                    left -= line_used
                    share = _even_share(left, self.budget)
                    line_start, line_used = line, 0
                line_used += line_cost
            if line_start < end:
                win_start, win_end, used = line_start, end, line_used
            else:
                used = 0
        if win_start is not None:
            self.emit(path, win_start, win_end)

    def finish(self) -> None:
        """Attach body-less headings left at the end of the document to the last chunk."""
        if self.carry is None or not self.out:
            self.carry = None  # a document of nothing but headings has no chunks
            return
        path, text, start, end, tokens = self.out[-1]
        tail = range(end - self.offset, self.carry_end)  # body lines after the last chunk
        room = self.budget * _CHARS_PER_TOKEN_CAP - len(text)
        stop = tail.stop
        if sum(len(self.lines[i]) + 1 for i in tail) > room:
            # Past the character cap: the first lines that fit stay (the chunk stays a slice).
            stop = tail.start
            while stop < tail.stop and room > len(self.lines[stop]):
                room -= len(self.lines[stop]) + 1
                stop += 1
            while stop > tail.start and not self.lines[stop - 1].strip():
                stop -= 1

        # The count of lines left out: those trimmed from this run before and now kept
        # (from the start, as they fit) are not, those past what fits are.
        def shown(lo: int, hi: int) -> int:
            return sum(bool(self.lines[i].strip()) for i in range(lo, hi))

        carry = self.carry
        self.left_out += shown(max(stop, carry), tail.stop) - shown(tail.start, min(stop, carry))
        self.carry_end, tail = stop, range(tail.start, stop)
        if tail:
            text = "\n".join([text, self.join(tail.start, tail.stop)])
        tokens += sum(self.tokens[i] for i in tail)
        self.out[-1] = (path, text, start, self.carry_end + self.offset, tokens)
        self.carry = None


def _within_cap(
    out: list[tuple[tuple[str, ...], str, int, int, int]],
    budget: int,
    count: TokenCounter,
    notes: list[str] | None,
) -> list[Chunk]:
    """The packed chunks as :class:`Chunk`, none past ``budget`` × 16 characters.

    The packer keeps to that cap but for what it joins to a chunk beyond its budget (carried
    headings, runs of blank lines, which cost nothing). Such a chunk loses its blank-line runs
    first, then whatever is past the cap, with a line in ``notes``: it is a last resort.
    """
    cap = budget * _CHARS_PER_TOKEN_CAP
    chunks = []
    for i, (path, text, start, end, tokens) in enumerate(out):
        if len(text) > cap:
            text = _BLANK_RUN.sub("\n\n", text)
            if len(text) > cap:
                cut = text[:cap]
                newline = cut.rfind("\n")
                cut = cut[:newline] if newline > cap // 2 else cut
                if notes is not None:
                    notes.append(
                        f"a chunk at lines {start}-{end} is {len(text):,} characters, over the "
                        f"cap of {cap:,} ([sync] chunk_tokens × 16): its last "
                        f"{len(text) - len(cut):,} characters are not indexed"
                    )
                text = cut
            tokens = count(text)
        chunks.append(Chunk(i, path, text, start, end, tokens))
    return chunks


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
    cap = budget * _CHARS_PER_TOKEN_CAP
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


def _even_share(total: int, budget: int) -> float:
    """The size of each of the fewest pieces of at most ``budget`` that ``total`` splits into."""
    return total / max(1, -(-total // budget))


def _char_cost(text: str) -> int:
    return -(-len(text) // _CHARS_PER_TOKEN_CAP)


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
        tokens = _parser().parse("\n".join(parsed))
        blocks = _markdown_blocks(parsed, tokens)
        code = _code_lines(tokens)
        dropped = _references(parsed, tokens) | _hidden_properties(lines, code)
        dropped |= _without_markup(lines, code)
        elements = _code_elements(tokens)
        if any(b.content and b.start not in elements for b in blocks):
            dropped |= elements  # a page of nothing else keeps them, as it keeps other markup
        for block in blocks:
            if block.heading is not None:  # "## Setup { #setup }" reads "## Setup" (see above)
                for i in range(block.start, block.end):
                    bare = _HEADING_ATTRS.sub("", lines[i])
                    if bare.strip("#= \t-"):  # "## {#only-an-id}" keeps it, as its path does
                        lines[i] = bare
        rules = _table_rules(tokens)
    else:
        blocks, dropped, code, rules = _text_blocks(lines), set(), set(), set()
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
            block.content = _char_cost(text) > limit or count(text) > limit  # chars first: cheap
    if not any(block.content for block in blocks):
        for block in blocks:
            block.content = block.content or block.pointer or block.markup
    content = [False] * len(lines)
    for block in blocks:
        if block.content:
            for i in range(block.start, block.end):
                content[i] = bool(lines[i].strip())
    headings = {i for b in blocks if b.heading for i in range(b.start, b.end)}
    packer = _Packer(lines, skip_lines, budget, count, content, dropped, headings)

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
    return _within_cap(packer.out, budget, count, notes)


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
    packer = _Packer(lines, 0, budget, count)
    for path, start, end in sections:
        units = [(start + b.start, start + b.end) for b in _text_blocks(lines[start:end])]
        if units:
            packer.pack(path, units)
    return _within_cap(packer.out, budget, count, notes)
