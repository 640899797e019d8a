"""Core pieces behind the CLI/MCP surfaces (issue 11): [kb] defaults, read slices, field
filters, empty-result notes, agent writes. FAKE hash embedder: semantics do not matter here."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_kb, scalar
from pinakes_core import KB, PinakesError
from pinakes_core.config import default_kb_id, default_kb_name
from pinakes_core.index.lock import sync_lock
from pinakes_core.index.store import SCHEMA_VERSION
from pinakes_core.manage.writing import PathError, append, confine, write_note
from pinakes_core.read.meta import MetaFilterError, flatten, parse_meta_filter, summary
from pinakes_core.read.sections import SliceError, slice_document
from pinakes_core.search.when import WhenError, parse_when

DOCS: dict[str, str | bytes] = {
    "a.md": "---\ntitle: Alpha\nstatus: draft\npriority: 3\ndue: 2025-01-15\ntags: [x]\n"
    "owners: [ann, bob]\n---\n# Alpha\n\nalpha raft consensus text\n\n## Part\n\nmore alpha\n",
    "b.md": "---\nstatus: done\npriority: 1\nreviewed: true\n---\n# Beta\n\nbeta raft consensus\n",
    "c.md": "# Gamma\n\ngamma raft consensus, no frontmatter\n",
    "sub/d.md": "---\nstatus: Review\npriority: 10\n---\n# Delta\n\ndelta raft consensus\n",
}


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    handle = KB.open(make_kb(tmp_path / "kb", DOCS), embedder=FakeHashEmbedder())
    handle.sync()
    return handle


def paths(kb: KB, **kwargs: object) -> set[str]:
    return {hit.path for hit in kb.search("raft consensus", k=20, **kwargs).hits}  # type: ignore[arg-type]


# -- [kb] defaults (item 3) -------------------------------------------------------------------


def test_kb_name_and_id_are_optional(tmp_path: Path) -> None:
    root = tmp_path / "My Notes!"
    root.mkdir()
    (root / "pinakes.toml").write_text("[sync]\nchunk_tokens = 128\n", "utf-8")
    first = KB.open(root).config.kb
    assert first.name == "My-Notes" == default_kb_name(root)
    assert first.id == default_kb_id("My-Notes") == KB.open(root).config.kb.id  # stable
    (root / "pinakes.toml").write_text("", "utf-8")
    assert KB.open(root).config.kb.name == "My-Notes"
    (root / "pinakes.toml").write_text('[kb]\nname = "named"\n', "utf-8")
    assert KB.open(root).config.kb.id == default_kb_id("named")


def test_a_bad_kb_id_still_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "pinakes.toml").write_text('[kb]\nid = "nope"\n', "utf-8")
    with pytest.raises(PinakesError, match=r"kb\.id.*'nope'"):
        KB.open(tmp_path)


# -- read slices (item 6) ---------------------------------------------------------------------


def test_read_lines_section_and_budget(kb: KB) -> None:
    whole = kb.read("a.md")
    assert whole.lines == (1, whole.text.count("\n")) and not whole.truncated
    assert whole.meta["status"] == "draft" and whole.meta["owners"] == ["ann", "bob"]
    assert whole.headings == ["Alpha", "Alpha › Part"]
    part = kb.read("a.md", lines=(9, 11))
    assert part.lines == (9, 11)
    assert part.text == "\n".join(whole.text.split("\n")[8:11]) + "\n"
    section = kb.read("a.md", section="part")
    assert section.section == "Alpha › Part" and section.text == "## Part\n\nmore alpha\n"
    assert section.lines == (13, 15)
    capped = kb.read("c.md", max_tokens=3)
    assert capped.truncated and capped.tokens is not None and capped.tokens <= 3
    assert kb.read("a.md", lines=(14, 10_000)).lines == (14, 15)


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"lines": (40, 50)}, "has 15 lines"),
        ({"lines": (5, 2)}, "not valid"),
        ({"lines": (0, 2)}, "not valid"),
        ({"section": "Nope"}, "no heading 'Nope'"),
        ({"lines": (1, 2), "section": "Part"}, "not both"),
    ],
)
def test_bad_slices_are_one_sentence(kb: KB, kwargs: dict[str, object], complaint: str) -> None:
    with pytest.raises(SliceError, match=complaint):
        kb.read("a.md", **kwargs)  # type: ignore[arg-type]


@given(st.text(alphabet="ab\n#", max_size=80), st.integers(1, 30), st.integers(0, 30))
def test_line_slices_are_exact_lines_of_the_text(text: str, first: int, extra: int) -> None:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    try:
        part = slice_document("t.md", text, lines=(first, first + extra))
    except SliceError:
        assert first > max(len(lines), 1)
        return
    assert part.text == "\n".join(lines[first - 1 : first + extra]) + "\n"


# -- field filters (item 7) -------------------------------------------------------------------


def test_schema_version_was_bumped_for_field_filters(kb: KB) -> None:
    assert SCHEMA_VERSION >= 3  # 3 added field filters; later versions keep them
    assert scalar(kb.root, "SELECT COUNT(*) FROM doc_meta WHERE key = 'status'") == 3
    plan = " ".join(
        str(row[-1])
        for row in kb.store().conn.execute(
            "EXPLAIN QUERY PLAN SELECT doc_id FROM doc_meta WHERE key = ? AND value_num > ?",
            ("priority", 2),
        )
    )
    assert "doc_meta_by_num" in plan, plan


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (["status=draft"], {"a.md"}),
        (["STATUS=review"], {"sub/d.md"}),
        (["status!=done"], {"a.md", "c.md", "sub/d.md"}),
        (["priority>2"], {"a.md", "sub/d.md"}),
        (["priority>=3", "priority<=3"], {"a.md"}),
        (["priority<2"], {"b.md"}),
        (["due<2025-02-01"], {"a.md"}),
        (["status in draft, done"], {"a.md", "b.md"}),
        (["reviewed exists"], {"b.md"}),
        (["owners=bob"], {"a.md"}),
        (["status=draft", "priority>5"], set()),
    ],
)
def test_field_filters(kb: KB, meta: list[str], expected: set[str]) -> None:
    assert paths(kb, meta=meta) == expected


@pytest.mark.parametrize("text", ["", "status", "=x", "a in ", "bad key=1", "k>"])
def test_bad_field_filters_name_the_forms(text: str) -> None:
    with pytest.raises(MetaFilterError, match="key=value"):
        parse_meta_filter(text)


def test_flatten_is_bounded_and_typed() -> None:
    rows = list(flatten({"N": 2, "b": True, "l": list(range(500)), "d": {"x": 1}, "z": None}))
    assert ("n", "2", 2.0) in rows and ("b", "true", None) in rows
    assert sum(1 for r in rows if r[0] == "l") == 100
    assert not any(r[0] in ("d", "z") for r in rows)
    assert summary({"Tags": ["a"], "x": "y" * 1000}) == {"tags": ["a"], "x": "y" * 500}


def test_dates_and_ages() -> None:
    assert parse_when("7d", now=1_000_000.0) == 1_000_000.0 - 7 * 86400
    assert parse_when("2024-05-01T00:00:00+00:00") == 1714521600.0
    with pytest.raises(WhenError, match="not a date"):
        parse_when("last tuesday")


def test_modified_filters(kb: KB) -> None:
    old = time.time() - 30 * 86400
    os.utime(kb.root / "c.md", (old, old))
    kb.sync()
    assert paths(kb, modified_before=time.time() - 86400) == {"c.md"}
    assert "c.md" not in paths(kb, modified_after=time.time() - 86400)


# -- empty-result notes (item 5) --------------------------------------------------------------


def test_empty_results_explain_themselves(kb: KB) -> None:
    assert "tag 'nope'" in (kb.search("raft", tags=["nope"]).note or "")
    assert "common tags: x" in (kb.search("raft", tags=["nope"]).note or "")
    note = kb.search("raft", path="zzz/").note or ""
    assert "No document path starts with 'zzz/'" in note and "sub/" in note
    assert "status=gone" in (kb.search("raft", meta=["status=gone"]).note or "")
    both = kb.search("raft", tags=["x"], path="sub/").note or ""
    assert "no document meets all of them" in both
    assert kb.search("raft").note is None
    assert "note" not in kb.search("raft").model_dump()


def test_a_running_sync_is_named_in_the_note(kb: KB) -> None:
    with sync_lock(kb.root / ".pinakes"):  # the OS lock a running sync holds
        assert "sync is still running" in (kb.search("raft", tags=["nope"]).note or "")
    assert "sync is still running" not in (kb.search("raft", tags=["nope"]).note or "")


# -- agent writes (item 9) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "complaint"),
    [
        ("/etc/passwd", "absolute"),
        ("../x.md", "climbs out"),
        ("a/../../x.md", "climbs out"),
        ("C:\\x.md", "absolute"),
        ("~/x.md", "absolute"),
        ("file:///x.md", "not a pnk:// URI"),
        ("", "empty"),
    ],
)
def test_confine_refuses_escapes(tmp_path: Path, ref: str, complaint: str) -> None:
    with pytest.raises(PathError, match=complaint):
        confine(tmp_path, ref)


def test_write_note_refuses_overwrite_and_non_documents(kb: KB) -> None:
    assert write_note(kb, "new/idea.md", "# Idea\n\nfresh").action == "created"
    assert (kb.root / "new/idea.md").read_text("utf-8") == "# Idea\n\nfresh\n"
    with pytest.raises(PinakesError, match="already exists"):
        write_note(kb, "new/idea.md", "other")
    assert write_note(kb, "new/idea.md", "other", overwrite=True).action == "overwritten"
    for bad in (".git/x.md", "a.md.pnk.yaml", "image.png", ".pinakes/index.md"):
        with pytest.raises(PathError):
            write_note(kb, bad, "x")
    (kb.root / "out").symlink_to(kb.root.parent, target_is_directory=True)
    with pytest.raises(PathError, match="outside"):
        write_note(kb, "out/escape.md", "x")
    assert not (kb.root.parent / "escape.md").exists()


def test_append_to_note_and_section(kb: KB) -> None:
    append(kb, "c.md", "appended line")
    assert (kb.root / "c.md").read_text("utf-8").endswith("no frontmatter\n\nappended line\n")
    result = append(kb, "a.md", "- new point", section="Alpha")
    text = (kb.root / "a.md").read_text("utf-8")
    assert result.section == "Alpha"
    assert "alpha raft consensus text\n\n## Part" in text  # Alpha's section includes Part
    assert text.endswith("more alpha\n\n- new point\n")
    (kb.root / "e.md").write_text("# E\n\n## One\n\nfirst\n\n## Two\n\nsecond\n", "utf-8")
    append(kb, "e.md", "added to one", section="One")
    assert (kb.root / "e.md").read_text("utf-8") == (
        "# E\n\n## One\n\nfirst\n\nadded to one\n\n## Two\n\nsecond\n"
    )
    with pytest.raises(PinakesError, match="does not exist"):
        append(kb, "nope.md", "x")
    with pytest.raises(PinakesError, match="no heading"):
        append(kb, "a.md", "x", section="Missing")


def test_append_keeps_the_file_s_line_ends_and_bom(kb: KB) -> None:
    # Appending read the note with CRLF folded to LF and wrote every line back as LF; a BOM
    # hid the first heading from section=.
    crlf = b"# W\r\n\r\n## One\r\n\r\nfirst\r\n\r\n## Two\r\n\r\nsecond\r\n"
    (kb.root / "w.md").write_bytes(crlf)
    append(kb, "w.md", "added\nto one", section="One")
    assert (kb.root / "w.md").read_bytes() == crlf.replace(
        b"first\r\n\r\n", b"first\r\n\r\nadded\r\nto one\r\n\r\n"
    )
    append(kb, "w.md", "at the end\r\n")
    assert (kb.root / "w.md").read_bytes().endswith(b"second\r\n\r\nat the end\r\n")
    (kb.root / "cr.md").write_bytes(b"# CR\r\rbody\r")
    append(kb, "cr.md", "more")
    assert (kb.root / "cr.md").read_bytes() == b"# CR\r\rbody\r\rmore\r"
    (kb.root / "bom.md").write_bytes("\ufeff# Bom\n\ntext\n".encode())
    assert append(kb, "bom.md", "more", section="Bom").section == "Bom"
    assert (kb.root / "bom.md").read_bytes() == "\ufeff# Bom\n\ntext\n\nmore\n".encode()


def test_writes_through_a_symlink_change_the_file_it_leads_to(kb: KB) -> None:
    # The temp-file rename replaced the link itself: the link became a copy, the note it
    # pointed at never got the text.
    (kb.root / "real").mkdir()
    (kb.root / "real/target.md").write_text("# Target\n\nbody\n", "utf-8")
    (kb.root / "link.md").symlink_to("real/target.md")
    append(kb, "link.md", "appended")
    assert (kb.root / "link.md").is_symlink()
    assert (kb.root / "real/target.md").read_text("utf-8") == "# Target\n\nbody\n\nappended\n"
    write_note(kb, "link.md", "replaced", overwrite=True)
    assert (kb.root / "link.md").is_symlink()
    assert (kb.root / "real/target.md").read_text("utf-8") == "replaced\n"
    (kb.root / ".private").mkdir()
    (kb.root / ".private/secret.md").write_text("secret\n", "utf-8")
    (kb.root / "peek.md").symlink_to(".private/secret.md")
    with pytest.raises(PathError, match=r"leads to '\.private/secret\.md'"):
        append(kb, "peek.md", "x")
    assert (kb.root / ".private/secret.md").read_text("utf-8") == "secret\n"


def test_writes_find_a_folder_or_note_named_in_nfd_by_its_nfc_spelling(kb: KB) -> None:
    # A folder stored decomposed (as macOS writes it) got a second, composed twin beside it.
    nfd = "cafe\u0301"
    (kb.root / nfd).mkdir()
    (kb.root / nfd / "menu.md").write_text("# Menu\n\nespresso\n", "utf-8")
    assert write_note(kb, "caf\u00e9/new.md", "# New\n").path == f"{nfd}/new.md"
    assert append(kb, "caf\u00e9/menu.md", "latte").path == f"{nfd}/menu.md"
    assert sorted(os.listdir(kb.root / nfd)) == ["menu.md", "new.md"]
    assert not (kb.root / "caf\u00e9").exists() or os.path.samefile(
        kb.root / "caf\u00e9",
        kb.root / nfd,  # a file system that folds the forms itself
    )
    assert (kb.root / nfd / "menu.md").read_text("utf-8").endswith("espresso\n\nlatte\n")
    # A name that exists in no spelling keeps the one given.
    assert write_note(kb, "fresh/n\u00e9.md", "x").path == "fresh/n\u00e9.md"


def test_a_name_the_file_system_refuses_is_one_sentence(kb: KB) -> None:
    with pytest.raises(PinakesError, match="could not be written: File name too long"):
        write_note(kb, "n" * 300 + ".md", "x")


def test_sync_progress_covers_every_phase(tmp_path: Path) -> None:
    pytest.importorskip("pinakes_graph")
    kb = KB.open(make_kb(tmp_path / "kb", DOCS), embedder=FakeHashEmbedder())
    heard: list[str] = []
    kb.sync(progress=lambda stage, done, total: heard.append(stage))
    stages = list(dict.fromkeys(heard))
    assert stages[:3] == ["read", "embed", "links"]
    assert {"graph", "graph links", "labels"} <= set(stages), stages


def test_outlinks_are_reads_title_and_links_without_the_file(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        "a.md": "# Alpha\n\nSee [[b]] and [gamma](c.md) and [[missing]].\n",
        "b.md": "# Beta\n",
        "c.md": "# Gamma\n",
    }
    with KB.open(make_kb(tmp_path / "kb", files), embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        view = kb.read("a.md")
        assert [link.target for link in view.links] == ["b", "c.md", "missing"]
        assert kb.outlinks("a.md") == (view.title, view.links)
        (kb.root / "a.md").unlink()  # the index alone answers: no file is read
        assert kb.outlinks(view.doc_id) == ("Alpha", view.links)
