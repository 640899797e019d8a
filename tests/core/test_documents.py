"""Which files are documents, their metadata, and every bad input of DESIGN §13."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, db, doc_ids, make_kb, scalar, set_config
from pinakes_core import KB, SyncReport
from pinakes_core.read.frontmatter import parse_frontmatter


def _sync(root: Path) -> SyncReport:
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        return kb.sync()


def _skip_reason(report: SyncReport, path: str) -> str:
    reasons = [s.reason for s in report.skipped if s.path == path]
    assert len(reasons) == 1, f"{path} not skipped exactly once: {report.skipped}"
    return reasons[0]


# -- frontmatter and sidecar metadata ---------------------------------------------------------


def test_frontmatter_is_read_and_merged_with_the_sidecar(kb_root: Path, fake_embedder) -> None:
    (kb_root / "raft.md.pnk.yaml").write_text(
        "title: Raft, the sidecar title\ntags: [Extra, consensus, '#Quorum']\naliases: [rafty]\n",
        encoding="utf-8",
    )
    with KB.open(kb_root, embedder=fake_embedder) as kb:
        kb.sync()
        view = kb.read("raft.md")
        assert view.title == "Raft, the sidecar title"  # the sidecar wins over frontmatter
        assert sorted(view.tags) == ["consensus", "distributed", "extra", "quorum"]
        assert sorted(view.aliases) == ["raft-protocol", "rafty"]
        # The frontmatter block is not indexed as text.
        assert scalar(kb_root, "SELECT COUNT(*) FROM chunks WHERE text LIKE '%aliases:%'") == 0

        for tags in (["extra"], ["distributed", "EXTRA"], ["#Quorum"]):
            hits = kb.search("leader", tags=tags).hits
            assert hits, tags
            assert {h.path for h in hits} == {"raft.md"}
        assert kb.search("leader", tags=["extra", "nonexistent"]).hits == []


def test_title_falls_back_to_frontmatter_then_h1_then_stem(kb: KB) -> None:
    kb.sync()
    assert kb.read("raft.md").title == "Raft consensus"  # frontmatter
    assert kb.read("notes/paxos.md").title == "Paxos"  # first H1
    assert kb.read("notes/gardening.txt").title == "gardening"  # file stem


def test_malformed_frontmatter_warns_and_still_indexes(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"bad.md": "---\ntitle: [unclosed\n---\n# Body\n\nkumquat\n"})
    report = _sync(root)
    assert report.added == ["bad.md"]
    assert any("bad.md" in w and "frontmatter" in w for w in report.warnings)
    assert scalar(root, "SELECT title FROM documents") == "Body"


def test_toml_frontmatter_of_hugo_and_zola_sites_is_read_not_indexed_as_text(
    tmp_path: Path,
) -> None:
    page = (
        '+++\ntitle = "Deploying the gateway"\ntags = ["ops", "gateway"]\n'
        'aliases = ["gateway deploy"]\ndate = 2024-05-01\ndraft = false\n+++\n\n'
        "Roll out with kumquat canaries.\n"
    )
    broken = '+++\ntitle = "unclosed\n+++\n# Broken\n\nsome text\n'
    deep = "+++\nx = " + "[" * 5000 + "]" * 5000 + "\n+++\n# Deep\n\nbody\n"
    root = make_kb(tmp_path / "kb", {"deploy.md": page, "broken.md": broken, "deep.md": deep})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        view = kb.read("deploy.md")
        assert (view.title, view.tags, view.aliases) == (
            "Deploying the gateway",
            ["ops", "gateway"],
            ["gateway deploy"],
        )
        assert kb.search("kumquat", meta=["draft=false"], channels=["bm25"]).hits
        # the block is frontmatter, not text: its words are not indexed
        assert not kb.search("draft", channels=["bm25"]).hits
        assert {kb.read(p).title for p in ("broken.md", "deep.md")} == {"Broken", "Deep"}
    assert any("broken.md" in w and "TOML" in w for w in report.warnings)
    assert any("deep.md" in w and "nested too deeply" in w for w in report.warnings)


def test_a_toml_block_after_blank_lines_is_frontmatter_a_yaml_one_is_not() -> None:
    zola = ["", "", "+++", 'title = "Ergo"', 'description = "A blog theme"', "+++   ", "# Ergo"]
    front = parse_frontmatter("themes/ergo/index.md", zola)
    assert (front.title, front.description, front.end_line) == ("Ergo", "A blog theme", 6)
    assert front.description_lines == (5, 5)
    # After blank lines "---" is a Markdown rule: "title: x" then "---" is a setext heading.
    rule = ["", "---", "title: x", "---", "body"]
    assert (parse_frontmatter("a.md", rule).title, parse_frontmatter("a.md", rule).end_line) == (
        None,
        0,
    )
    assert parse_frontmatter("a.md", ["", "+++", 'title = "never closed"']).end_line == 0


# -- which files are documents ---------------------------------------------------------------


def test_gitignore_include_exclude_and_dot_directories(tmp_path: Path) -> None:
    files = {
        "keep.md": "# Keep\n\nkept\n",
        "plain.txt": "plain text\n",
        "other.markdown": "# Other\n\nkept too\n",
        "data.csv": "a,b\n",
        "drafts/draft.md": "# Draft\n\nignored by root .gitignore\n",
        "secret.private.md": "ignored by a root glob\n",
        "notes/public.md": "# Public\n\nkept\n",
        "notes/hidden.md": "ignored by notes/.gitignore\n",
        "notes/deep/hidden.md": "ignored by notes/.gitignore at depth\n",
        "hidden.md": "not ignored: the nested rule is scoped to notes/\n",
        "archive/old.md": "excluded by [sync] exclude\n",
        ".obsidian/workspace.md": "dot directory\n",
        ".git/info.md": "dot directory\n",
        "sub/.trash/x.md": "nested dot directory\n",
        "site/node_modules/pkg/README.md": "an installed package\n",
        "__pycache__/x.md": "a cache\n",
        "my_node_modules/notes.md": "# Kept\n\nonly the exact name is skipped\n",
    }
    root = make_kb(tmp_path / "kb", files)
    (root / ".gitignore").write_text(
        (root / ".gitignore").read_text() + "drafts/\n*.private.md\n", encoding="utf-8"
    )
    (root / "notes" / ".gitignore").write_text("hidden.md\n", encoding="utf-8")
    set_config(root, "sync", 'exclude = ["archive/**"]')

    report = _sync(root)
    expected = [
        "hidden.md",
        "keep.md",
        "my_node_modules/notes.md",
        "notes/public.md",
        "other.markdown",
        "plain.txt",
    ]
    assert sorted(report.added) == expected
    assert sorted(doc_ids(root)) == expected

    # With gitignore off, ignored files come in; exclude, dot and vendored folders still apply.
    set_config(root, "sync", "gitignore = false")
    report = _sync(root)
    assert sorted(report.added) == [
        "drafts/draft.md",
        "notes/deep/hidden.md",
        "notes/hidden.md",
        "secret.private.md",
    ]


def test_a_gitignore_line_git_cannot_read_is_skipped_not_fatal(tmp_path: Path) -> None:
    # `build\` (a Windows-style path) in a .gitignore made pathspec raise out of every sync,
    # status and adopt; git itself skips such a line.
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nalpha\n", "notes/b.md": "# B\n\nbeta\n"})
    (root / ".gitignore").write_text("build\\\n", encoding="utf-8")
    (root / "notes" / ".gitignore").write_text("drafts\\\nb.md\n", encoding="utf-8")
    report = _sync(root)
    assert report.added == ["a.md"]  # notes/b.md is still ignored by the valid line


def test_include_globs_restrict_documents(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\na\n", "b.txt": "b\n", "docs/c.rst": "c\n"})
    set_config(root, "sync", 'include = ["**/*.md", "docs/*.rst"]')
    assert sorted(_sync(root).added) == ["a.md", "docs/c.rst"]


# -- DESIGN §13 bad inputs -------------------------------------------------------------------


def test_binary_file_is_skipped(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb", {"ok.md": "# Ok\n\nfine\n", "blob.md": b"PK\x03\x04\x00\x00binary"}
    )
    report = _sync(root)
    assert report.added == ["ok.md"]
    reason = _skip_reason(report, "blob.md")
    assert "binary" in reason and "NUL" in reason
    assert not (root / "blob.md.pnk.yaml").exists()


def test_status_does_not_count_a_skipped_file_as_new_until_it_changes(tmp_path: Path) -> None:
    # `pnk status` said "1 new ... since last sync" for a binary .md after every sync.
    root = make_kb(tmp_path / "kb", {"ok.md": "# Ok\n\nfine\n", "blob.md": b"PK\x00\x00"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert kb.status().stale["new"] == 2
        kb.sync()
        assert kb.status().stale == {"new": 0, "changed": 0, "removed": 0}
        (root / "blob.md").write_bytes(b"PK\x00\x00 edited")
        assert kb.status().stale["new"] == 1


def test_a_utf16_file_is_skipped_saying_so(tmp_path: Path) -> None:
    # Notepad's "Unicode" (UTF-16 with a BOM) was reported as "binary (NUL bytes)".
    root = make_kb(tmp_path / "kb", {"win.md": "# Notes\n\nfrom Windows\n".encode("utf-16")})
    reason = _skip_reason(_sync(root), "win.md")
    assert "UTF-16" in reason and "save it as UTF-8" in reason


def test_invalid_utf8_is_decoded_with_a_warning_and_searchable(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb", {"latin.md": b"# Caf\xe9\n\nquixotic reconciliation\xff notes\n"}
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        assert report.added == ["latin.md"]
        assert any("latin.md" in w and "UTF-8" in w for w in report.warnings)
        hits = kb.search("quixotic").hits
        assert [h.path for h in hits] == ["latin.md"]
        assert "\ufffd" in hits[0].text


def test_yaml_escapes_for_lone_surrogates_are_replaced_not_fatal(tmp_path: Path) -> None:
    # YAML's "\ud800" escape loads as a lone surrogate, which SQLite cannot store.
    front = (
        '---\ntitle: "Caf\\ud800e"\ntags: ["t\\udc00"]\naliases: ["zephyrine\\ud800x"]\n'
        'owner: "\\ud800"\n---\n# Heading\n\nplain body\n'
    )
    side = 'title: "Side\\udfff"\naliases: ["quokkaline\\ud800"]\n'
    root = make_kb(tmp_path / "kb", {"a.md": front, "b.md": "# B\n\nother body\n"})
    (root / "b.md.pnk.yaml").write_text(side, encoding="utf-8")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        assert sorted(report.added) == ["a.md", "b.md"]
        assert [h.title for h in kb.search("zephyrine", channels=["bm25"]).hits] == ["Caf\ufffde"]
        assert [h.path for h in kb.search("quokkaline", channels=["bm25"]).hits] == ["b.md"]
        assert kb.read(kb.search("zephyrine").hits[0].doc_id).tags == ["t\ufffd"]
    assert (root / "a.md").read_text(encoding="utf-8") == front  # the user's files as written
    assert (root / "b.md.pnk.yaml").read_text(encoding="utf-8").endswith(side)


def test_yaml_values_python_cannot_build_are_kept_as_text_not_fatal(tmp_path: Path) -> None:
    # ruamel builds `2024-02-30` with datetime.date, which raised ValueError out of the sync.
    front = (
        "---\ntitle: Quarterly review\ntags: [planning]\ndate: 2024-02-30\n"
        "done: !!bool maybe\nbig: " + "9" * 5000 + "\n---\n# Review\n\nxylophonics budget\n"
    )
    side = "updated: 2024-13-45 25:00:00\ncount: !!int many\n"
    root = make_kb(tmp_path / "kb", {"a.md": front, "b.md": "# B\n\nzanthoxyl notes\n"})
    (root / "b.md.pnk.yaml").write_text(side, encoding="utf-8")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        assert sorted(report.added) == ["a.md", "b.md"], report.skipped
        assert not [w for w in report.warnings if "a.md" in w]
        view = kb.read("a.md")
        assert (view.title, view.tags) == ("Quarterly review", ["planning"])
        assert (view.meta["date"], view.meta["done"]) == ("2024-02-30", "maybe")
        hits = kb.search("xylophonics", meta=["date<2024-03-01"], channels=["bm25"]).hits
        assert [h.path for h in hits] == ["a.md"]
        assert [h.path for h in kb.search("zanthoxyl", channels=["bm25"]).hits] == ["b.md"]
    assert (root / "a.md").read_text(encoding="utf-8") == front
    assert (root / "b.md.pnk.yaml").read_text(encoding="utf-8").endswith(side)


def test_a_recursive_yaml_alias_is_refused_with_a_warning(tmp_path: Path) -> None:
    # `&a [*a]` loads as a list holding itself; walking it recursed until RecursionError.
    front = "---\ntitle: Loop\nx: &a [1, *a]\n---\n# Loop\n\nbody\n"
    root = make_kb(tmp_path / "kb", {"a.md": front, "b.md": "# B\n\nbody\n"})
    (root / "b.md.pnk.yaml").write_text("y: &b {c: *b}\n", encoding="utf-8")
    report = _sync(root)
    assert report.added == ["a.md"]
    assert any(
        "a.md" in w and "*a repeats a collection inside itself" in w for w in report.warnings
    )
    assert "*b repeats a collection inside itself" in _skip_reason(report, "b.md")


def test_nfd_file_names_are_found_by_their_nfc_spelling_and_back(tmp_path: Path) -> None:
    # A vault written on macOS names files in NFD ("cafe" + U+0301); the name a user types or
    # a link holds is NFC. `pnk show café.md` said "No document" and the links stayed dangling.
    nfd, nfc = "cafe\u0301", "caf\u00e9"
    root = make_kb(
        tmp_path / "kb",
        {
            f"{nfd}.md": "# Coffee\n\nbeans\n",
            f"{nfc}-menu.md": "# Menu\n\nprices\n",
            "links.md": f"# L\n\n[[{nfc}]] and [c]({nfc}.md) and [m]({nfd}-menu.md)\n",
            " lead.md": "# Leading space\n\nkept\n",
        },
    )
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        ids = doc_ids(root)
        assert kb.resolve(f"{nfc}.md") == ids[f"{nfd}.md"]
        assert kb.resolve(f"{nfd}-menu.md") == ids[f"{nfc}-menu.md"]
        assert kb.resolve(" lead.md") == ids[" lead.md"]
    conn = db(root)
    rows = conn.execute("SELECT target, dst_doc FROM links ORDER BY rowid").fetchall()
    conn.close()
    assert [row["dst_doc"] for row in rows] == [
        ids[f"{nfd}.md"],
        ids[f"{nfd}.md"],
        ids[f"{nfc}-menu.md"],
    ]


def test_nested_lists_in_frontmatter_give_their_words_not_python_reprs(tmp_path: Path) -> None:
    # An unquoted Obsidian link (title: [[My Note]]) loads as a nested list; it became the
    # title "[['My Note']]" and tags such as "{'c': 'd'}".
    front = "---\ntitle: [[My Note]]\ntags: [[a, b], {c: d}, [[x]]]\naliases: {x: y}\n---\nbody\n"
    root = make_kb(tmp_path / "kb", {"n.md": front})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        view = kb.read("n.md")
    assert (view.title, view.tags, view.aliases) == ("My Note", ["a", "b", "x"], [])
    # A !!binary title or tag was shown as Python's "b'\\xff'"; it is no text, so it is left out.
    (root / "b.md").write_text("---\ntitle: !!binary /w==\ntags: [!!binary /w==, t]\n---\n# Bin\n")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        view = kb.read("b.md")
    assert (view.title, view.tags) == ("Bin", ["t"])


def test_a_path_filter_finds_an_nfd_folder_by_its_nfc_spelling(tmp_path: Path) -> None:
    # --path café/ answered "No document path starts with 'café/'; top folders: café/".
    root = make_kb(tmp_path / "kb", {"cafe\u0301/menu.md": "# Menu\n\nespresso prices\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hits = kb.search("espresso", path="caf\u00e9/", channels=["bm25"]).hits
    assert [h.path for h in hits] == ["cafe\u0301/menu.md"]


def test_file_over_max_file_mb_is_skipped(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"small.md": "# Small\n\nok\n", "big.md": "word " * 2000})
    set_config(root, "sync", "max_file_mb = 0.001")
    report = _sync(root)
    assert report.added == ["small.md"]
    assert "max_file_mb" in _skip_reason(report, "big.md")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"ok.md": "ok\n", "locked.md": "secret\n"})
    (root / "locked.md").chmod(0)
    try:
        report = _sync(root)
    finally:
        (root / "locked.md").chmod(0o644)
    assert report.added == ["ok.md"]
    assert "cannot be read" in _skip_reason(report, "locked.md")


def test_malformed_sidecar_skips_the_document_naming_file_and_line(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"ok.md": "# Ok\n\nfine\n", "broken.md": "# Broken\n\nbody\n"})
    bad = "# my comment\ntitle: Fine\ntitle2: : :\n"
    (root / "broken.md.pnk.yaml").write_text(bad, encoding="utf-8")
    report = _sync(root)
    assert report.added == ["ok.md"]
    reason = _skip_reason(report, "broken.md")
    assert "broken.md.pnk.yaml" in reason
    assert "line 3" in reason
    assert (root / "broken.md.pnk.yaml").read_text(encoding="utf-8") == bad
    assert "broken.md" not in doc_ids(root)


def test_sidecar_with_a_bad_id_is_skipped(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "a\n"})
    (root / "a.md.pnk.yaml").write_text("id: not-a-ulid\n", encoding="utf-8")
    report = _sync(root)
    reason = _skip_reason(report, "a.md")
    assert "a.md.pnk.yaml" in reason and "'id'" in reason
    assert (root / "a.md.pnk.yaml").read_text(encoding="utf-8") == "id: not-a-ulid\n"


def test_duplicate_ulid_skips_the_copy_and_keeps_the_original(kb: KB) -> None:
    kb.sync()
    raft_id = doc_ids(kb.root)["raft.md"]
    (kb.root / "copy.md").write_text(
        "# Copy\n\nA copy of raft with its own text.\n", encoding="utf-8"
    )
    sidecar = (kb.root / "raft.md.pnk.yaml").read_bytes()
    (kb.root / "copy.md.pnk.yaml").write_bytes(sidecar)

    report = kb.sync()
    reason = _skip_reason(report, "copy.md")
    assert raft_id in reason
    assert "raft.md" in reason
    assert report.added == []
    ids = doc_ids(kb.root)
    assert ids["raft.md"] == raft_id
    assert "copy.md" not in ids
    assert (kb.root / "copy.md.pnk.yaml").read_bytes() == sidecar
    assert kb.read(raft_id).path == "raft.md"


def test_symlink_outside_the_root_is_skipped(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nprivate\n", encoding="utf-8")
    root = make_kb(tmp_path / "kb", {"ok.md": "ok\n"})
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    report = _sync(root)
    assert report.added == ["ok.md"]
    assert "outside" in _skip_reason(report, "link.md")
    assert "outside" in _skip_reason(report, "linkdir")


def test_symlink_inside_the_root_is_followed(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"real/a.md": "# A\n\nalpha\n"})
    (root / "zlink").symlink_to(root / "real", target_is_directory=True)  # sorts after real/
    report = _sync(root)
    assert report.added == ["real/a.md"]
    assert [s.path for s in report.skipped] == ["zlink"]


def test_real_folder_wins_over_a_symlink_alias_that_sorts_first(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"real/a.md": "# A\n\nalpha\n"})
    (root / "alias").symlink_to(root / "real", target_is_directory=True)  # sorts before real/
    report = _sync(root)
    assert report.added == ["real/a.md"]
    assert all(s.path != "real" for s in report.skipped)


def test_symlink_loops_do_not_hang_and_are_reported(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"ok.md": "ok\n", "sub/inner.md": "inner\n"})
    (root / "sub" / "up").symlink_to(root, target_is_directory=True)  # a directory cycle
    (root / "a.md").symlink_to(root / "b.md")
    (root / "b.md").symlink_to(root / "a.md")  # a file cycle

    result: list[SyncReport] = []
    worker = threading.Thread(target=lambda: result.append(_sync(root)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "sync hung on a symlink loop"
    report = result[0]
    assert sorted(report.added) == ["ok.md", "sub/inner.md"]
    assert "loop" in _skip_reason(report, "sub/up")
    assert "loop" in _skip_reason(report, "a.md")
    assert "loop" in _skip_reason(report, "b.md")


def test_empty_file_is_indexed_with_zero_chunks(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"empty.md": "", "blank.txt": "\n\n  \n"})
    report = _sync(root)
    assert sorted(report.added) == ["blank.txt", "empty.md"]
    assert report.skipped == []
    assert scalar(root, "SELECT chunk_count FROM documents WHERE path = 'empty.md'") == 0
    assert scalar(root, "SELECT COUNT(*) FROM chunks") == 0
    assert _sync(root).added == []


def test_crlf_and_bom_are_normalised(tmp_path: Path) -> None:
    root = make_kb(
        tmp_path / "kb", {"win.md": b"\xef\xbb\xbf# Windows\r\n\r\nline one\r\nline two\r\n"}
    )
    report = _sync(root)
    assert report.warnings == []
    assert scalar(root, "SELECT title FROM documents") == "Windows"
    assert scalar(root, "SELECT text FROM chunks") == "# Windows\n\nline one\nline two"


def test_an_alias_written_as_a_string_is_one_name_unless_commas_separate_names() -> None:
    def read(line: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        front = parse_frontmatter("x.md", ["---", line, "---", "# T"])
        return front.aliases, front.tags

    # Split at spaces, "Project Keel" made [[Project]] resolve to this note.
    assert read("aliases: Project Keel") == (("Project Keel",), ())
    assert read("aliases: Keel, The Keel Project") == (("Keel", "The Keel Project"), ())
    assert read("tags: ops infra, db") == ((), ("ops", "infra", "db"))  # a tag has no spaces


def test_logseq_page_properties_are_its_frontmatter() -> None:
    lines = [
        "title:: Rust, Go and C",
        "tags:: [[deep work]] [[Smith, John]], focus, #books",
        "alias:: DW, [[Cal Newport book]]",
        "empty::",
        "id:: 64f1c0de-0000-4000-8000-000000000000",
        "status:: reading",
        "",
        "- first block",
        "  collapsed:: true",
    ]
    front = parse_frontmatter("pages/deep.md", lines)
    assert (front.title, front.tags, front.aliases) == (
        "Rust, Go and C",
        ("deep work", "Smith, John", "focus", "books"),
        ("Cal Newport book", "DW"),
    )
    assert front.fields["status"] == "reading" and front.fields["empty"] == ""
    # Logseq's id:: names a block for references, not the note: no id is taken from it. The
    # lines stay text, so their links are found and nothing leaves search.
    assert front.id is None and front.end_line == 0
    # Only the lines a page opens with: a block's property further down is text.
    assert parse_frontmatter("x.md", ["# T", "status:: x"]).fields == {}


def test_the_first_sync_names_document_files_the_include_leaves_out(tmp_path: Path) -> None:
    # A Sphinx tree of .rst pages looked like an empty KB: nothing said they were left out.
    root = make_kb(
        tmp_path / "kb",
        {
            "index.md": "# Index\n\nSee the guides.\n",
            "guide/install.rst": "Install\n=======\n\nRun the quokkaline installer.\n",
            "guide/usage.rst": "Usage\n=====\n\nText.\n",
            "notes.adoc": "= Notes\n\nText.\n",
            "logo.png": b"\x89PNG",
            "drafts/old.rst": "Old\n",
        },
    )
    set_config(root, "sync", 'exclude = ["drafts/**"]')
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        first = kb.sync().warnings
        assert first == [
            '[sync] include leaves out 2 .rst and 1 .adoc files; add "**/*.rst" (and the like) '
            "to index them."
        ]
        assert kb.sync().warnings == []  # said once; doctor keeps saying it
        found = [f for f in kb.doctor().findings if f.check == "not-included"]
        assert [f.message for f in found] == first and found[0].severity == "info"
    set_config(root, "sync", 'include = ["**/*.md", "**/*.rst", "**/*.qmd"]')
    (root / "report.qmd").write_text("# Report\n\n```{r}\nsummary(x)\n```\n", encoding="utf-8")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hit = kb.search("quokkaline", channels=["bm25"]).hits[0]
        assert (hit.path, hit.source_type) == ("guide/install.rst", "text")
        report = kb.search("summary", channels=["bm25"]).hits[0]
        assert (report.title, report.source_type) == ("Report", "markdown")  # a Markdown dialect
        left = [f.message for f in kb.doctor().findings if f.check == "not-included"]
        assert left == [
            '[sync] include leaves out 1 .adoc file; add "**/*.adoc" (and the like) to index them.'
        ]
