"""A frontmatter description (``description:``, ``summary:``, ``desc:``) is a chunk of its own."""

from __future__ import annotations

from pathlib import Path

from conftest import FakeHashEmbedder, make_kb, set_config
from pinakes_core import KB
from pinakes_core.config import FrontmatterConfig
from pinakes_core.index.chunking import chunk_document, with_description
from pinakes_core.index.tokens import token_counter
from pinakes_core.read.frontmatter import MAX_DESCRIPTION_CHARS, parse_frontmatter

COUNT = token_counter()

PAGE = (
    "---\n"
    "title: Relay wiring\n"
    "description: >-\n"
    "  How to connect the quantum gizmo\n"
    "  to the main switchboard.\n"
    "\n"
    "tags: [hardware]\n"
    "---\n"
    "# Relay wiring\n"
    "\n"
    "Plug the cable into port 7.\n"
)


def test_the_description_and_the_lines_of_its_key_are_read() -> None:
    front = parse_frontmatter("a.md", PAGE.split("\n"))
    assert front.description == "How to connect the quantum gizmo to the main switchboard."
    assert front.description_lines == (3, 5)  # the key's line and its folded value, not the blank


def test_the_first_key_with_text_wins_and_an_empty_one_is_skipped() -> None:
    lines = ["---", "desc: ''", "summary: Short account.", "---", "Body."]
    front = parse_frontmatter("a.md", lines)
    assert (front.description, front.description_lines) == ("Short account.", (3, 3))
    assert parse_frontmatter("a.md", lines, FrontmatterConfig(description=[])).description is None


def test_toml_a_nested_key_and_an_overlong_value() -> None:
    toml = ["+++", 'title = "T"', 'description = "From TOML."', "+++", "Body."]
    assert parse_frontmatter("a.md", toml).description_lines == (3, 3)
    flow = ["---", "{title: T, description: In a flow mapping.}", "---", "Body."]
    front = parse_frontmatter("a.md", flow)
    assert (front.description, front.description_lines) == ("In a flow mapping.", (1, 3))
    huge = ["---", "description: " + "word " * 2000, "---", "Body."]
    text = parse_frontmatter("a.md", huge).description
    assert text is not None and len(text) == MAX_DESCRIPTION_CHARS and text.endswith("…")


def test_the_description_leads_the_chunks_within_the_budget() -> None:
    front = parse_frontmatter("a.md", PAGE.split("\n"))
    body = chunk_document(PAGE, markdown=True, budget=256, count=COUNT, skip_lines=front.end_line)
    out = with_description(
        body,
        front.description,
        front.description_lines,
        title="Relay wiring",
        budget=256,
        count=COUNT,
    )
    assert [c.ordinal for c in out] == [0, 1]
    assert (out[0].text, out[0].heading_path, out[0].start_line, out[0].end_line) == (
        "How to connect the quantum gizmo to the main switchboard.",
        (),
        3,
        5,
    )
    assert out[1].text == body[0].text and out[1].start_line == body[0].start_line
    long = with_description([], "alpha " * 400, (2, 2), title="T", budget=32, count=COUNT)
    assert long[0].tokens <= 32 and long[0].text.startswith("alpha alpha")
    # A blob the tokenizer counts as one token is cut by characters (16 per budgeted token).
    blob = with_description([], "ab" * 450, (2, 2), title="T", budget=32, count=COUNT)
    assert blob[0].text == "ab" * 256
    # Chinese has no spaces between words: the cut keeps most of the budget, not one "word".
    cjk = "Hugo 是一个用 Go 编写的静态网站生成器，" + "它的速度非常快，而且很灵活。" * 40
    piece = with_description([], cjk, (2, 2), title="T", budget=64, count=COUNT)[0]
    assert 32 <= piece.tokens <= 64 and cjk.startswith(piece.text)


def test_only_text_is_a_description() -> None:
    # A theme's switch (summary: false), a number or a date says nothing of the page.
    for value in ("false", "42", "2024-01-02"):
        lines = ["---", f"summary: {value}", "---", "Body."]
        assert parse_frontmatter("a.md", lines).description is None
    lines = ["---", "summary: [First line., 2, Second line.]", "---", "Body."]
    assert parse_frontmatter("a.md", lines).description == "First line. Second line."


def test_nothing_is_added_when_it_repeats_the_title_or_the_opening_text() -> None:
    body = chunk_document(
        "Plug the cable into port 7 today.", markdown=True, budget=256, count=COUNT
    )
    for text in ("Relay Wiring", "plug the cable  into port 7", "", None):
        assert (
            with_description(body, text, (2, 2), title="Relay wiring", budget=256, count=COUNT)
            == body
        )


def test_a_word_only_in_the_description_finds_the_document(tmp_path: Path) -> None:
    files = {
        "wiring.md": PAGE,
        "other.md": "---\ntitle: Other\n---\n# Other\n\nNothing about switchboards here... quantum.\n",
    }
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hits = kb.search("gizmo", channels=["bm25"]).hits
        assert [(h.path, h.chunk, h.lines) for h in hits] == [("wiring.md", 0, (3, 5))]
    set_config(root, "frontmatter", "description = []")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()  # another [frontmatter] setting: every document is read again
        assert kb.search("gizmo", channels=["bm25"]).hits == []
