"""MDX: Markdown with JSX components and ES module lines (Docusaurus, Astro Starlight, Nextra).

An ``.mdx`` file is read as Markdown after :func:`markdown_of` blanks what is code for the site
generator rather than text for a reader:

- ``import`` / ``export`` statements (MDX's ESM blocks, which run to the next blank line);
- lines made only of JSX component tags (``<Tabs>``, ``</TabItem>``, ``<Aside type="tip">``,
  ``<Card title="A" />``), and the tags around text on a line that opens with one
  (``<Aside type="caution">Do not …</Aside>`` keeps ``Do not …``); a tag's display props
  (``title``, ``label``, ``description``, …: :func:`pinakes_core.read.markup.shown_attributes`) are
  words the page shows, and stay;
- a component's opening tag whose props run over several lines (``config={[ … ]}``);
- ``{/* comments */}``;
- ``<script>`` and ``<style>`` elements, tags and body (VitePress and Vue pages import their
  components in ``<script setup>``): their code is for the site generator. Their ``import``
  lines are not read as ESM blocks, which run to the next blank line and would take the
  closing ``</script>`` with them, leaving the parser an HTML block to the end of the page.

Components are the capitalised tags (lower-case ones are HTML, which the Markdown parser reads
as it always does). The Markdown between the tags stays, every blanked line stays as an empty
line so line numbers keep pointing into the file, and fenced code is never touched: the
``import`` in a code sample is text a reader searches for. The file itself is never changed.
"""

from __future__ import annotations

import re

from pinakes_core.read.markup import CODE_ELEMENT, CODE_ELEMENT_END, shown_attributes

__all__ = ["is_mdx", "markdown_of"]

# MDX has no indented code, so a fence opens at any indentation (inside a component's body).
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
#: A tag or comment left open for more lines than this was not one: its lines are kept.
MAX_OPEN_LINES = 100
_IMPORT = re.compile(r"""^import\s*(?:["']|[\w*{][^\n]*?(?:\bfrom\s*["']|[{,]\s*$))""")
# One whole import statement on its line, with a quoted module: what marks a .md file as MDX.
_ESM_IMPORT = re.compile(r"""^import\s+(?:[\w*{][^\n]*?\s+from\s+)?["'][^"'\s]+["'];?\s*$""")
_EXPORT = re.compile(
    r"^export\s+(?:default|const|let|var|function|async|class|type|interface|\{|\*)(?!\w)"
)
# A component tag: capitalised (or a member such as Tabs.Item), props without angle brackets
# outside braces are not checked for here; the line must open with one.
_TAG = re.compile(r"</?[A-Z][\w.:-]*(?:\s+[^<>]*?)?/?>")
_OPENS_TAG = re.compile(r"^\s*</?[A-Z][\w.:-]*(?=[\s/>]|$)")
_FRAGMENT = re.compile(r"^\s*</?>\s*$")
_COMMENT = re.compile(r"\{/\*.*?\*/\}")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def is_mdx(rel: str, text: str = "") -> bool:
    """Whether the document at KB-relative path ``rel``, holding ``text``, is MDX.

    An ``.mdx`` file is. So is a Markdown file that imports a module outside code (a line
    ``import Tabs from '@theme/Tabs';``): Docusaurus reads ``.md`` files as MDX too, and its
    docs import their components in them. No Markdown a reader writes holds such a line.
    """
    if rel.lower().endswith(".mdx"):
        return True
    if "import" not in text:
        return False
    fence = ""
    for line in text.split("\n"):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and not line.strip().strip(fence[0]):
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
        elif _ESM_IMPORT.match(line):
            return True
    return False


def _shown(tag: re.Match[str]) -> str:
    words = shown_attributes(tag.group())
    return f" {words} " if words else " "


def _without_tags(line: str) -> str:
    """``line`` with its component tags and comments removed outside `code spans`.

    A tag's display props (``<Card title="Stars">``, ``label``, ``description``) are words the
    page shows: they stay.
    """
    out, last = [], 0
    for span in _CODE_SPAN.finditer(line):
        out.append(_COMMENT.sub("", _TAG.sub(_shown, line[last : span.start()])))
        out.append(span.group())
        last = span.end()
    out.append(_COMMENT.sub("", _TAG.sub(_shown, line[last:])))
    indent = line[: len(line) - len(line.lstrip())]
    return indent + "".join(out).strip()


def _tag_scan(text: str, depth: int = 0, quote: str = "") -> tuple[bool, int, str]:
    """Read on through an open component tag.

    Returns whether it ends in ``text`` (a ``>`` outside braces and quotes), and the brace depth
    and open quote to carry to the next line (one pass over each line, however long the tag).
    """
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'`":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(depth - 1, 0)
        elif ch == ">" and depth == 0:
            return True, depth, quote
    return False, depth, quote


def markdown_of(text: str) -> str:
    """The Markdown an MDX text holds, line for line (see the module doc); never raises."""
    lines = text.split("\n")
    start = 0
    if lines and lines[0].strip() == "---":  # frontmatter is read as in any Markdown file
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), 0)
    kept = list(lines)
    fence = ""
    block = ""  # "esm", "tag", "comment", "element": a construct over lines, blanked as it goes
    opened_at = 0
    depth, quote = 0, ""  # an open tag's brace depth and open quote
    for i in range(start, len(lines)):
        line = kept[i]
        if fence:
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = ""
            continue
        if block == "element":
            end = CODE_ELEMENT_END.search(line)
            lines[i] = line[end.end() :] if end else ""
            block = "" if end else block
            continue
        if block:
            lines[i] = ""
            closed = False
            if block == "tag":
                closed, depth, quote = _tag_scan("\n" + line, depth, quote)
                lines[i] = shown_attributes(line)  # a prop on a line of its own: title="…"
            if block == "esm":
                block = "esm" if line.strip() else ""
            elif closed or (block == "comment" and "*/}" in line):
                block = ""
            elif i - opened_at >= MAX_OPEN_LINES:  # never closed: it was text after all
                lines[opened_at : i + 1] = kept[opened_at : i + 1]
                block = ""
            continue
        opened = _FENCE.match(line)
        tag = _OPENS_TAG.match(line)
        if opened:
            fence = opened.group(1)
        elif CODE_ELEMENT.match(line):
            end = CODE_ELEMENT_END.search(line)
            block, opened_at, lines[i] = ("", i, line[end.end() :]) if end else ("element", i, "")
        elif _IMPORT.match(line) or _EXPORT.match(line):
            block, opened_at, lines[i] = "esm", i, ""
        elif line.lstrip().startswith("{/*") and "*/}" not in line:
            block, opened_at, lines[i] = "comment", i, ""
        elif _FRAGMENT.match(line):
            lines[i] = ""
        elif tag is not None:
            closed, depth, quote = _tag_scan(line[tag.start() :])
            if closed:
                lines[i] = _without_tags(line)
            else:
                block, opened_at, lines[i] = "tag", i, shown_attributes(line)
        elif "{/*" in line:
            lines[i] = _COMMENT.sub("", line).rstrip()
    if block in ("tag", "comment", "element"):  # open at the end of the file: text after all
        lines[opened_at:] = kept[opened_at:]
    return "\n".join(lines)
