"""Outliner pages (Logseq): sections inside bullets, hidden block properties, namespaced names."""

from __future__ import annotations

from pinakes_core.index.chunking import chunk_document
from pinakes_core.index.tokens import token_counter
from pinakes_core.read.documents import name_title

COUNT = token_counter()

PAGE = (
    "type:: [[Feature]]\n"
    "description:: Marks blocks as tasks\n\n"
    "- ## Usage\n"
    "  id:: 6103e488-22d4-4751-b27a-69b278067c26\n"
    "\t- Press `Ctrl+Enter` to cycle the markers.\n"
    "\t  collapsed:: true\n"
    "\t  updated-at:: 1609231528688\n"
    "\t\t- LATER do grocery\n"
    "- ## Functionality\n"
    "\t- ### Priorities\n"
    "\t\t- Three priorities: `/A`, `/B`, `/C`.\n"
    "\t\t  card-repeats:: 4\n"
    "\t\t  logseq.order-list-type:: number\n"
    "\t- ### Deadlines\n"
    "\t\t- ```\n"
    "\t\t  id:: 6103e488-22d4-4751-b27a-69b278067c26\n"
    "\t\t  ```\n"
)


def test_headings_inside_bullets_open_sections() -> None:
    out = chunk_document(PAGE, markdown=True, budget=256, count=COUNT)
    assert [c.heading_path for c in out] == [
        (),
        ("Usage",),
        ("Functionality", "Priorities"),
        ("Functionality", "Deadlines"),
    ]
    assert out[1].text.startswith("- ## Usage\n\t- Press")
    assert out[2].text.startswith("- ## Functionality\n\t- ### Priorities")  # body-less: joins


def test_hidden_block_properties_leave_chunk_text_but_user_properties_and_code_stay() -> None:
    joined = "\n".join(c.text for c in chunk_document(PAGE, markdown=True, budget=256, count=COUNT))
    for hidden in ("collapsed::", "updated-at::", "card-repeats::", "order-list-type::"):
        assert hidden not in joined
    assert joined.count("id:: 6103e488") == 1  # the one in fenced code is an example: kept
    assert "type:: [[Feature]]" in joined and "description:: Marks" in joined


def test_a_list_without_headings_is_chunked_as_before() -> None:
    text = "# Notes\n\n- one\n- two\n  - three\n"
    out = chunk_document(text, markdown=True, budget=256, count=COUNT)
    assert [(c.heading_path, c.text) for c in out] == [(("Notes",), text.rstrip("\n"))]


def test_namespaced_file_names_read_as_page_names() -> None:
    assert name_title("Whiteboard___Tool___Eraser") == "Whiteboard/Tool/Eraser"
    assert name_title("Whiteboard%2FCanvas") == "Whiteboard/Canvas"
    assert name_title("notes_2024") == "notes_2024"
    assert name_title("___") == "___"


def test_a_folder_page_without_a_title_is_named_by_its_folder() -> None:
    assert name_title("_index", "hugo-modules") == "hugo-modules"
    assert name_title("README", "Whiteboard___Tool") == "Whiteboard/Tool"
    assert name_title("index", "") == "index"  # at the KB's root the stem stays
    assert name_title("indexes", "guide") == "indexes"
    # A folder a site generator does not publish (Hugo's _common) reads without its underscore.
    assert name_title("_index", "_common") == "common"
    assert name_title("_index", "__") == "__"


def test_long_url_query_strings_leave_chunk_text_short_ones_stay() -> None:
    signed = "https://cdn.example.com/a/photo.jpeg?Expires=4762830816&Signature=" + "h~yT" * 40
    text = f"- ![photo]({signed})\n- [search](https://example.com/s?q=pinakes&page=2)\n"
    joined = "\n".join(c.text for c in chunk_document(text, markdown=True, budget=256, count=COUNT))
    assert "https://cdn.example.com/a/photo.jpeg?…)" in joined and "Signature" not in joined
    assert "https://example.com/s?q=pinakes&page=2" in joined


def test_long_queries_in_code_stay_and_a_hostile_line_is_cut_in_one_pass() -> None:
    query = "?warehouse_code=EU-WEST-7&include_line_items=true&page_size=500&cursor=abcdef0123"
    text = (
        f"Call `https://api.example.com/v2/orders{query}`, then parse it.\n\n"
        f'```bash\ncurl "https://api.example.com/v2/orders{query}"\n```\n'
    )
    joined = "\n".join(c.text for c in chunk_document(text, markdown=True, budget=256, count=COUNT))
    assert joined.count("include_line_items") == 2  # inline code and a fence: what the user wrote
    # Thousands of scheme-like starts on one line: once a minute of backtracking, now linear.
    hostile = "a://" * 250_000 + "?" + "q" * 80
    out = chunk_document(hostile, markdown=False, budget=256, count=COUNT)
    assert out[-1].text.endswith("?…") and "q" not in "".join(c.text for c in out)


def test_a_heading_inside_a_list_of_a_plain_note_is_list_text() -> None:
    # "- # of guests" is a heading inside a list item to CommonMark; on a page that is not an
    # outline it opens no section, and the text after the list stays under "Party".
    text = "# Party\n\nPlan:\n\n- # of guests: 40\n- # of tables: 5\n\nWe need a bigger room.\n"
    out = chunk_document(text, markdown=True, budget=256, count=COUNT)
    assert [c.heading_path for c in out] == [("Party",)]
