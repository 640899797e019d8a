"""Token budgets and heading sections used by pinakes_read."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_core.read.sections import approx_tokens, find_section, headings, section_span, truncate

DOC = (
    "---\ntitle: T\n# not a heading: frontmatter\n---\n"
    "# Top\n\nintro\n\n"
    "## A\n\ntext a\n\n```sh\n# a comment, not a heading\n```\n\n"
    "### A.1\n\ndeep\n\n"
    "## B ##\n\ntext b\n\n"
    "~~~\n## fenced\n~~~\n"
    "# Second\n\nlast\n"
)


def test_headings_skip_frontmatter_and_fenced_code() -> None:
    found = headings(DOC)
    assert [(h.level, h.title) for h in found] == [
        (1, "Top"),
        (2, "A"),
        (3, "A.1"),
        (2, "B"),
        (1, "Second"),
    ]
    assert found[2].path == ("Top", "A", "A.1")
    assert found[4].path == ("Second",)


def test_a_section_runs_to_the_next_heading_of_its_level() -> None:
    found = find_section(DOC, "a")
    assert found is not None
    heading, text = found
    assert heading.path == ("Top", "A")
    assert text.startswith("## A\n") and "### A.1" in text and "deep" in text
    assert "text b" not in text
    deep = find_section(DOC, "Top › A › A.1")
    assert deep is not None and deep[1] == "### A.1\n\ndeep\n"
    assert find_section(DOC, "A > A.1") is not None
    assert find_section(DOC, "Second > A") is None
    assert find_section(DOC, "fenced") is None


def test_a_heading_holding_a_path_separator_is_found_by_its_text() -> None:
    # "## Input > Output" could not be read by section: the name was split at " > " and
    # matched as a two-level path, while the error listed 'Input > Output' as a heading.
    text = "# Guide\n\n## Input > Output\n\nmapping\n\n## A › B\n\nother\n"
    for name in ("Input > Output", "guide › input > output", "A › B", "Guide > A > B"):
        found = find_section(text, name)
        assert found is not None, name
    assert find_section(text, "Input > Output")[1] == "## Input > Output\n\nmapping\n"  # type: ignore[index]
    assert find_section(text, "Output") is None


def test_truncate_cuts_at_a_paragraph_break() -> None:
    text = "\n\n".join(f"paragraph {i} " + "x" * 70 for i in range(20))
    cut, truncated = truncate(text, 100)
    assert truncated and approx_tokens(cut) <= 100
    assert text.startswith(cut.rstrip("\n")) and cut.rstrip("\n").endswith("x")
    assert truncate("short", 100) == ("short", False)


@given(st.text(max_size=3000), st.integers(min_value=1, max_value=500))
def test_truncate_never_exceeds_the_budget(text: str, budget: int) -> None:
    cut, truncated = truncate(text, budget)
    assert approx_tokens(cut) <= budget + 1  # +1: the newline a cut text ends with
    assert truncated == (approx_tokens(text) > budget)
    if not truncated:
        assert cut == text


@given(st.text(max_size=2000))
def test_headings_never_raise_and_sections_start_at_their_heading(text: str) -> None:
    found = headings(text)
    starts = {h.line for h in found}
    for heading in found:
        span = section_span(text, " › ".join(heading.path))
        assert span is not None and span[1] in starts


def test_sections_are_the_chunkers_so_every_hit_path_can_be_read(tmp_path: Path) -> None:
    # An outline's "- ## Usage", a heading inside an admonition, a setext heading and one with
    # code marks: hits carry these paths, and a read by that path finds the section.
    root = make_kb(
        tmp_path / "kb",
        {
            "outline.md": "- ## Usage\n\t- Press the zebra key to cycle markers.\n- ## Other\n\t- x\n",
            "admonition.md": (
                "# Setup\n\n!!! note\n\n    ## Caveats\n\n    The zebra cable is fragile.\n"
            ),
            "setext.md": "Install `pnk`\n=============\n\nRun the zebra installer.\n",
            "plain.md": "# Party\n\n- # of guests: 40\n\nThe zebra room is small.\n",
        },
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hits = kb.search("zebra", k=10, channels=["bm25"]).hits
        paths = {hit.path: hit.heading_path for hit in hits}
        assert paths == {
            "outline.md": ["Usage"],
            "admonition.md": ["Setup", "Caveats"],
            "setext.md": ["Install pnk"],
            "plain.md": ["Party"],
        }
        for hit in hits:
            view = kb.read(hit.path, section=" › ".join(hit.heading_path))
            assert "zebra" in view.text, hit.path
        assert kb.read("setext.md", section="Install `pnk`").text.startswith("Install `pnk`")
