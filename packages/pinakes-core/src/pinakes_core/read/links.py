"""Links between documents: what a link is and how links are found in text (DESIGN §2, §6).

Three origins feed the ``links`` table: sidecar ``links:`` entries, frontmatter ``links:`` and
links found in the document text (``reverse-scan``): Markdown links to other documents
(``[text](../path.md#anchor)``, root-relative ``/path.md``) and wikilinks (``[[target]]``,
``[[target#anchor]]``, ``[[a|b]]`` in either order — Obsidian puts the target first, Dendron
the label). Text links are found with the CommonMark parser, so code spans, fenced code and
escaped brackets never produce links. Stored targets are resolved to document ids by
:mod:`pinakes_core.read.resolution`.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote

# The parser (markdown-it) is built at the first document parsed, not at import: the MCP
# server imports this module for two constants (issue 37).
from pinakes_core.read.blocks import markdown_parser
from pinakes_core.read.containers import unindent_containers
from pinakes_core.read.markup import is_templated, strip_markup
from pinakes_core.uri import SCHEME, is_ulid

__all__ = [
    "DOC_SUFFIXES",
    "IN_NOTE",
    "NO_SUCH_ID",
    "OTHER_KB",
    "VAULT_PREFIX",
    "TextLink",
    "extract_links",
    "link_kind",
    "read_text",
]

#: The stored reason of a ``pnk://`` link naming another KB; the fleet resolves it when read
#: (:mod:`pinakes_core.manage.crosskb`), so the other KB's changes never need this KB's sync.
OTHER_KB = "document in another KB"
#: The stored reason of a wikilink to a heading or block of the note that holds it
#: (``[[#Heading]]``): it names no document, and is not a dangling link either.
IN_NOTE = "a heading or block of the same note"
#: The stored reason of a ``pnk://`` link whose document id is not in this KB (a bare
#: ``pnk://<doc-ulid>`` may still name a document in another KB of the fleet).
NO_SUCH_ID = "no document with this id"

_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
# Embeds (![[x]]) of notes are links; embeds of images, PDFs and other files are not.
_FILE_EMBED = re.compile(r"\.(?!md$|markdown$|txt$)[A-Za-z0-9]{1,5}$")
# Escaped brackets and '#' become private-use stand-ins while parsing: an escaped \# starts
# no tag; targets get their '#' back (_unescaped), percent-encoded in a link destination.
_ESCAPED = {"\\[": "\ue000", "\\]": "\ue001", "\\#": "\ue002"}
_HASH_STANDIN = (("\ue002", "#"), ("%EE%80%82", "#"))
# Inline tokens after which a text token starts a word (a line, or inside opening emphasis).
_WORD_STARTS = frozenset({"softbreak", "hardbreak", "em_open", "strong_open", "s_open"})
# An inline tag: '#' where a word starts (not C#, &#39;, a URL's /#anchor), then a run that
# _tag_run cuts at the first character a tag cannot hold.
_INLINE_TAG = re.compile(r"(?:^|(?<=[\s(,;:\"'“‘]))#([^\s#]+)")
_HEX_COLOUR = re.compile(r"[0-9a-fA-F]{6}|[0-9a-fA-F]{8}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]+")
# A colour property just before a value, or a few words of it: "color: ", "background-color:",
# 'fill="', "backgroundColor: '", "bgcolor=", "border: 1px solid " (CSS, SVG and HTML
# attributes, JS style objects).
_COLOUR_PROPERTY = re.compile(
    r"(?:colou?r|background|bg|fill|stroke|border|outline|shadow|accent|tint)"
    r"""[\w-]*["']?\s*[:=]\s*["']?(?:[^\s;:{}"'#]+\s+){0,3}$""",
    re.IGNORECASE,
)
#: Longest inline tag read; anything longer is not a name someone typed.
MAX_TAG_CHARS = 100
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, mailto:, file: … (not pnk:)
DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".txt")
# A Markdown link to a picture, a recording, an archive or a font points at a file beside the
# notes (a screenshot shown full size, a download), never at a document: like an image, it is
# no link to resolve, so it cannot dangle.
_MEDIA_FILE = re.compile(
    r"\.(?:png|jpe?g|gif|svg|webp|avif|bmp|ico|tiff?|heic|mp3|m4a|wav|ogg|flac|mp4|m4v|webm|mov"
    r"|avi|mkv|zip|tar|gz|tgz|bz2|xz|7z|rar|woff2?|ttf|otf|eot)$",
    re.IGNORECASE,
)
# A MyST or Sphinx document reference ends the text before its code span: {doc}`intro/setup`,
# {doc}`the setup guide <intro/setup>` (the target in angle brackets after its text).
_DOC_ROLE = "{doc}"
_ROLE_TARGET = re.compile(r"<([^<>]+)>\s*$")
# Dendron's cross-vault form: [[label|dendron://<vault>/<note.name>]].
VAULT_PREFIX = re.compile(r"^dendron://[^/]+/")


