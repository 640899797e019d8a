"""Site-generator markup in Markdown prose: what a site's build removes before anyone reads it.

Docs folders are the sources of static sites, and their pages carry the generator's syntax
between the words (issue 9):

- Hugo shortcodes: ``{{< name args >}}``, ``{{% name args %}}``, closings ``{{< /name >}}``;
- Liquid (Jekyll) and Markdoc tags and output: ``{% include x.html %}``, ``{% raw %}``,
  ``{% aside type="tip" %}`` … ``{% /aside %}``, ``{{ site.baseurl }}``, ``{{ page.title }}``;
  a ``{% comment %}`` … ``{% endcomment %}`` block goes with its body (no reader sees it);
- macro calls in output (MDN's KumaScript, ``{{jsxref("Array")}}``), whose quoted arguments
  are the link text the page shows (:func:`_called_words`);
- kramdown attribute lists: ``{: .note .info}``, ``{:toc}``, ``{::options … /}``;
- colon-fenced admonitions and divs (Docusaurus, Starlight, VuePress, MyST, Pandoc):
  ``:::note``, ``:::tip[Did you know?]``, ``::: warning Custom title``, ``:::{note}``, ``:::``;
  an opener keeps the title the site shows (the written one, else its type: ``tip``); a
  mkdocstrings directive (``::: package.module.Name``) keeps the identifier its page documents;
- MyST directives fenced with backticks or tildes (a ``{note} Title`` fence), their
  ``:key: value`` option lines, and MyST targets (``(install-guide)=``);
- slash-fenced blocks (pymdownx.blocks, MkDocs Material): ``/// note | Technical Details``,
  ``/// tip``, ``//// tab | Python``, closed by ``///``; an opener keeps its title, else its type;
- include directives, which the build replaces with another file's text the folder indexes on
  its own (or code it does not hold): pymdownx.snippets' ``--8<-- "file.md"`` and its block of
  file names between two ``--8<--`` lines, markdown-include's ``{!file.md!}``, the
  ``{* ../docs_src/app.py hl[3] *}`` of FastAPI's family of sites, and mdBook's
  ``{{#include file.md}}`` outside code. Their path words are not the page's words.

:func:`strip_markup` removes that markup and keeps the words a reader sees: the text between an
opening and a closing tag, an admonition's body and title, and the values of a tag's display
attributes (``title``, ``caption``, ``alt``, ``label``, ``summary``, ``description``: the
words a figure, a tab or a card shows). It keeps every newline (a removed span spanning lines leaves its line breaks), so
line numbers still point into the file, and it never touches `code spans`; the caller keeps it
away from code blocks (a page *about* shortcodes shows them in fences, and they stay). Escaped
shortcodes (``{{</* name */>}}``, which a Hugo site prints as written) are text and stay.
"""

from __future__ import annotations

import re

__all__ = [
    "CODE_ELEMENT",
    "CODE_ELEMENT_END",
    "has_markup",
    "is_placeholder",
    "is_templated",
    "shown_attributes",
    "strip_markup",
]

#: The start of an HTML ``<script>`` or ``<style>`` element (CommonMark's raw HTML block kind 1,
#: up to three spaces in) and its end tag: code the browser or the site generator runs, which
#: no reader sees (:mod:`pinakes_core.read.mdx` blanks it, :mod:`pinakes_core.index.chunking` leaves it out).
CODE_ELEMENT = re.compile(r"^ {0,3}<(?:script|style)(?=[\s>]|$)", re.IGNORECASE)
CODE_ELEMENT_END = re.compile(r"</(?:script|style)\s*>", re.IGNORECASE)

