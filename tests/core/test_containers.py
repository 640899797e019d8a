"""MkDocs admonitions, details and content tabs: bodies read as Markdown, not as code."""

from __future__ import annotations

from pinakes_core.index.chunking import chunk_document
from pinakes_core.index.tokens import token_counter
from pinakes_core.read.containers import unindent_containers
from pinakes_core.read.links import read_text

PAGE = (
    "# Setup\n\n"
    '!!! note "Read first"\n\n'
    "    See [the guide](guide.md) and [install][].\n\n"
    "    [install]: install.md\n\n"
    '=== "pip"\n\n'
    "    - run [pip](pip.md)\n\n"
    "    ??? tip\n\n"
    "        Nested: [tips](tips.md).\n\n"
    '===+ "docker"\n\n'
    "\tTabs count as four: [docker](docker.md).\n\n"
    "        code indented inside a body stays code: [no](code.md)\n\n"
    "```\n!!! note\n\n    [example](example.md)\n```\n"
)


def test_bodies_move_left_keeping_line_count_and_leaving_code_alone() -> None:
    lines = PAGE.split("\n")
    out = unindent_containers(lines)
    assert len(out) == len(lines)
    assert "See [the guide](guide.md) and [install][]." in out
    assert "[install]: install.md" in out
    assert "Nested: [tips](tips.md)." in out  # 8 spaces under a tab's tip: both levels
    assert "Tabs count as four: [docker](docker.md)." in out
    # An opener inside fenced code (the docs showing the syntax) opens nothing.
    assert "    [example](example.md)" in out
    plain = ["Text", "", "    code block", ""]
    assert unindent_containers(plain) is plain  # no opener: the very same list
    # "!!!" in prose that is no opener leaves an indented code block code.
    shout = ["!!! Breaking change !!!", "", "    code", ""]
    assert unindent_containers(shout) is shout


def test_links_inside_admonitions_and_tabs_are_read() -> None:
    links = {link.target for link in read_text(PAGE, markdown=True)[0]}
    assert {"guide.md", "install.md", "pip.md", "tips.md", "docker.md"} <= links
    assert "example.md" not in links  # fenced code
    assert "code.md" not in links  # 8 spaces in a tab: code inside its body, as MkDocs reads it


def test_chunk_text_is_the_documents_own_and_definitions_in_admonitions_leave() -> None:
    out = chunk_document(PAGE, markdown=True, budget=256, count=token_counter())
    joined = "\n".join(c.text for c in out)
    assert "[install]: install.md" not in joined  # a definition, now seen as one
    assert "    See [the guide](guide.md) and [install][]." in joined  # indent kept in text
    assert "\tTabs count as four" in joined


def test_deeply_nested_bodies_move_by_their_depth_in_one_pass() -> None:
    depth = 400
    lines = []
    for level in range(depth):
        lines += [" " * (4 * level) + "!!! note", ""]
    lines += [" " * (4 * depth) + "Innermost text.", "", "After."]
    out = unindent_containers(lines)
    assert len(out) == len(lines)
    assert all(line == "!!! note" for line in out[0 : 2 * depth : 2])
    assert out[-3:] == ["Innermost text.", "", "After."]
    # A body ends at the first line indented less than it: the sibling is not moved further.
    sibling = ["!!! a", "    !!! b", "        deep", "    shallow", "top"]
    assert unindent_containers(sibling) == ["!!! a", "!!! b", "deep", "shallow", "top"]


def test_myst_prose_directives_are_read_as_markdown_and_code_directives_stay_code() -> None:
    page = (
        "```{note} Read first\n:class: dropdown\nSee [the guide](guide.md).\n```\n\n"
        "````{prf:theorem}\n```python\n[no](in-code.md)\n```\nProved in [proof](proof.md).\n````\n\n"
        "~~~{code-cell} ipython3\n[no](cell.md)\n~~~\n\n"
        "```{unknown-extension}\n[no](unknown.md)\n```\n\n"
        "```md\n```{note}\n[no](example.md)\n```\n"
    )
    lines = page.split("\n")
    out = unindent_containers(lines)
    assert len(out) == len(lines)
    assert out[0] == ":::{note} Read first" and out[3] == ":::"
    assert out[5] == "::::{prf:theorem}" and out[6] == "```python" and out[10] == "::::"
    links = {link.target for link in read_text(page, markdown=True)[0]}
    assert links == {"guide.md", "proof.md"}
    plain = ["```{code-block} python", "x = 1", "```"]
    assert unindent_containers(plain) is plain  # nothing to turn: the very same list