def _own_page(url: str, pages: tuple[tuple[str, str], ...]) -> str | None:
    """The root-relative target (``/guide.md#x``) of a forge address of the KB's own file."""
    plain = url.replace("http://", "https://", 1)
    for prefix, folder in pages:
        if plain.lower().startswith(prefix.lower()):
            rest = plain[len(prefix) :].split("/", 1)  # the branch or commit, then the path
            if len(rest) < 2 or not rest[1]:
                return None
            path = unquote(rest[1])  # a forge writes "my notes" as my%20notes
            suffix = posixpath.splitext(path.split("#", 1)[0].split("?", 1)[0])[1].lower()
            if suffix and suffix not in DOC_SUFFIXES:
                return None  # a file that is no document (app.py, a screenshot): a web address
            if folder:
                if not path.startswith(folder + "/"):
                    return None  # a file of the repository outside the KB
                path = path[len(folder) + 1 :]
            return "/" + path if path.strip("/") else None  # the KB's top: no one document
    return None


@dataclass(frozen=True)
class TextLink:
    """A link found in a document's text.

    Attributes:
        target: the raw target as written (for wikilinks, ``a|b`` with both parts).
        kind: ``"markdown"`` or ``"wiki"``.
    """

    target: str
    kind: str


def _inline_texts(text: str) -> Iterator[tuple[str, str, bool]]:
    """``(kind, value, glued)`` per link target (``href``), link label and other text.

    A MyST ``{doc}`` role's target is a link target as a Markdown link's is.

    ``glued``: the text is stuck to the end of **bold**, `code` or a link, so it starts no word.
    """
    for key, placeholder in _ESCAPED.items():
        text = text.replace(key, placeholder)
    lines = text.split("\n")
    unindented = unindent_containers(lines)  # MkDocs admonition and tab bodies: no code
    if unindented is not lines:
        text = "\n".join(unindented)
    for token in markdown_parser().parse(text):
        if token.type != "inline":
            continue
        inside = 0  # within a Markdown link's label
        before = "softbreak"  # the previous child's type: a line starts here
        said = ""  # the previous child's text, when it was text
        for child in token.children or ():
            if child.type == "link_open":
                inside += 1
                yield "href", str(child.attrs.get("href", "")), False
            elif child.type == "link_close":
                inside -= 1
            elif child.type == "text":
                yield "label" if inside else "text", child.content, before not in _WORD_STARTS
            elif child.type == "code_inline" and said.endswith(_DOC_ROLE) and not inside:
                named = _ROLE_TARGET.search(child.content)
                yield "href", (named.group(1) if named else child.content).strip(), False
            before = child.type
            said = child.content if child.type == "text" else ""


def _tag_run(run: str) -> str:
    """The tag at the start of ``run``: letters, marks, digits, ``_``, ``-`` and ``/``.

    By Unicode category, so a combining mark (Devanagari, Thai, an NFD accent) stays in it.
    """
    for i, c in enumerate(run):
        if c not in "_-/" and unicodedata.category(c)[0] not in "LMN":
            return run[:i]
    return run


def _colour(tag: str, before: str = "", after: str = "") -> bool:
    """Whether ``#tag`` is a colour, not a tag, given the text ``before`` and ``after`` it.

    A hex run of 6 or 8 digits with a decimal digit in it (``#43B02A``, ``#ff00aa80``) or of 3
    or 4 of one digit (``#fff``) is a colour wherever it stands. Hex runs without a decimal
    digit are also words (``#cafe``, ``#add``, ``#facade``, ``#decade``), so ``#efefef`` or
    ``#abc`` is a colour only where a colour is written: after a colour property
    (``color: #efefef``, ``bgcolor="#abc"``, ``backgroundColor: '#cafe'``) or inside quotes
    of its own (``"#efefef"``). In prose it stays a tag.
    """
    if len(tag) in (3, 4) and len(set(tag.lower())) == 1 and tag.isalnum() and tag.isascii():
        return True
    if len(tag) in (6, 8) and _HEX_COLOUR.fullmatch(tag) and any(c.isdigit() for c in tag):
        return True
    if len(tag) not in (3, 4, 6, 8) or not _HEX_RUN.fullmatch(tag):
        return False
    quoted = before[-1:] in ("'", '"') and after[:1] == before[-1:]
    return quoted or bool(_COLOUR_PROPERTY.search(before[-60:]))


