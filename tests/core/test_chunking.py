"""Heading-aware chunking: hand-written cases and hypothesis properties (DESIGN §4)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinakes_core.index.chunking import chunk_document, embed_text
from pinakes_core.index.packer import Chunk
from pinakes_core.index.tokens import token_counter
from pinakes_core.read.blocks import first_heading

COUNT = token_counter()


def chunks(text: str, budget: int = 256, skip_lines: int = 0, markdown: bool = True) -> list[Chunk]:
    return chunk_document(
        text, markdown=markdown, budget=budget, count=COUNT, skip_lines=skip_lines
    )


def whole_text(text: str) -> str:
    """The text of the one chunk ``text`` makes, which spans the whole document."""
    (chunk,) = chunks(text)
    assert (chunk.start_line, chunk.end_line) == (1, text.count("\n"))
    return chunk.text


# -- hand-written cases -----------------------------------------------------------------------


def test_fenced_code_with_hash_lines_is_not_a_heading() -> None:
    text = (
        "# Setup\n\nInstall it.\n\n```bash\n# install the tool\npip install x\n## not a heading\n```\n"
        "\n~~~\n# also code\n~~~\n"
    )
    out = chunks(text)
    assert [c.heading_path for c in out] == [("Setup",)]
    assert "# install the tool" in out[0].text and "## not a heading" in out[0].text
    assert first_heading("```\n# code\n```\n# Real\n") == "Real"


def test_setext_headings_are_recognised() -> None:
    text = "Title Here\n==========\n\nintro text\n\nSub part\n--------\n\nsub text\n"
    out = chunks(text)
    assert [c.heading_path for c in out] == [("Title Here",), ("Title Here", "Sub part")]
    assert [(c.start_line, c.end_line) for c in out] == [(1, 4), (6, 9)]
    assert first_heading(text) == "Title Here"


def test_heading_path_nesting_and_popping() -> None:
    text = "# A\n\na\n\n## B\n\nb\n\n### C\n\nc\n\n## D\n\nd\n\n# E\n\ne\n\n#### F\n\nf\n"
    paths = [c.heading_path for c in chunks(text)]
    assert paths == [("A",), ("A", "B"), ("A", "B", "C"), ("A", "D"), ("E",), ("E", "F")]


def test_text_before_the_first_heading_has_an_empty_path() -> None:
    out = chunks("preamble line\n\n# H\n\nbody\n")
    assert [(c.heading_path, c.text) for c in out] == [
        ((), "preamble line"),
        (("H",), "# H\n\nbody"),
    ]


def test_heading_text_drops_markup() -> None:
    out = chunks("# The *Raft* [paper](http://x) `code`\n\nbody\n")
    assert out[0].heading_path == ("The Raft paper code",)


def test_frontmatter_lines_are_excluded_but_count_for_line_numbers() -> None:
    text = "---\ntitle: T\ntags: [a]\n---\n# Body\n\ntext\n"
    out = chunks(text, skip_lines=4)
    assert len(out) == 1
    assert "title:" not in out[0].text
    assert (out[0].start_line, out[0].end_line) == (5, 7)
    assert out[0].text == "# Body\n\ntext"


def test_long_section_splits_at_paragraph_boundaries_within_budget() -> None:
    paragraphs = [
        " ".join(f"word{p}x{i}" for i in range(12)) for p in range(10)
    ]  # each paragraph well under the budget, together well over it
    text = "# Long\n\n" + "\n\n".join(paragraphs) + "\n"
    budget = 64
    assert COUNT("\n".join(paragraphs)) > budget
    out = chunks(text, budget=budget)
    assert len(out) > 1
    assert all(c.heading_path == ("Long",) for c in out)
    assert all(c.tokens <= budget for c in out)
    for c in out:  # every window is whole paragraphs
        body = c.text.removeprefix("# Long\n\n")
        assert all(part in paragraphs for part in body.split("\n\n"))
    joined = "\n\n".join(c.text for c in out)
    assert all(p in joined for p in paragraphs)
    assert out[0].text.startswith("# Long")


def test_single_long_line_splits_at_words() -> None:
    line = " ".join(f"tok{i}" for i in range(300))
    out = chunks(line + "\n", budget=40)
    assert len(out) > 1
    assert all(c.tokens <= 40 and c.start_line == c.end_line == 1 for c in out)
    assert " ".join(c.text for c in out) == line


def test_plain_text_splits_on_blank_lines_and_ignores_hashes() -> None:
    out = chunks("# not a heading in txt\n\nsecond para\n", markdown=False, budget=32)
    assert [(c.heading_path, c.text) for c in out] == [
        ((), "# not a heading in txt\n\nsecond para")
    ]
    many = "\n\n".join(f"para {i} " + "filler " * 10 for i in range(6))
    split = chunks(many, markdown=False, budget=32)
    assert len(split) > 1
    assert all(c.text.startswith("para ") and c.tokens <= 32 for c in split)


def test_ordinals_are_sequential() -> None:
    out = chunks("# A\n\na\n\n# B\n\nb\n\n# C\n\nc\n")
    assert [c.ordinal for c in out] == [0, 1, 2]


def test_empty_and_blank_documents_have_no_chunks() -> None:
    assert chunks("") == []
    assert chunks("\n\n   \n") == []


def test_embed_text_prefixes_title_and_heading_path_without_repeating_the_h1() -> None:
    chunk = Chunk(0, ("Raft", "Safety"), "text", 1, 1, 1)
    assert embed_text("Raft", chunk) == "Raft › Safety\ntext"
    assert embed_text("Consensus", chunk) == "Consensus › Raft › Safety\ntext"


def _heading_only(chunk: Chunk) -> bool:
    """Whether every non-blank line of a chunk is an ATX heading or a rule."""
    lines = [line.strip() for line in chunk.text.split("\n") if line.strip()]
    return all(line.startswith("#") or set(line) <= set("-*_= ") for line in lines)


def test_a_heading_without_body_joins_the_next_chunk_under_the_deeper_path() -> None:
    text = "# Guide\n\n## Commands\n\n### ls\n\nLists files.\n\n### cd\n\nChanges directory.\n"
    out = chunks(text)
    assert [(c.heading_path, c.text) for c in out] == [
        (("Guide", "Commands", "ls"), "# Guide\n\n## Commands\n\n### ls\n\nLists files."),
        (("Guide", "Commands", "cd"), "### cd\n\nChanges directory."),
    ]
    assert (out[0].start_line, out[0].end_line) == (1, 7)


def test_body_less_headings_at_the_end_join_the_last_chunk() -> None:
    out = chunks("# Notes\n\nSome text.\n\n## Todo\n\n---\n\n## Later\n")
    assert len(out) == 1
    assert out[0].heading_path == ("Notes",)
    assert out[0].text.endswith("## Later") and (out[0].start_line, out[0].end_line) == (1, 9)


def test_a_document_of_only_headings_has_no_chunks() -> None:
    assert chunks("# Title\n\n## Part one\n\n## Part two\n") == []
    assert chunks("##\n") == []


def test_a_heading_is_not_left_alone_when_its_first_paragraph_fills_the_budget() -> None:
    paragraph = " ".join(f"w{i}" for i in range(40))
    budget = COUNT(paragraph) + 1  # the paragraph fits, the heading with it does not
    out = chunks(f"## Section\n\n{paragraph}\n\n{paragraph}\n", budget=budget)
    assert out[0].text.startswith("## Section\n\n" + paragraph)
    assert not any(_heading_only(c) for c in out)


def test_changelog_and_asset_pages_have_no_heading_only_chunks() -> None:
    # The shapes that made 830 of 6,748 chunks bare headings in a real ~1,000-note vault: a
    # changelog whose version headings hold only sub-headings, and an asset page whose
    # headings hold only images or nothing.
    changelog = "".join(
        f"## 0.{v}.0\n\n### Fix\n\n- fix(lookup): item {v} handled (#{3000 + v})\n\n"
        + ("### Features\n\n- feat(publish): page {v}\n\n" if v % 3 == 0 else "")
        for v in range(120, 60, -1)
    )
    assets = "".join(
        f"## Area {a}\n\n### View {a}\n\n#### Light\n\n![light {a}](https://x/{a}.png)\n\n"
        f"#### Dark\n\n![dark {a}](https://x/{a}-dark.png)\n\n### Empty {a}\n\n"
        for a in range(30)
    )
    for text in (changelog, assets, "---\ntitle: T\n---\n" + assets):
        skip = 3 if text.startswith("---") else 0
        out = chunks(text, budget=64, skip_lines=skip)
        headings = sum(line.startswith("#") for line in text.split("\n"))
        assert headings > 100 and len(out) > 5
        assert not [c for c in out if _heading_only(c)]
        # Nothing is lost: every heading line is in some chunk.
        kept = "\n".join(c.text for c in out)
        assert all(line in kept for line in text.split("\n")[skip:] if line.startswith("#"))
    version = next(c for c in chunks(changelog) if "item 119" in c.text)
    assert version.heading_path == ("0.119.0", "Fix")
    assert version.text.startswith("## 0.119.0\n\n### Fix")


# -- hypothesis: generated Markdown -----------------------------------------------------------

_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
_words = st.lists(_word, min_size=1, max_size=14).map(" ".join)


@dataclass
class _Doc:
    lines: list[str]
    headings: dict[int, tuple[int, str]]  # 0-based line -> (level, text)
    underlines: set[int]  # 0-based lines of setext underlines (part of their heading)


@st.composite
def _markdown(draw: st.DrawFn) -> tuple[_Doc, int]:
    lines: list[str] = []
    headings: dict[int, tuple[int, str]] = {}
    underlines: set[int] = set()
    front = draw(st.booleans())
    if front:
        lines += ["---", f"title: {draw(_words)}", "---"]
    skip = len(lines)
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["atx", "setext", "para", "para", "code", "blank", "longline"]))
        if kind == "atx":
            level = draw(st.integers(1, 6))
            text = draw(_words)
            headings[len(lines)] = (level, text)
            lines.append("#" * level + " " + text)
        elif kind == "setext":
            text = draw(_words)
            level = draw(st.sampled_from([1, 2]))
            headings[len(lines)] = (level, text)
            underlines.add(len(lines) + 1)
            lines += [text, ("=" if level == 1 else "-") * draw(st.integers(3, 8))]
        elif kind == "para":
            lines += draw(st.lists(_words, min_size=1, max_size=4))
        elif kind == "longline":
            lines.append(" ".join(draw(st.lists(_word, min_size=30, max_size=90))))
        elif kind == "code":
            body = draw(
                st.lists(
                    st.one_of(
                        _words.map(lambda w: "# " + w),
                        _words.map(lambda w: "## " + w),
                        _words,
                        st.just(""),
                    ),
                    min_size=0,
                    max_size=6,
                )
            )
            lines += ["```", *body, "```"]
        else:
            lines.append("")
        lines.append("")  # blocks are separated, so each keeps its generated meaning
    return _Doc(lines, headings, underlines), skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc_skip=_markdown(), budget=st.sampled_from([32, 48, 64, 256]))
def test_chunking_properties(doc_skip: tuple[_Doc, int], budget: int) -> None:
    doc, skip = doc_skip
    text = "\n".join(doc.lines)
    out = chunk_document(text, markdown=True, budget=budget, count=COUNT, skip_lines=skip)
    lines = doc.lines

    # Ordinals are sequential and chunks are in document order.
    assert [c.ordinal for c in out] == list(range(len(out)))
    for a, b in itertools.pairwise(out):
        assert (a.start_line, a.end_line) <= (b.start_line, b.end_line)
        assert a.end_line <= b.start_line

    heading_lines = {i + 1 for i in doc.headings} | {i + 1 for i in doc.underlines}
    content_lines = {
        n for n in range(skip + 1, len(lines) + 1) if lines[n - 1].strip()
    } - heading_lines

    # A document with no content line (nothing but headings) has no chunks.
    if not content_lines:
        assert out == []
        return

    # Every non-blank body line lies in exactly one chunk range; a line lies in several only
    # when it was a single long line split into word pieces (the first piece may start at
    # body-less headings carried onto it, the last may end at trailing ones).
    split: set[int] = set()
    for number in range(skip + 1, len(lines) + 1):
        covering = [c for c in out if c.start_line <= number <= c.end_line]
        if not lines[number - 1].strip() or (not covering and number in heading_lines):
            continue  # a heading left out: checked below
        assert covering, f"line {number} {lines[number - 1]!r} is in no chunk"
        if len(covering) > 1:
            assert all(number in (c.start_line, c.end_line) for c in covering)
            split.add(number)
    assert all(c.start_line > skip for c in out)  # frontmatter is never chunk text

    # Expected heading path of every line, from the generator's own knowledge.
    path_at: list[tuple[str, ...]] = []
    stack: list[tuple[int, str]] = []
    for i in range(len(lines)):
        if i in doc.headings:
            level, title = doc.headings[i]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        path_at.append(tuple(t for _, t in stack))

    last_content = max(content_lines)
    for c in out:
        span = range(c.start_line, c.end_line + 1)
        body = [n for n in span if n in content_lines]
        heads = [n for n in span if n in heading_lines]
        # No chunk is only headings: each holds text a reader can use.
        assert body, c
        # Headings inside a chunk lead it (body-less headings carried forward) or trail the
        # document's last content (body-less headings at the end): never between its text.
        assert all(h < body[0] or (h > body[-1] and h > last_content) for h in heads), c
        # The path is the one of the chunk's text; the text never crosses a heading.
        assert all(path_at[n - 1] == c.heading_path for n in body), c
        # Tokens within budget (plus carried headings), unless a single over-long word.
        carried = sum(COUNT(lines[n - 1]) for n in heads)
        assert c.tokens <= budget + carried or len(c.text.split()) == 1
        # Multi-line chunks are verbatim slices of the source; a word piece of a split line
        # keeps the heading lines carried before or after it verbatim.
        pieces = [n for n in span if n in split]
        if pieces:
            before = "\n".join(lines[c.start_line - 1 : pieces[0] - 1])
            after = "\n".join(lines[pieces[0] : c.end_line])
            assert c.text.startswith(before) and c.text.endswith(after)
        elif c.start_line != c.end_line or c.text == lines[c.start_line - 1].strip():
            assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])
    # Every heading lands in a chunk together with the first text after it, if there is any,
    # unless it is one of a run of body-less headings too long to lead a chunk (past half the
    # character cap, budget × 16, the oldest of the run are left out) or to trail the last one
    # (past the cap, the rest of the run is).
    for h in sorted(heading_lines):
        after = min((n for n in content_lines if n > h), default=None)
        holder = [c for c in out if c.start_line <= h <= c.end_line]
        if not holder:
            if after is None:
                tail = range(out[-1].end_line + 1, h + 1)
                chars = len(out[-1].text) + sum(len(lines[n - 1]) + 1 for n in tail)
                assert chars > budget * 16, (h, chars)
            else:
                first = max((n for n in content_lines if n < h), default=skip) + 1
                chars = sum(len(lines[n - 1]) + 1 for n in range(first, after + 1))
                assert chars > budget * 8, (h, first, after, chars)
            continue
        assert len(holder) == 1
        if after is not None:
            assert holder[0].start_line <= after <= holder[0].end_line
        else:
            assert holder[0] is out[-1]


def test_a_heading_whose_body_is_only_images_or_embeds_joins_the_next_chunk() -> None:
    # A docs vault's screenshot sections and note embeds (`![[note#summary]]`): on their own
    # they made chunks with no words of their own (716 of 5,914 in a real ~1,000-note vault).
    text = (
        "# Guide\n\n## Screens\n\n![welcome](a.png) ![layout](b.png)\n\n"
        "## Schemas\n\n![[vault://site/topic.schema#summary,1:#*]]\n\n"
        "## Usage\n\nRun the command.\n\n## Links\n\n[the manual](manual.md) explains it.\n"
    )
    out = chunks(text)
    assert [(c.heading_path, c.text) for c in out] == [
        (
            ("Guide", "Usage"),
            "# Guide\n\n## Screens\n\n![welcome](a.png) ![layout](b.png)\n\n## Schemas\n\n"
            "![[vault://site/topic.schema#summary,1:#*]]\n\n## Usage\n\nRun the command.",
        ),
        (("Guide", "Links"), "## Links\n\n[the manual](manual.md) explains it."),
    ]


def test_a_page_of_nothing_but_images_keeps_them_as_its_chunks() -> None:
    out = chunks(
        "# Gallery\n\n## Light\n\n![light theme](l.png)\n\n## Dark\n\n![dark theme](d.png)\n"
    )
    assert [c.heading_path for c in out] == [("Gallery", "Light"), ("Gallery", "Dark")]
    assert "![dark theme](d.png)" in out[1].text


def test_a_heading_whose_body_is_only_links_is_not_a_chunk_of_its_own() -> None:
    text = (
        "# Schemas\n\n## Documentation\n\n[[Schemas|vault://site/topic.schema]]\n\n"
        "## Usage\n\nSchemas describe a hierarchy.\n\n## See also\n\n[the guide](guide.md)\n"
    )
    out = chunks(text)
    assert [c.heading_path for c in out] == [("Schemas", "Usage")]
    assert out[0].text.startswith("# Schemas\n\n## Documentation\n\n[[Schemas|")
    assert out[0].text.endswith("## See also\n\n[the guide](guide.md)")


def test_a_long_gallery_is_split_like_text_not_carried_onto_the_next_chunk() -> None:
    shots = " ".join(f"![shot {i}](https://example.com/screens/shot-{i}.png)" for i in range(60))
    page = f"# P\n\n## Screenshots\n\n{shots}\n\n## Proxy\n\nSet the proxy in the settings.\n"
    out = chunks(page, budget=256)
    proxy = [c for c in out if c.heading_path == ("P", "Proxy")]
    assert [c.text for c in proxy] == ["## Proxy\n\nSet the proxy in the settings."]
    assert len(out) > 2
    for c in out:
        assert c.tokens == COUNT(c.text) and c.tokens <= 256


def test_link_reference_definitions_are_not_chunk_text() -> None:
    # Documentation sites keep their link targets as reference definitions under each section
    # (MkDocs, mdBook, GitHub READMEs). A reader never sees them; as text they are URL noise
    # that took chunks far over the budget (none of their lines counted as content).
    refs = "\n".join(f"  [Page {i}]: ../section-{i}/page-{i}.md#anchor-{i}" for i in range(60))
    text = (
        "# Guide\n\n## Install\n\nRun the [installer] and read [Page 1].\n\n"
        f"  [installer]: https://example.org/install\n{refs}\n"
        '[titled]: <https://example.org/t>\n    "A title on its own line"\n\n'
        "More about [the installer][installer].\n\n"
        "## Links only\n\n[solo]: https://example.org/solo\n\n## Usage\n\nCall it.\n\n"
        "```\n[not a definition]: inside code\n```\n\n## Changes\n\n- Fixed [a bug].\n\n"
        "  [a bug]: https://example.org/issues/1\n  [^1]:\n    A footnote is text.\n"
    )
    out = chunks(text, budget=64)
    joined = "\n".join(c.text for c in out)
    assert "https://" not in joined and "page-7.md" not in joined and "A title" not in joined
    assert "[not a definition]: inside code" in joined  # code keeps its text
    install = [c for c in out if c.heading_path == ("Guide", "Install")]
    assert len(install) == 1 and all(c.tokens <= 64 for c in out)
    assert install[0].text == (
        "# Guide\n\n## Install\n\nRun the [installer] and read [Page 1].\n\n"
        "More about [the installer][installer]."
    )
    # A section holding nothing but definitions is body-less: its heading joins the next one.
    usage = next(c for c in out if c.heading_path == ("Guide", "Usage"))
    assert usage.text.startswith("## Links only\n\n## Usage\n\nCall it.")
    # Definitions indented under a list's last item belong to it, and go the same way.
    assert out[-1].text == "## Changes\n\n- Fixed [a bug].\n\n  [^1]:\n    A footnote is text."


def test_heading_attribute_lists_and_comment_marks_are_not_heading_text() -> None:
    text = (
        '# Changelog\n\n## 1.2.0 <small>May 1</small> { id="1.2.0" }\n\nFixed.\n\n'
        "## Setup {: #setup .new data-toc-label='Set up' }\n\nDo it.\n\n"
        "## Sets {a, b} and {c}\n\nMaths keeps its braces.\n\n## {#only-an-id}\n\nOdd.\n\n"
        "## <!-- md:setting config.enabled -->\n\nA site's macro names the setting.\n\n"
        '## <img src="logo.png"> <!-- --> { #logo }\n\nNo words at all.\n'
    )
    paths = [c.heading_path[-1] for c in chunks(text)]
    assert paths == [
        "1.2.0 May 1",
        "Setup",
        "Sets {a, b} and {c}",
        "{#only-an-id}",
        "md:setting config.enabled",
        "{ #logo }",  # nothing but the attribute list: kept rather than left empty
    ]


def test_heading_attribute_lists_leave_chunk_text() -> None:
    # A site that gives every heading an id ("## Origin { #origin }", the FastAPI docs) showed
    # it in every result's snippet; the page shows "Origin".
    text = (
        "# CORS { #cors }\n\nIntro.\n\n## Use `CORSMiddleware` {: #use .new }\n\nImport it.\n\n"
        "Setext title {#setext}\n------------\n\nBody.\n\n## {#only-an-id}\n\nOdd.\n\n"
        "```md\n## Kept { #kept }\n```\n\nSet {#x} in prose.\n"
    )
    assert "\n\n".join(c.text for c in chunks(text)) == (
        "# CORS\n\nIntro.\n\n## Use `CORSMiddleware`\n\nImport it.\n\n"
        "Setext title\n------------\n\nBody.\n\n## {#only-an-id}\n\nOdd.\n\n"
        "```md\n## Kept { #kept }\n```\n\nSet {#x} in prose."
    )


def test_html_blocks_of_only_tags_and_comments_make_no_chunk_of_their_own() -> None:
    # A docs page wraps an example in <div class="result" markdown> … </div>; cut at the budget,
    # the closing tag alone was a chunk ("</div>", 5 tokens). Comments are invisible too.
    body = " ".join(f"word{i}" for i in range(40))
    text = (
        f'# Icons\n\n## Colour\n\n<div class="result" markdown>\n\n{body}\n\n</div>\n\n'
        "## Size\n\n<!-- md:version 1.0 -->\n<!-- md:flag experimental -->\n\n"
        "## Script\n\n<script>\n  render(document.body)\n</script>\n\nIt renders.\n"
    )
    out = chunks(text, budget=48)
    assert [c.text for c in out if not any(ch.isalnum() for ch in _strip_tags(c.text))] == []
    assert out[-2].text.endswith("</div>")  # markup joins the text before it at the end
    assert out[-1].text.startswith("## Size")  # a section of only comments is body-less
    assert out[-1].text.endswith("## Script\n\nIt renders.")  # a script's body is code


def test_script_and_style_elements_leave_chunk_text() -> None:
    # VitePress and VuePress pages hold Vue <script setup> and <style> blocks; their code ran
    # in the browser and was indexed as the text of the section it ended (a redirect table of
    # hash names under "Default import unexpectedly returns an object").
    text = (
        "# Troubleshooting\n\n## Default import\n\nUse a named import.\n\n"
        '<script setup lang="ts">\nconst hashForOldVersion = { quellmark: 6 }\n'
        "if (version) { location.href = quellmark }\n</script>\n\n"
        "<STYLE>\n.grid { display: flex }\n</STYLE>\n\n## Later\n\nMore prose.\n"
    )
    out = chunks(text, budget=32)
    assert [(c.heading_path, c.text) for c in out] == [
        (
            ("Troubleshooting", "Default import"),
            "# Troubleshooting\n\n## Default import\n\nUse a named import.",
        ),
        (("Troubleshooting", "Later"), "## Later\n\nMore prose."),
    ]
    only = chunks("# Widget\n\n<script>\nmountWidget()\n</script>\n")
    assert len(only) == 1 and "mountWidget" in only[0].text  # a page of nothing else keeps it


def _strip_tags(text: str) -> str:
    import re

    return re.sub(r"<!--.*?-->|</?[A-Za-z][^<>]*>|#+ \w+", " ", text, flags=re.DOTALL)


def test_a_page_of_only_embeds_keeps_a_chunk_so_its_title_finds_it() -> None:
    # With markup blocks making no chunk, a demo page (a heading and an <iframe>) or an image
    # gallery had no chunk at all, so not even its title could find it.
    demo = chunks('# Quokka demo\n\n<iframe src="https://example.com/v"></iframe>\n')
    assert [(c.heading_path, c.text) for c in demo] == [
        (("Quokka demo",), '# Quokka demo\n\n<iframe src="https://example.com/v"></iframe>')
    ]
    gallery = chunks('<div class="grid">\n\n<img src="a.png" alt="">\n\n</div>\n')
    assert len(gallery) == 1 and "a.png" in gallery[0].text


@st.composite
def _docs_site_page(draw: st.DrawFn) -> tuple[list[str], set[str]]:
    """A page as documentation sites write them: sections, reference definitions, HTML wrappers.

    Returns the lines and the set of text lines (paragraph and code) a reader needs.
    """
    lines: list[str] = []
    texts: set[str] = set()
    for n in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["heading", "para", "refs", "html", "code", "list"]))
        if kind == "heading":
            lines.append("#" * draw(st.integers(1, 4)) + f" h{n} " + draw(_words))
        elif kind == "para":
            para = [f"p{n}x{i} " + draw(_words) for i in range(draw(st.integers(1, 4)))]
            lines += para
            texts.update(para)
        elif kind == "refs":
            lines += [
                f"  [r{n}x{i}]: https://e.org/{n}/{i}" for i in range(draw(st.integers(1, 30)))
            ]
        elif kind == "html":
            lines += draw(st.sampled_from([["<div class=x markdown>"], ["</div>"], ["<!-- m -->"]]))
        elif kind == "list":
            item = f"- l{n} " + draw(_words)
            lines += [item, "", f"  [li{n}]: https://e.org/li/{n}"]
            texts.add(item)
        else:
            body = [f"c{n}x{i} [k]: v" for i in range(draw(st.integers(1, 3)))]
            lines += ["```", *body, "```"]
            texts.update(body)
        lines.append("")
    return lines, texts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=_docs_site_page(), budget=st.sampled_from([32, 256]))
def test_docs_site_pages_keep_every_text_line_once_and_no_definition(
    page: tuple[list[str], set[str]], budget: int
) -> None:
    lines, texts = page
    out = chunks("\n".join(lines), budget=budget)
    for a, b in itertools.pairwise(out):
        assert a.end_line <= b.start_line
    words = " ".join(c.text for c in out).split()
    # Every line a reader needs is in the chunks once (a line over the budget is cut into word
    # pieces, so its marker p3x1, l2 or c0x1 is counted), in order; no definition is in any.
    markers = [line.split()[1 if line.startswith("- ") else 0] for line in lines if line in texts]
    assert [w for w in words if w in set(markers)] == markers
    assert not [w for w in words if w.startswith(("[r", "[li", "https://e.org"))]
    for c in out:
        # Each chunk holds text, not only headings and markup -- unless the page holds nothing
        # else, which keeps its markup as chunks so that its title still finds it.
        body = [ln for ln in c.text.split("\n") if ln.strip() and ln[0] not in "#<"]
        assert body or not texts, c


def test_headings_carried_onto_a_long_line_do_not_cut_it_into_characters() -> None:
    # Found by the property above: seven body-less headings before a list item longer than the
    # budget left 1 token per piece, and the item became 40 one-character chunks.
    heads = "".join(f"# h{i} a\n\n" for i in range(7))
    item = "- l7 " + " ".join(f"word{i}" for i in range(30))
    out = chunks(heads + item + "\n\n# h8 a\n", budget=32)
    assert len(out) <= 4 and all(len(c.text.split()) > 3 for c in out)
    assert " ".join(c.text for c in out).split().count("word17") == 1


def test_site_generator_markup_leaves_chunk_text_but_its_words_stay() -> None:
    text = (
        "# Config\n\n"
        "Set the option {{< new-in 0.123.0 >}} in your site.\n\n"
        "{{% note %}}\nThe cache lives in resources.\n{{% /note %}}\n\n"
        '{{< figure\n  src="cat.png"\n  caption="A cat on a mat"\n>}}\n\n'
        "{% include docs_badge.html %}\n"
        "Read {{ site.title }} docs. {: .note .info}\n\n"
        ":::tip[Did you know?]\nAdmonitions have bodies.\n:::\n\n"
        'Escaped: `{{< ref "x" >}}` stays.\n\n'
        '```go-html-template\n{{< figure src="a.png" >}}\n{% raw %}{{ page.title }}{% endraw %}\n:::note\n```\n'
    )
    assert whole_text(text) == (
        "# Config\n\n"
        "Set the option  in your site.\n\n"
        "The cache lives in resources.\n\n"
        "A cat on a mat\n\n"
        "Read  docs.\n\n"
        "Did you know?\nAdmonitions have bodies.\n\n"
        'Escaped: `{{< ref "x" >}}` stays.\n\n'
        '```go-html-template\n{{< figure src="a.png" >}}\n{% raw %}{{ page.title }}{% endraw %}\n:::note\n```'
    )


def test_a_heading_of_markup_and_a_section_of_only_markup() -> None:
    text = (
        "# Page\n\nIntro words here.\n\n## Render hooks {{< new-in 0.1 >}}\n\n"
        "{{< code-toggle file=hugo />}}\n\n## Use\n\nText of use.\n"
    )
    out = chunks(text)
    assert [c.heading_path for c in out] == [("Page",), ("Page", "Use")]
    assert "code-toggle" not in "".join(c.text for c in out)
    assert out[1].text.startswith("## Render hooks\n\n## Use")
    assert first_heading("## x\n\n# Title {{< badge >}}\n") == "Title"


def test_unclosed_markup_openers_stay_text_and_cost_one_pass() -> None:
    # Each try from an unclosed "{{<" stops at the next opener (it once read 2,000 characters
    # from each: 5 s for this line); the closed shortcode after them still goes.
    text = "{{<a " * 50_000 + "{{% note %}}kept words{{% /note %}}"
    joined = " ".join(c.text for c in chunks(text))
    assert joined.count("{{<a") == 50_000 and "kept words" in joined and "note" not in joined


def test_a_macro_call_keeps_the_words_the_page_shows() -> None:
    text = (
        "# Array.prototype.map()\n\n"
        'The {{jsxref("Array.prototype.map()")}} method of {{jsxref("Array")}} instances.\n\n'
        '{{EmbedInteractiveExample("pages/js/array-map.html")}}\n\n'
        'Set {{domxref("Element/innerHTML", "innerHTML", "", "")}} on a {{HTMLElement(\'div\')}}.\n\n'
        "{{Compat}} {{ site.title }}\n"
    )
    (chunk,) = chunks(text)
    assert chunk.text == (
        "# Array.prototype.map()\n\n"
        "The Array.prototype.map() method of Array instances.\n\n"
        "Set innerHTML on a div."
    )


def test_an_admonition_opener_keeps_the_title_the_site_shows() -> None:
    text = "::: tip\nUse a pipe.\n:::\n\n::: warning Mind the gap\nText.\n:::\n\n::: {.note}\nDiv.\n:::\n"
    (chunk,) = chunks(text)
    assert chunk.text == "tip\nUse a pipe.\n\nMind the gap\nText.\n\nDiv."


def test_a_padded_table_rule_neither_fills_a_chunk_nor_splits_the_table() -> None:
    # Prettier pads a table's delimiter row to its widest cells, and every dash is a token: the
    # rule of a wide table took a chunk's whole budget, was cut into chunks of nothing but
    # dashes, and parted the header row from the rows under it.
    wide = 180
    rows = [f"| `event.{n}` | {'fires once per session ' * 2}|" for n in range(4)]
    text = "\n".join(
        [
            "# Events",
            "",
            f"| Event | {'When it fires'.ljust(wide)} |",
            f"| ----- | :{'-' * wide}: |",
            *rows,
            "",
        ]
    )
    out = chunks(text, budget=256)
    assert len(out) == 1
    assert "| --- | :---: |" in out[0].text and out[0].text.endswith(rows[-1])
    assert out[0].tokens < 256
    # A code block's dashes and a long rule of dashes outside a table are left as written.
    code = f"# Code\n\n```\n| a |\n| {'-' * 40} |\n```\n\ntext\n"
    assert "-" * 40 in chunks(code)[0].text
    breaks = f"# Breaks\n\nOne.\n\n{'-' * 40}\n\nTitle\n{'-' * 40}\n\nTwo | three\n"
    assert "".join(c.text for c in chunks(breaks)).count("-" * 40) == 2  # a rule, a setext line


def test_a_mkdocstrings_directive_keeps_the_identifier_it_documents() -> None:
    # "::: fastapi.security.OpenIdConnect" once read ".security.OpenIdConnect": the first
    # dotted part was taken for an admonition type and dropped.
    text = "## OpenID Connect\n\n::: fastapi.security.OpenIdConnect\n\n::: tip\nShort.\n:::\n"
    (chunk,) = chunks(text)
    assert chunk.text == "## OpenID Connect\n\nfastapi.security.OpenIdConnect\n\ntip\nShort."


def test_slash_fenced_blocks_leave_chunk_text_but_their_titles() -> None:
    text = (
        "# Files\n\nServe them.\n\n/// note | Technical Details\n\nIt comes from Starlette.\n\n///\n\n"
        "/// tip\nMount it.\n///\n\n//// tab | Python 3.10+\nNested.\n////\n\n"
        "/// TODO fix this\n\n```text\n/// tip\n///\n```\n"
    )
    assert whole_text(text) == (
        "# Files\n\nServe them.\n\nTechnical Details\n\nIt comes from Starlette.\n\n"
        "tip\nMount it.\n\nPython 3.10+\nNested.\n\n"
        "/// TODO fix this\n\n```text\n/// tip\n///\n```"
    )


def test_include_directives_leave_chunk_text() -> None:
    # The build puts another file's text (or code the folder does not hold) in their place:
    # their path words are not the page's. Escaped, in prose or in code, they stay as written.
    text = (
        "# Tasks\n\nRun it:\n\n{* ../../docs_src/tasks/tutorial001_py310.py hl[1,13] *}\n\n"
        '--8<-- "docs/abbreviations.md"\n\n--8<--\nintro.md\nusage.md\n--8<--\n\n'
        "{!../README.md!}\n\n{{#include ../listings/intro.md}}\n\n"
        ';--8<-- "shown.md" and {!emphatic!} stay.\n\n```\n{* app.py *}\n```\n'
    )
    assert whole_text(text) == (
        '# Tasks\n\nRun it:\n\n;--8<-- "shown.md" and {!emphatic!} stay.\n\n```\n{* app.py *}\n```'
    )


def test_an_oversize_block_splits_into_even_pieces_not_a_runt() -> None:
    # Greedy full pieces left the last lines of a long code block ("};") or table (its last
    # rows) as a chunk of their own; the pieces are now of about equal size.
    body = [f"    step_{i}(value, other_value);" for i in range(40)]
    text = "# Steps\n\n```c\nvoid run() {\n" + "\n".join(body) + "\n};\n```\n"
    out = chunks(text, budget=128)
    sizes = [c.tokens for c in out]
    assert len(out) > 1 and all(size <= 128 for size in sizes)
    assert min(sizes) > max(sizes) / 2, sizes
    assert "\n".join(c.text for c in out).count("step_") == 40
    rows = [f"| `flag{i}` | sets the {i}th option of the command |" for i in range(30)]
    table = "# Flags\n\n| flag | meaning |\n| --- | --- |\n" + "\n".join(rows) + "\n"
    sizes = [c.tokens for c in chunks(table, budget=128)]
    assert len(sizes) > 1 and min(sizes) > max(sizes) / 2, sizes


def test_myst_directives_leave_chunk_text_but_their_titles_and_prose_bodies() -> None:
    # MyST (Jupyter Book, Sphinx) writes admonitions as fenced code with a "{name}" info string
    # and puts ":key: value" option lines and "(label)=" targets among the prose; a backtick
    # directive's body was kept verbatim as code, fence and options included.
    text = (
        "(setup)=\n# Setup\n\n"
        "```{note} Read first\n:class: dropdown\nSee [the guide](guide.md).\n```\n\n"
        "````{tip}\n```python\n# a comment, not a heading\nx = 1\n```\n````\n\n"
        ":::{grid-item-card}\n:link: basics/organize\n:link-type: doc\n:alt: A card\nCard words.\n:::\n\n"
        "```{code-cell} ipython3\n:tags: [hide-input]\nprint(1)\n```\n\n"
        "```{math}\n:label: my-eq\ne = mc^2\n```\n"
    )
    (chunk,) = chunks(text)
    assert chunk.text == (
        "# Setup\n\n"
        "Read first\nSee [the guide](guide.md).\n\n"
        "tip\n```python\n# a comment, not a heading\nx = 1\n```\n\n"
        "grid-item-card\nA card\nCard words.\n\n"
        "```{code-cell} ipython3\n:tags: [hide-input]\nprint(1)\n```\n\n"
        "```{math}\n:label: my-eq\ne = mc^2\n```"
    )
    assert chunk.heading_path == ("Setup",)
    assert (chunk.start_line, chunk.end_line) == (2, text.count("\n"))


def test_a_myst_directives_yaml_options_leave_chunk_text_but_its_caption() -> None:
    # MyST's other way to write options: a YAML block between "---" lines after the opener.
    text = (
        "# Figures\n\n"
        "```{figure} ../images/cool.jpg\n---\nwidth: 60%\nalt: A cool picture\n"
        "name: margin_figure\n---\nHere is my figure caption!\n```\n\n"
        ":::{note}\nA rule, then text.\n\n---\n\nMore text.\n:::\n\n"
        "```{code-cell} ipython3\n---\ntags: [hide-input]\n---\nprint(1)\n```\n"
    )
    (chunk,) = chunks(text)
    assert chunk.text == (
        "# Figures\n\n"
        "../images/cool.jpg\nA cool picture\nHere is my figure caption!\n\n"
        "note\nA rule, then text.\n\n---\n\nMore text.\n\n"
        "```{code-cell} ipython3\n---\ntags: [hide-input]\n---\nprint(1)\n```"
    )
