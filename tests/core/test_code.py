"""Code sources (issue 18): sections at definitions, symbol heading paths, identifier search."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, db, make_kb, set_config
from pinakes_core import KB
from pinakes_core.read.code import code_sections, identifier_terms, is_code
from pinakes_core.read.sources import source_type

PYTHON = '''"""Parse HTTP things."""

import re

LIMIT = 10


# Parses one response.
@cache
def parse_http_response(raw: bytes) -> dict:
    """Split the head from the body."""
    head, _, body = raw.partition(b"\\r\\n\\r\\n")
    return {"head": head, "body": body}


class UserStore:
    """Users by id."""

    def getUserName(self, user_id: int) -> str:
        return self.names[user_id]

    def set_user_name(self, user_id: int, name: str) -> None:
        self.names[user_id] = name


if __name__ == "__main__":
    print(parse_http_response(b""))
'''


def _named(text: str, sections: list[tuple[tuple[str, ...], int, int]]) -> dict[str, str]:
    lines = text.split("\n")
    named: dict[str, str] = {}
    for path, a, b in sections:
        text = "\n".join(lines[a:b]).strip()
        if path and text:
            named.setdefault(" › ".join(path), text)
    return named


def test_python_sections_are_top_level_definitions_with_their_decorators() -> None:
    sections = code_sections(PYTHON, ".py", large=100)
    named = _named(PYTHON, sections)
    assert list(named) == ["parse_http_response", "UserStore"]
    assert named["parse_http_response"].startswith("# Parses one response.\n@cache\ndef ")
    # Every non-blank line is in exactly one section, in order.
    covered = [i for _, a, b in sections for i in range(a, b)]
    assert covered == sorted(set(covered))
    lines = PYTHON.split("\n")
    assert {i for i, line in enumerate(lines) if line.strip()} <= set(covered)


def test_a_large_python_class_is_cut_at_its_methods() -> None:
    named = _named(PYTHON, code_sections(PYTHON, ".py", large=3))
    assert "UserStore › getUserName" in named and "UserStore › set_user_name" in named
    assert named["UserStore"].startswith("class UserStore:")


def test_python_that_does_not_parse_falls_back_to_the_heuristic() -> None:
    broken = "def ok():\n    return 1\n\ndef broken(:\n    pass\n"
    assert list(_named(broken, code_sections(broken, ".py", large=100))) == ["ok", "broken"]


@pytest.mark.parametrize(
    ("suffix", "source", "names"),
    [
        (
            ".go",
            "package main\n\n// Server serves.\ntype Server struct {\n}\n\n"
            "func (s *Server) Start(port int) error {\n\treturn nil\n}\n",
            ["Server", "Server.Start"],
        ),
        (
            ".ts",
            'import x from "y";\n\n/** Adds. */\nexport function addNumbers(a: number) {\n}\n\n'
            "export const handler = async () => {\n};\n\nexport default class Widget {\n}\n",
            ["addNumbers", "handler", "Widget"],
        ),
        (
            ".c",
            "#include <stdio.h>\n\nstatic int helper(int x);\n\n/* entry */\n"
            "int main(int argc, char **argv)\n{\n    if (argc) {\n    }\n    return 0;\n}\n",
            ["main"],
        ),
        (
            ".rs",
            "use std::io;\n\n#[derive(Debug)]\npub struct Point {\n}\n\nimpl Point {\n}\n\n"
            "pub(crate) fn distance(a: &Point) -> f64 {\n    0.0\n}\n",
            ["Point", "Point", "distance"],
        ),
    ],
)
def test_other_languages_use_the_definition_heuristic(
    suffix: str, source: str, names: list[str]
) -> None:
    sections = code_sections(source, suffix, large=100)
    assert [" › ".join(p) for p, _, _ in sections if p] == names
    first = next((a for p, a, _ in sections if p), 0)
    lead = source.split("\n")[first]
    assert not lead.startswith((" ", "\t"))  # a section starts at column 0 (or its comment)


def test_identifier_terms_split_snake_and_camel_case() -> None:
    terms = identifier_terms("parse_http_response(getUserName, HTTPServer2, x, plain)").split()
    for term in ("parse", "http", "response", "parsehttpresponse", "get", "user", "name"):
        assert term in terms
    assert "server" in terms and "2" in terms
    assert "plain" not in terms and "x" not in terms  # single words are in the text already


@given(st.text(max_size=300))
def test_code_sections_never_raise_and_stay_in_bounds(text: str) -> None:
    for suffix in (".py", ".js"):
        count = len(text.split("\n"))
        for _, start, end in code_sections(text, suffix, large=5):
            assert 0 <= start <= end <= count


def test_source_types_by_name() -> None:
    assert [source_type(p) for p in ("a.md", "b.PDF", "c.py", "d.txt", "e.rst")] == [
        "markdown",
        "pdf",
        "code",
        "text",
        "text",
    ]
    assert is_code("src/x.tsx") and not is_code("notes.py.md") and not is_code("Makefile")


# -- a KB with code --------------------------------------------------------------------------


@pytest.fixture
def code_kb(tmp_path: Path, fake_embedder: FakeHashEmbedder) -> KB:
    root = make_kb(
        tmp_path / "repo",
        {"src/http.py": PYTHON, "README.md": "# Repo\n\nThe user store keeps names.\n"},
    )
    set_config(root, "sync", 'include = ["**/*.md", "**/*.py"]')
    return KB.open(root, embedder=fake_embedder)


def test_code_is_opt_in(tmp_path: Path, fake_embedder: FakeHashEmbedder) -> None:
    root = make_kb(tmp_path / "repo", {"src/http.py": PYTHON, "README.md": "# Repo\n"})
    report = KB.open(root, embedder=fake_embedder).sync()
    assert report.added == ["README.md"]


def test_code_chunks_carry_symbol_paths_and_are_found_by_identifier_parts(code_kb: KB) -> None:
    code_kb.sync()
    rows = db(code_kb.root).execute(
        "SELECT c.heading_path, d.title, d.source_type FROM chunks c JOIN documents d "
        "USING (doc_id) WHERE d.path = 'src/http.py' ORDER BY c.ordinal"
    )
    paths = [(r[0], r[1], r[2]) for r in rows]
    assert ('["parse_http_response"]', "http.py", "code") in paths
    assert any(p[0].startswith('["UserStore"') for p in paths)
    # "user name" finds getUserName; the camel-case spelling finds the snake-case function.
    hit = code_kb.search("user name", source_type="code", channels=["bm25"]).hits[0]
    assert "getUserName" in hit.text and hit.heading_path[0] == "UserStore"
    hits = code_kb.search("parseHttpResponse", channels=["bm25"], group_by="chunk").hits
    assert hits and {h.source_type for h in hits} == {"code"}
    assert ["parse_http_response"] in [h.heading_path for h in hits]
    assert all(h.page_start is None for h in hits)
    # Markdown chunks index no identifier parts: their BM25 is what it was.
    empty = db(code_kb.root).execute(
        "SELECT COUNT(*) FROM chunks_fts f JOIN chunks c ON c.chunk_id = f.rowid "
        "JOIN documents d USING (doc_id) WHERE d.source_type = 'markdown' AND f.idents != ''"
    )
    assert empty.fetchone()[0] == 0


def test_reading_code_returns_the_file(code_kb: KB) -> None:
    code_kb.sync()
    view = code_kb.read("src/http.py", lines=(9, 13))
    assert view.text.startswith("@cache\ndef parse_http_response")
    assert view.source_type == "code" and view.pages is None