def _tags_in(text: str, *, glued: bool = False) -> Iterator[str]:
    for match in _INLINE_TAG.finditer(text):
        if glued and match.start() == 0:
            continue  # **bold**#x: the '#' follows a word
        run = _tag_run(match.group(1))
        tag = unicodedata.normalize("NFC", run).rstrip("/")
        if tag.startswith("/"):
            continue  # #/index: a route or an anchor, not a name
        if not any(c.isalpha() for c in tag) or len(tag) > MAX_TAG_CHARS:
            continue  # #1984 is an issue number, not a tag; a 300-character run is no name
        tail = match.start(1) + len(run)
        if not _colour(tag, text[: match.start()], text[tail : tail + 1]):
            yield tag


def _unescaped(target: str) -> str:
    for standin, hash_sign in _HASH_STANDIN:
        target = target.replace(standin, hash_sign)
    return target


def extract_links(
    text: str, *, markdown: bool, pages: tuple[tuple[str, str], ...] = ()
) -> list[TextLink]:
    """Return the document links written in ``text`` (external URLs and images excluded)."""
    return read_text(text, markdown=markdown, pages=pages)[0]


def read_text(
    text: str, *, markdown: bool, pages: tuple[tuple[str, str], ...] = ()
) -> tuple[list[TextLink], list[str]]:
    r"""Return the document links and the inline ``#tags`` written in ``text``, in one parse.

    ``pages``: the KB's own files' forge addresses (:func:`~pinakes_core.read.forge.repository_pages`); a link to one of
    them is a root-relative link to the document, not an external URL.

    Tags follow Obsidian's rules: ``#`` at the start of a word, then letters, digits, ``_``,
    ``-`` and ``/`` (nesting: ``#project/alpha``), at least one letter. Code, link targets,
    escaped ``\#``, headings' own ``#`` marks, and colours such as ``#43B02A`` are not tags.
    """
    if not markdown:
        return [], []
    found: list[TextLink] = []
    tags: list[str] = []
    for kind, value, glued in _inline_texts(text):
        if kind == "text":
            # A wikilink's '#' is a heading or block ([[#Heading]], [[a#b]]): blanked by a
            # stand-in that is no space, so [[x]]#y stays glued as in the text.
            # Site-generator markup ("{: #v4-4-1}", a shortcode's arguments) holds no tags.
            tags.extend(_tags_in(strip_markup(_WIKILINK.sub("\ue003", value)), glued=glued))
        if kind == "href":
            value = _unescaped(value)
            if pages and _EXTERNAL.match(value):
                value = _own_page(value, pages) or value
            # "#anchor" and "?query" are places in this very page (a search link such as
            # "?q=term" in a static site's docs); a media file is no document; nor is a target
            # a site's templates write at build time ("<{{% eturl rss %}}>", "{{ site.url }}/x").
            if (
                value
                and value[0] not in "#?"
                and not is_templated(unquote(value))
                and not _EXTERNAL.match(value)
                and not _MEDIA_FILE.search(unquote(value.split("#", 1)[0].split("?", 1)[0]))
            ) or value.startswith(SCHEME):
                found.append(TextLink(value, "markdown"))
        else:
            for match in _WIKILINK.finditer(value):
                target = _unescaped(match.group(2).strip())
                name = target.split("|")[0].split("#")[0].strip()
                # An embed of any file but a note is no link; nor is a link to a picture, a
                # recording or an archive beside the notes (Obsidian opens [[shot.png]] in its
                # viewer), as for Markdown links; nor a target a template writes when a note
                # is made from it (Templater's [[<% tp.date.now() %>]], [[{{date}}]]).
                if (
                    (match.group(1) and _FILE_EMBED.search(name))
                    or _MEDIA_FILE.search(name)
                    or is_templated(target)
                ):
                    continue
                found.append(TextLink(target, "wiki"))
    return found, list(dict.fromkeys(tags))


def link_kind(target: str) -> str:
    """Classify an authored link target: ``uri`` (pnk:// or ULID), ``markdown`` or ``wiki``."""
    if target.startswith(SCHEME) or is_ulid(target.upper()):
        return "uri"
    return "markdown" if "/" in target or target.lower().endswith(DOC_SUFFIXES) else "wiki"