# Each construct is bounded (no span longer than this runs on to a far closing delimiter), and
# a span never runs over the opening of another of its kind: a try from each opening then stops
# at the next one, so a line of thousands of unclosed "{{<" costs time in proportion to its
# length (bounded alone, each try read 2,000 characters: 5 s for 250 KB).
_SPAN = 2000
_COMMENT_BLOCK = (
    r"\{%-?\s*comment\s*-?%\}(?:(?!\{%-?\s*comment\b)[\s\S]){0,"
    + str(_SPAN)
    + r"}?\{%-?\s*endcomment\s*-?%\}"
)
# {{< name >}} closes with ">}}", {{% name %}} with "%}}".
_SHORTCODE = (
    r"\{\{(?:<|(?P<sc_pct>%))-?\s*/?\s*[A-Za-z_][\w./-]*(?P<sc_args>(?:(?!\{\{)[\s\S]){0,"
    + str(_SPAN)
    + r"}?)\s*/?\s*-?(?(sc_pct)%|>)\}\}"
)
_LIQUID_TAG = r"\{%-?\s*/?\s*[A-Za-z_][\w-]*(?P<lt_args>[^%]{0," + str(_SPAN) + r"}?)\s*/?-?%\}"
# An output expression: a variable path or a quoted string, with filters; never "::" (an Anki
# cloze, {{c1::answer}}, is a reader's own text).
_LIQUID_OUTPUT = r"""\{\{-?\s*(?=[A-Za-z_$'"])(?:(?!::)[^{}\n<>%]){1,200}?\s*-?\}\}"""
_KRAMDOWN = r"\{::?[^{}\n]{0,200}\}"
# A MyST directive fenced with backticks or tildes ("```{note} Title") opens as a colon fence
# does, and a bare fence line closes it: outside code, which the caller keeps away, a fence
# line is one of a prose directive (pinakes_core.read.containers.MYST_PROSE). A braced opener's
# options go with it, as ":key: value" lines or as a YAML block between "---" lines (MyST's
# two forms), but for the words an image or a figure shows.
_COLON_FENCE = (
    r"^(?P<cf_indent>[ \t]*)(?::{3,}|(?:`{3,}|~{3,})(?=[ \t]*(?:\{[A-Za-z]|$)))[ \t]*"
    r"(?:\{(?P<cf_braced>[A-Za-z][\w:-]*)\}|\{[^}\n]*\}|(?P<cf_type>[A-Za-z][\w-]*(?![\w.-])))?"
    r"(?:\{[^}\n]*\})?"
    r"(?:\[(?P<cf_title>[^\]\n]*)\])?(?:\{[^}\n]*\})?[ \t]*(?P<cf_rest>[^\n]*)$"
    r"(?(cf_braced)(?P<cf_options>(?:\n[ \t]*:[A-Za-z][\w-]*:(?:[ \t][^\n]*)?$)+"
    r"|\n[ \t]*---[ \t]*(?:\n(?![ \t]*---[ \t]*$)[^\n]*){0,100}\n[ \t]*---[ \t]*$)?)"
)
# MyST's option keys whose values a reader sees (an image's alt text, a caption, a title).
_SHOWN_OPTION = re.compile(r"^[ \t]*:?(?:alt|caption|title):[ \t]+(.*)$")
# A MyST target before a heading or a block, "(install-guide)=": a name for references.
_TARGET = r"^[ \t]*\([^()\n]{1,200}\)=[ \t]*$"
# pymdownx.blocks: "/// type" or "/// type | title" opens (more slashes nest), "///" closes. Only
# a line of exactly that shape: "/// TODO fix this" is prose.
_SLASH_FENCE = (
    r"^(?P<sf_indent>[ \t]*)/{3,}[ \t]*"
    r"(?:(?P<sf_type>[A-Za-z][\w-]*)(?:[ \t]*\|[ \t]*(?P<sf_title>[^\n]*?))?)?[ \t]*$"
)
# Include directives (module doc): a snippets line or block (";--8<--" is one escaped, shown as
# written), {!file!} and {* file *} naming a path, {{#include}}. Bounded like every construct.
_INCLUDE = (
    r"^[ \t]*-{1,2}8<-{1,2}[ \t]*\n(?:[^\n]{1,300}\n){0,50}?[ \t]*-{1,2}8<-{1,2}[ \t]*$"
    r"|^[ \t]*-{1,2}8<-{1,2}[ \t]*(?:\"[^\"\n]{1,300}\"|'[^'\n]{1,300}')[ \t]*$"
    r"|\{![ \t]*[^!\s]*[/.][^!\n]{0,300}?[ \t]*!\}"
    r"|\{\*[ \t]+[^*\s]*[/.][^*\n]{0,300}?[ \t]+\*\}"
    r"|\{\{#(?:include|rustdoc_include|playground)[ \t]+[^{}\n]{1,300}\}\}"
)
_MARKUP = re.compile(
    "|".join(
        f"(?P<{name}>{pattern})"
        for name, pattern in (
            ("comment", _COMMENT_BLOCK),
            ("shortcode", _SHORTCODE),
            ("tag", _LIQUID_TAG),
            ("output", _LIQUID_OUTPUT),
            ("kramdown", _KRAMDOWN),
            ("fence", _COLON_FENCE),
            ("blocks", _SLASH_FENCE),
            ("include", _INCLUDE),
            ("target", _TARGET),
        )
    ),
    re.MULTILINE,
)
# Cheap test before the full pattern: most documents have none of these.
_HINT = re.compile(r"\{[{%:!*]|^[ \t]*(?::::|///|```|~~~|-{1,2}8<)|\)=[ \t]*$", re.MULTILINE)
# Attributes whose values are words the rendered page shows (a card's title and description).
_DISPLAY = re.compile(
    r"""(?<![\w-])(?:title|caption|alt|label|summary|description)\s*=\s*(?:"([^"]*)"|'([^']*)')""",
    re.IGNORECASE,
)
# A shortcode's one quoted argument made of words (not a path, a URL or a version): the
# words it prints, as a glossary term does.
_TERM = re.compile(r""""([^\W\d_](?:[^\W\d_]|[ -]){0,80})"|'([^\W\d_](?:[^\W\d_]|[ -]){0,80})'""")
# An output that calls a macro with quoted arguments (MDN's KumaScript, Jinja's ``_("…")``):
# ``{{jsxref("Array.prototype.map()")}}``, ``{{domxref("Document/body", "body")}}``.
_CALL = re.compile(r"\{\{-?\s*[A-Za-z_$][\w.$]*\s*\((?P<call_args>.*)\)\s*-?\}\}", re.DOTALL)
_ARGUMENT = re.compile(r""""([^"]{0,200})"|'([^']{0,200})'""")
# An argument that is a path or an address (an example's page, a link target) is not shown.
_NOT_SHOWN = re.compile(r"[/\\]")
# A code span, or a fence line (a MyST directive's, outside code), which is none: "```{note}"
# and the "```" closing it would read as one span.
_CODE_SPAN = re.compile(
    r"(?P<fence>^[ \t]*(?:`{3,}|~{3,})[^`\n]*$)"
    r"|(?<!`)(?P<ticks>`+)(?!`)(?:[^`]|(?!(?P=ticks))`+)+?(?<!`)(?P=ticks)(?!`)",
    re.MULTILINE,
)


