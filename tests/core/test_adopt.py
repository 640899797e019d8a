"""``adopt``: a vault's frontmatter becomes the KB's metadata, and no document changes."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, doc_ids, scalar, write_files
from pinakes_core import KB, ConfigError
from pinakes_core.manage.adopt import adopt
from pinakes_core.read.identity import frontmatter_id, path_id
from pinakes_core.uri import is_ulid

DENDRON = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "dendron-site"


def fingerprint(root: Path) -> dict[str, str]:
    """Relative path → SHA-256 of every file (the store folder left out)."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".pinakes" not in p.relative_to(root).parts
    }


@pytest.mark.slow
@pytest.mark.skipif(not DENDRON.is_dir(), reason="../shared/corpora/dendron-site is not here")
def test_adopt_dendron_keeps_every_document_and_maps_titles_and_ids(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    """Acceptance (issue 17), on a copy of the real Dendron docs vault."""
    vault = tmp_path / "dendron-site"
    shutil.copytree(DENDRON, vault)
    before = fingerprint(vault)

    report = adopt(vault)
    assert report.flavour == "dendron" and report.wrote_config
    assert report.documents == len([p for p in before if p.endswith(".md")])
    mapped = {item.what: item for item in report.mapped}
    derived = next(i for w, i in mapped.items() if w.startswith("frontmatter ids mapped"))
    assert derived.count == 1012
    assert next(i for w, i in mapped.items() if w == "frontmatter titles").count >= 1011
    unmapped = {item.what.split(":")[0]: item for item in report.unmapped}
    assert unmapped["documents without a frontmatter id"].examples[0].startswith("LICENSE.md")
    assert any(i.what.startswith("frontmatter keys Pinakes does not read") for i in report.unmapped)
    assert report.vocabulary is not None and report.vocabulary.terms > 100

    with KB.open(vault, embedder=fake_embedder) as kb:
        sync = kb.sync()
        assert not sync.skipped
        kb_id = kb.config.kb.id
        conn = kb.store().conn
        row = conn.execute(
            "SELECT doc_id, title FROM documents WHERE path = 'vault/asset.preview.md'"
        ).fetchone()
        assert tuple(row) == (frontmatter_id(kb_id, "ChcCM1Q2qrDTy7YnLUHiL"), "Preview")
        row = conn.execute(
            "SELECT doc_id, title FROM documents WHERE path = 'vault/careers.head-of-content.md'"
        ).fetchone()
        assert tuple(row) == (frontmatter_id(kb_id, "OL44br0YkIKmhlWk"), "Head of Content")
        assert kb.read("OL44br0YkIKmhlWk").path == "vault/careers.head-of-content.md"
        ids = doc_ids(vault)
        assert ids["LICENSE.md"] == path_id(kb_id, "LICENSE.md")
        assert len(set(ids.values())) == len(ids) == report.documents

    after = fingerprint(vault)
    added = set(after) - set(before)
    assert added == {"pinakes.toml", ".gitignore"}  # no sidecar: nothing needed one
    assert {p: after[p] for p in before} == before  # every document byte-identical


def test_adopt_an_obsidian_vault_maps_its_keys_and_vocabulary(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    vault = tmp_path / "My Vault"
    (vault / ".obsidian").mkdir(parents=True)
    write_files(
        vault,
        {
            "a.md": "---\nuid: 20240101\ntag: [kubernetes, ops]\nalias: [Alpha]\n---\n# A\n\nText #inline.\n",
            "b.md": "---\ntitle: Bee\ntag: k8s\ncssclass: wide\n---\nBody.\n",
            "c.md": "title:: Logseq page\ntags:: x\n\n- a block\n",
            "broken.md": "---\ntitle: [unclosed\n---\nText.\n",
            "vocab.yml": "tags:\n  kubernetes: {aliases: [k8s]}\n  ops: Operations\n",
        },
    )
    before = fingerprint(vault)
    dry = adopt(vault, dry_run=True)
    assert not dry.wrote_config and not (vault / "pinakes.toml").exists()
    assert fingerprint(vault) == before

    report = adopt(vault)
    assert report.flavour == "obsidian" and report.name == "My-Vault"
    assert report.config == [
        "[sidecars]",
        'write = "when-needed"',
        "[frontmatter]",
        'id = ["uid"]',
        'tags = ["tags", "tag"]',  # c.md's Logseq page uses tags::
        'aliases = ["alias"]',
    ]
    whats = " | ".join(f"{i.what}: {i.count}" for i in report.unmapped)
    mapped = {i.what: i for i in report.mapped}
    assert "Logseq" not in whats  # c.md's page properties are read:
    assert (
        mapped["documents with Logseq page properties (key:: value), read as frontmatter"].count
        == 1
    )
    inline = next(i for what, i in mapped.items() if what.startswith("documents with #tags"))
    assert (inline.count, inline.examples) == (1, ["a.md: inline"])
    assert "not valid YAML (ignored): 1" in whats
    assert any("cssclass (1)" in e for i in report.unmapped for e in i.examples)
    assert report.vocabulary is not None
    assert report.vocabulary.source == "vocab.yml" and report.vocabulary.synonyms == 1
    assert report.vocabulary.used_not_in_vocabulary == ["inline", "x"]  # #inline, tags:: x

    with KB.open(vault, embedder=fake_embedder) as kb:
        kb.sync()
        view = kb.read("a.md")
        assert view.doc_id == frontmatter_id(kb.config.kb.id, "20240101")
        assert view.tags == ["kubernetes", "ops", "inline"] and view.aliases == ["Alpha"]
        assert kb.read("b.md").title == "Bee"
        logseq_page = kb.read("c.md")
        assert (logseq_page.title, logseq_page.tags) == ("Logseq page", ["x"])
        # The property lines stay text: nothing leaves search, and their links are found.
        assert scalar(vault, "SELECT COUNT(*) FROM chunks WHERE text LIKE '%title:: %'") == 1
    assert {p: h for p, h in fingerprint(vault).items() if p in before} == before
    assert not list(vault.rglob("*.pnk.yaml"))

    again = adopt(vault)  # a KB already: analysed, its config left alone
    assert again.already_kb and not again.wrote_config and again.kb_id == report.kb_id


def test_adopt_hugo_and_logseq_layouts(tmp_path: Path) -> None:
    hugo = tmp_path / "site"
    write_files(
        hugo,
        {
            "hugo.toml": 'title = "x"\n',
            "content/post.md": "---\ntitle: Post\ncategories: [news]\naliases: [/old/]\n---\nHi.\n",
            "README.md": "# Repo readme, not content\n",
        },
    )
    report = adopt(hugo, dry_run=True)
    assert report.flavour == "hugo" and report.documents == 1
    assert 'include = ["content/**/*.md", "content/**/*.markdown"]' in report.config
    assert 'tags = ["tags", "categories"]' in report.config and "aliases = []" in report.config

    logseq = tmp_path / "graph"
    write_files(
        logseq,
        {
            "logseq/config.edn": "{}\n",
            "logseq/bak/pages/x.md": "old copy\n",
            "pages/x.md": "---\ntitle: X\n---\n- block\n",
        },
    )
    report = adopt(logseq)
    assert report.flavour == "logseq" and report.documents == 1
    assert 'exclude = ["logseq/**"]' in report.config
    config = (logseq / "pinakes.toml").read_text()
    assert 'exclude = ["logseq/**"]' in config and 'write = "when-needed"' in config


def test_adopt_refuses_what_is_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a folder"):
        adopt(tmp_path / "missing")
    with pytest.raises(ConfigError, match="not a valid KB name"):
        adopt(tmp_path, name="bad name", dry_run=True)


def test_derived_ids_are_ulids() -> None:
    assert is_ulid(frontmatter_id("01JAXR3T5W6Z8Q9N0P1R2S3T4V", "ChcCM1Q2qrDTy7YnLUHiL"))
    assert is_ulid(path_id("01JAXR3T5W6Z8Q9N0P1R2S3T4V", "a/b.md"))
    assert frontmatter_id("K", "01jaxr3t5w6z8q9n0p1r2s3t4v") == "01JAXR3T5W6Z8Q9N0P1R2S3T4V"


def test_a_vocabulary_with_yaml_aliases_is_not_expanded(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    )
    write_files(tmp_path / "v", {"vocab.yml": bomb, "n.md": "---\ntags: [x]\n---\nText.\n"})
    report = adopt(tmp_path / "v", dry_run=True)
    assert report.vocabulary is None  # refused, never expanded (3^20 items otherwise)


def test_a_fifo_where_adopt_looks_for_editor_settings_does_not_hang(tmp_path: Path) -> None:
    # adopt read .vscode/extensions.json (looking for Foam) with read_text: a FIFO there
    # blocked it forever.
    write_files(tmp_path / "v", {"n.md": "# N\n\nText.\n"})
    (tmp_path / "v" / ".vscode").mkdir()
    os.mkfifo(tmp_path / "v" / ".vscode" / "extensions.json")
    report = adopt(tmp_path / "v", dry_run=True)
    assert report.flavour == "markdown"
