"""``[sidecars] write``: which documents get a sidecar, and which identity survives a rebuild."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, doc_ids, make_kb, set_config
from pinakes_core import KB, ConfigError
from pinakes_core.read.identity import frontmatter_id, holds_only_id, path_id

FILES = {
    "plain.md": "# Plain\n\nA note with no frontmatter at all.\n",
    "dendron.md": "---\nid: ChcCM1Q2qrDTy7YnLUHiL\ntitle: Preview\n---\n\nBody of a Dendron note.\n",
    "ulid.md": "---\nid: 01JAXR3T5W6Z8Q9N0P1R2S3T4V\n---\n# Own ULID\n\nText.\n",
    "target.md": "# Target\n\nSomething to link to.\n",
}


def sidecars(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*.pnk.yaml")}


def open_kb(root: Path, fake: FakeHashEmbedder) -> KB:
    return KB.open(root, embedder=fake)


@pytest.fixture
def needed(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", FILES)
    set_config(root, "sidecars", 'write = "when-needed"')
    return root


def test_when_needed_writes_no_sidecar_for_a_plain_note_and_one_for_a_linked_note(
    needed: Path, fake_embedder: FakeHashEmbedder
) -> None:
    """Acceptance (issue 17)."""
    with open_kb(needed, fake_embedder) as kb:
        kb.sync()
        assert sidecars(needed) == set()
        kb_id = kb.config.kb.id
        ids = doc_ids(needed)
        assert ids["plain.md"] == path_id(kb_id, "plain.md")
        assert ids["dendron.md"] == frontmatter_id(kb_id, "ChcCM1Q2qrDTy7YnLUHiL")
        assert ids["ulid.md"] == "01JAXR3T5W6Z8Q9N0P1R2S3T4V"
        kb.add_link("plain.md", "target.md", "cites")
        assert sidecars(needed) == {"plain.md.pnk.yaml"}
        text = (needed / "plain.md.pnk.yaml").read_text()
        assert f"id: {ids['plain.md']}" in text and "rel: cites" in text
        kb.sync()
        assert doc_ids(needed) == ids  # the sidecar holds the id the note already had


def test_identity_survives_a_rebuild_in_when_needed_mode(
    needed: Path, fake_embedder: FakeHashEmbedder
) -> None:
    with open_kb(needed, fake_embedder) as kb:
        kb.sync()
        before = doc_ids(needed)
        # A rename without a frontmatter id keeps its id by content, and now needs a sidecar.
        (needed / "plain.md").rename(needed / "moved.md")
        # A rename with a frontmatter id keeps its id from the frontmatter: no sidecar.
        (needed / "dendron.md").rename(needed / "dendron-renamed.md")
        report = kb.sync()
        assert {(r.old, r.new) for r in report.renamed} == {
            ("plain.md", "moved.md"),
            ("dendron.md", "dendron-renamed.md"),
        }
        assert sidecars(needed) == {"moved.md.pnk.yaml"}
        after = doc_ids(needed)
        assert after["moved.md"] == before["plain.md"]
        assert after["dendron-renamed.md"] == before["dendron.md"]
        kb.sync(rebuild=True)
        assert doc_ids(needed) == after


def test_always_mode_writes_frontmatter_ids_into_sidecars(
    kb_root: Path, fake_embedder: FakeHashEmbedder
) -> None:
    (kb_root / "dendron.md").write_text(FILES["dendron.md"])
    with open_kb(kb_root, fake_embedder) as kb:
        kb.sync()
        expected = frontmatter_id(kb.config.kb.id, "ChcCM1Q2qrDTy7YnLUHiL")
        assert (kb_root / "dendron.md.pnk.yaml").read_text() == f"id: {expected}\n"
        assert doc_ids(kb_root)["dendron.md"] == expected
        assert kb.resolve("ChcCM1Q2qrDTy7YnLUHiL") == expected  # a frontmatter id is a reference


def test_a_sidecar_written_without_an_id_is_left_as_written_and_the_fix_is_named(
    kb_root: Path, fake_embedder: FakeHashEmbedder
) -> None:
    written = "# my links\nlinks:\n  - target.md   # the one\n"
    (kb_root / "plain.md").write_text(FILES["plain.md"])
    (kb_root / "plain.md.pnk.yaml").write_text(written)
    with open_kb(kb_root, fake_embedder) as kb:
        report = kb.sync()
        doc_id = doc_ids(kb_root)["plain.md"]
        assert (kb_root / "plain.md.pnk.yaml").read_text() == written
        [warning] = [w for w in report.warnings if w.startswith("plain.md:")]
        assert f"add 'id: {doc_id}' to plain.md.pnk.yaml" in warning
        assert "could not write" not in warning


def test_deleting_a_document_removes_a_sidecar_holding_only_its_id(
    kb_root: Path, fake_embedder: FakeHashEmbedder
) -> None:
    with open_kb(kb_root, fake_embedder) as kb:
        kb.sync()
        side = kb_root / "raft.md.pnk.yaml"
        kept = kb_root / "runbooks" / "deploy.md.pnk.yaml"
        commented = kb_root / "notes" / "paxos.md.pnk.yaml"
        kept.write_text(kept.read_text() + "tags: [ops]\n")
        commented.write_text(commented.read_text() + "# why this note matters\n")
        assert holds_only_id(side, doc_ids(kb_root)["raft.md"])
        for name in ("raft.md", "runbooks/deploy.md", "notes/paxos.md"):
            (kb_root / name).unlink()
        report = kb.sync()
        assert sorted(report.removed) == ["notes/paxos.md", "raft.md", "runbooks/deploy.md"]
        assert not side.exists()
        assert kept.exists() and commented.exists()  # they hold more than the id: the user's


def test_a_sidecar_left_behind_by_a_move_is_removed_once_the_id_moved(
    kb_root: Path, fake_embedder: FakeHashEmbedder
) -> None:
    with open_kb(kb_root, fake_embedder) as kb:
        kb.sync()
        old_id = doc_ids(kb_root)["raft.md"]
        (kb_root / "raft.md").rename(kb_root / "consensus.md")  # the sidecar stays behind
        kb.sync()
        assert doc_ids(kb_root)["consensus.md"] == old_id
        assert (kb_root / "consensus.md.pnk.yaml").read_text() == f"id: {old_id}\n"
        assert not (kb_root / "raft.md.pnk.yaml").exists()


def test_duplicate_frontmatter_ids_each_get_an_id(
    needed: Path, fake_embedder: FakeHashEmbedder
) -> None:
    shutil.copy(needed / "dendron.md", needed / "zz-copy.md")
    with open_kb(needed, fake_embedder) as kb:
        report = kb.sync()
        ids = doc_ids(needed)
        assert ids["dendron.md"] == frontmatter_id(kb.config.kb.id, "ChcCM1Q2qrDTy7YnLUHiL")
        assert ids["zz-copy.md"] != ids["dendron.md"]
        assert any(
            "zz-copy.md ('ChcCM1Q2qrDTy7YnLUHiL', also dendron.md)" in w for w in report.warnings
        )
        assert [(r.path, r.also, r.doc_id) for r in report.repeated_ids] == [
            ("zz-copy.md", "dendron.md", ids["zz-copy.md"])
        ]
        assert sidecars(needed) == {"zz-copy.md.pnk.yaml"}  # its own id needs a home
        kb.sync(rebuild=True)
        assert doc_ids(needed) == ids


def test_repeated_frontmatter_ids_make_one_warning_that_names_the_fix(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    """A Docusaurus site's versioned copies repeat every page's ``id:`` slug (trial 8: 111)."""
    pages = {f"p{i}.md": f"---\nid: page-{i}\n---\n# Page {i}\n\nText {i}.\n" for i in range(5)}
    files = {f"docs/{name}": text for name, text in pages.items()}
    for version in ("1.0", "2.0"):
        files.update({f"versioned_docs/version-{version}/{n}": t for n, t in pages.items()})
    root = make_kb(tmp_path / "kb", files)
    with open_kb(root, fake_embedder) as kb:
        report = kb.sync()
        ids = doc_ids(root)
    repeats = [w for w in report.warnings if "frontmatter id" in w]
    assert len(repeats) == 1, report.warnings
    line = repeats[0]
    assert line.startswith("10 documents repeat the frontmatter id of another")
    assert "versioned_docs/version-1.0/p0.md ('page-0', also docs/p0.md)" in line
    assert "and 7 more" in line and "set id = [] under [frontmatter] in pinakes.toml" in line
    # Every one is listed in the report (``pnk sync --json``); who gets which id is unchanged.
    assert len(report.repeated_ids) == 10
    assert {r.doc_id for r in report.repeated_ids} == {ids[r.path] for r in report.repeated_ids}
    assert ids["docs/p0.md"] == frontmatter_id(kb.config.kb.id, "page-0")
    assert len(set(ids.values())) == 15


def test_frontmatter_ids_can_be_turned_off(tmp_path: Path, fake_embedder: FakeHashEmbedder) -> None:
    """The fix the repeated-id warning names: ``[frontmatter] id = []``."""
    text = "---\nid: page\n---\n# Page\n"
    root = make_kb(tmp_path / "kb", {"a/page.md": text, "b/page.md": text})
    set_config(root, "frontmatter", "id = []")
    with open_kb(root, fake_embedder) as kb:
        report = kb.sync()
    assert report.warnings == [] and report.repeated_ids == []
    assert frontmatter_id(kb.config.kb.id, "page") not in doc_ids(root).values()


def test_old_write_sidecars_flag_still_works_and_contradictions_are_refused(
    kb_root: Path, fake_embedder: FakeHashEmbedder
) -> None:
    set_config(kb_root, "sync", "write_sidecars = false")
    with open_kb(kb_root, fake_embedder) as kb:
        assert kb.config.sidecar_policy == "never"
        kb.sync()
        assert sidecars(kb_root) == set()
        ids = doc_ids(kb_root)
        kb.sync(rebuild=True)
        assert doc_ids(kb_root) == ids  # derived from the paths
    set_config(kb_root, "sidecars", 'write = "always"')
    with pytest.raises(ConfigError, match=r"write_sidecars = false contradicts \[sidecars\]"):
        KB.open(kb_root)


def test_bad_policy_value_names_the_allowed_values(kb_root: Path) -> None:
    set_config(kb_root, "sidecars", 'write = "sometimes"')
    with pytest.raises(ConfigError, match=r"sidecars\.write") as info:
        KB.open(kb_root)
    assert "when-needed" in str(info.value)


def test_frontmatter_keys_are_configurable(tmp_path: Path, fake_embedder) -> None:
    root = make_kb(
        tmp_path / "kb",
        {"z.md": "---\nuid: 202401011200\ntag: [alpha]\nalias: Zed\n---\n# Z\n\nText.\n"},
    )
    set_config(root, "frontmatter", 'id = ["uid"]\ntags = ["tag"]\naliases = ["alias"]')
    with open_kb(root, fake_embedder) as kb:
        kb.sync()
        view = kb.read("z.md")
        assert view.doc_id == frontmatter_id(kb.config.kb.id, "202401011200")
        assert view.tags == ["alpha"] and view.aliases == ["Zed"]