# A template expression's opening (Hugo shortcodes, Jinja, Liquid, Vue, Go templates,
# Obsidian's Templates plugin's {{date}}, Templater's and EJS's <% ... %>).
_TEMPLATE_OPENER = re.compile(r"\{\{|\{%|<%")
# One whole template expression, which a template fills in when a note is made from it.
_PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}|<%[^%]*%>|\{%[^%]*%\}")


def is_templated(text: str) -> bool:
    """Whether ``text`` holds a template expression (a link target a build or template writes)."""
    return bool(_TEMPLATE_OPENER.search(text))


def is_placeholder(text: str) -> bool:
    """Whether ``text`` is nothing but one template placeholder (``{{title}}``, ``<% x %>``)."""
    return bool(_PLACEHOLDER.fullmatch(text.strip()))


def has_markup(text: str) -> bool:
    """Whether ``text`` may hold markup :func:`strip_markup` removes (a cheap first test)."""
    return bool(_HINT.search(text))


def shown_attributes(source: str) -> str:
    """The values of the display attributes in a tag's ``source``, joined by spaces.

    ``title``, ``caption``, ``alt``, ``label``, ``summary`` and ``description`` (quoted): the
    words a figure, a tab or a card shows; "" when there are none.
    """
    return " ".join(v.strip() for pair in _DISPLAY.findall(source) for v in pair if v.strip())


def _called_words(source: str) -> str:
    """The quoted arguments of a macro-call output that a page shows, joined by spaces.

    A KumaScript macro prints its arguments as link text (``{{jsxref("Array.prototype.map()")}}``
    shows ``Array.prototype.map()``; ``{{domxref("Document/body", "body")}}`` shows ``body``);
    an argument that is a path or address (``"pages/js/array-map.html"``) shows nothing. ""
    for an output that calls nothing (``{{ site.title }}``, ``{{Compat}}``).
    """
    call = _CALL.fullmatch(source)
    if call is None:
        return ""
    words = (a or b for a, b in _ARGUMENT.findall(call.group("call_args")))
    return " ".join(w.strip() for w in words if w.strip() and not _NOT_SHOWN.search(w))


def _replace(match: re.Match[str]) -> str:
    kind = match.lastgroup
    source = match.group()
    breaks = "\n" * source.count("\n")
    if kind == "output":
        return _called_words(source)  # an output never spans lines
    if kind == "fence":
        # The title a site shows: the one written, else the admonition's type ("::: tip" shows
        # "Tip"); a closing ":::" or a Pandoc div's attributes ("::: {.note}") show nothing.
        words = " ".join(w for w in (match.group("cf_title"), match.group("cf_rest")) if w)
        words = words.strip() or match.group("cf_type") or match.group("cf_braced") or ""
        opener = match.group("cf_indent") + words if words else ""
        options = (match.group("cf_options") or "").split("\n")[1:]
        values = (_SHOWN_OPTION.match(line) for line in options)
        return "\n".join([opener, *(m.group(1) if m else "" for m in values)])
    if kind == "target":
        return ""
    if kind == "blocks":
        words = (match.group("sf_title") or "").strip() or match.group("sf_type") or ""
        return match.group("sf_indent") + words if words else ""
    args = match.group("sc_args") if kind == "shortcode" else match.group("lt_args")
    if kind in ("shortcode", "tag") and args:
        shown = shown_attributes(args)
        if not shown and kind == "shortcode":
            term = _TERM.fullmatch(args.strip())  # {{% glossary-term "default site" %}}
            shown = (term.group(1) or term.group(2)) if term else ""
        if shown:
            return shown + breaks
    return breaks


def _strip(text: str) -> str:
    return _MARKUP.sub(_replace, text)


def strip_markup(text: str) -> str:
    """``text`` without site-generator markup, outside `code spans` (see the module doc).

    Keeps every line break and the words a reader sees; returns ``text`` itself when there is
    nothing to remove. Never raises.
    """
    if not has_markup(text):
        return text
    out: list[str] = []
    last = 0
    for span in _CODE_SPAN.finditer(text):
        if span.group("fence"):
            continue
        out.append(_strip(text[last : span.start()]))
        out.append(span.group())
        last = span.end()
    out.append(_strip(text[last:]))
    return "".join(out)
