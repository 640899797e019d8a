"""Templates: stamping, the shipped three, and `pnk upgrade`'s 3-way merge (DESIGN §9)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder
from pinakes_core import KB, ConfigError, load_config
from pinakes_core.errors import TemplateError
from pinakes_core.manage.templates import (
    LOCK_FILE,
    content_hash,
    init_from_template,
    list_templates,
    load_template,
    read_lock,
)
from pinakes_core.manage.upgrade import apply_upgrade, plan_upgrade

# -- the shipped templates --------------------------------------------------------------------

SHIPPED = {
    # template: (entity types, relation types, a question its starter documents answer, the answer)
    "general": (9, 10, "how should I tag a note and link it", "notes/writing-notes.md"),
    "research-papers": (7, 9, "what goes in a paper note skeleton", "papers/how-to-add-a-paper.md"),
    "engineering-docs": (
        9,
        9,
        "why do we write architecture decision records",
        "adr/0001-record-architecture-decisions.md",
    ),
}


def test_the_three_templates_are_listed_with_their_schemas() -> None:
    listed = {t.name: t for t in list_templates()}
    assert set(listed) == set(SHIPPED)
    for name, (entities, relations, _, answer) in SHIPPED.items():
        info = listed[name]
        assert (info.entity_types, info.relation_types) == (entities, relations)
        assert info.source == "shipped" and info.version == "1.0" and info.description
        assert "README.md" in info.files and answer in info.files


@pytest.mark.model
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_each_shipped_template_inits_syncs_and_searches(tmp_path: Path, name: str) -> None:
    entities, relations, question, answer = SHIPPED[name]
    report = init_from_template(tmp_path / "kb", name)
    root = Path(report.root)
    assert report.template == name and report.kept == [] and answer in report.written
    config = load_config(root)
    assert (config.kb.template, config.kb.template_version) == (name, "1.0")
    assert config.kb.template_source is None
    assert len(config.schema_.entity_types) == entities
    assert len(config.schema_.relation_types) == relations
    # Every relation reads both ways, except the symmetric fallback.
    one_way = [n for n, r in config.schema_.relation_types.items() if not r.inverse]
    assert one_way == (["related-to"] if name == "general" else [])
    assert ".pinakes/" in (root / ".gitignore").read_text()
    for folder in load_template(name).folders:
        assert (root / folder).is_dir()
    lock = read_lock(root)
    assert lock is not None and lock.version == "1.0"
    assert lock.files[answer] == content_hash((root / answer).read_text())
    with KB.open(root) as kb:
        sync = kb.sync()
        assert len(sync.added) == len(report.written) and not sync.skipped
        result = kb.search(question, k=3)
        assert result.hits[0].path == answer, [h.path for h in result.hits]
        # The starter README links to the other starter documents, and the links resolve.
        assert kb.links("README.md", direction="out").neighbours
        assert not any(f.check == "dangling-links" for f in kb.doctor().findings)


def test_init_keeps_files_already_there(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "README.md").write_text("# My own readme\n")
    report = init_from_template(root, "general", name="notes")
    assert report.kept == ["README.md"] and "README.md" not in report.written
    assert (root / "README.md").read_text() == "# My own readme\n"
    assert load_config(root).kb.name == "notes"


def test_unknown_template_names_the_shipped_ones_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(TemplateError) as info:
        init_from_template(tmp_path / "kb", "recipes")
    assert "recipes" in info.value.message
    assert "general, research-papers, engineering-docs" in (info.value.hint or "")
    assert not (tmp_path / "kb").exists()


# -- local templates ---------------------------------------------------------------------------


def _template(
    folder: Path, version: str, fragment: str, files: dict[str, str], **extra: str
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = f'name = "team"\nversion = "{version}"\ndescription = "test template"\n'
    manifest += "".join(f"{k} = {v}\n" for k, v in extra.items())
    (folder / "template.toml").write_text(manifest)
    (folder / "pinakes.toml").write_text(fragment)
    target = folder / "files"
    if target.exists():
        for old in sorted(target.rglob("*"), reverse=True):
            old.unlink() if old.is_file() else old.rmdir()
    for rel, text in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("manifest", "fragment", "words"),
    [
        ('name = "t"\nversion = "one"\n', "", ["version"]),
        ('name = "t"\nversion = "1"\ncolour = "red"\n', "", ["colour"]),
        ('name = "t"\nversion = "1"\n', '[kb]\nname = "x"\n', ["[kb]"]),
        ('name = "t"\nversion = "1"\n', "[retrieval]\nkk = 3\n", ["kk", "pinakes.toml"]),
        ('name = "t"\nversion = "1"\n', "[retrieval\n", ["not valid TOML"]),
    ],
)
def test_a_malformed_local_template_is_one_clear_error(
    tmp_path: Path, manifest: str, fragment: str, words: list[str]
) -> None:
    folder = tmp_path / "tmpl"
    folder.mkdir()
    (folder / "template.toml").write_text(manifest)
    (folder / "pinakes.toml").write_text(fragment)
    with pytest.raises(TemplateError) as info:
        init_from_template(tmp_path / "kb", folder)
    for word in words:
        assert word in info.value.message
    assert not (tmp_path / "kb").exists()


def test_a_template_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    folder = _template(tmp_path / "tmpl", "1", "", {"a.md": "# A\n"})
    (folder / "files" / "logo.md").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(TemplateError, match="not UTF-8"):
        load_template(folder)


# -- upgrade: the 3-way cases ------------------------------------------------------------------

V1_FRAGMENT = """# Team template fragment (comment from the template).
[retrieval]
k = 5
abstain_below = 0.2

[schema.relation_types.depends-on]
description = "X needs Y"
inverse = "required-by"
"""

V2_FRAGMENT = """# Team template fragment (comment from the template).
[retrieval]
k = 10
abstain_below = 0.25

[schema.relation_types.depends-on]
description = "X needs Y"
inverse = "required-by"
aliases = ["relies on"]

[schema.relation_types.supersedes]
inverse = "superseded-by"
"""

V1_FILES = {
    "README.md": "# Team docs\n\nVersion one readme.\n",
    "guide/style.md": "# Style\n\nWrite short sentences.\n",
    "guide/untouched.md": "# Untouched\n\nVersion one text.\n",
    "guide/deleted.md": "# Deleted\n\nThe user deletes this one.\n",
    "guide/stable.md": "# Stable\n\nThe template never changes this.\n",
}

V2_FILES = {
    "README.md": "# Team docs\n\nVersion two readme.\n",
    "guide/style.md": "# Style\n\nWrite short sentences. Version two adds this.\n",
    "guide/untouched.md": "# Untouched\n\nVersion two text.\n",
    "guide/deleted.md": "# Deleted\n\nChanged in version two.\n",
    "guide/stable.md": "# Stable\n\nThe template never changes this.\n",
    "guide/new.md": "# New\n\nAdded in version two.\n",
    "guide/clash.md": "# Clash\n\nThe template's new file.\n",
}


@pytest.fixture
def stamped(tmp_path: Path):
    """A KB stamped from a local template v1, then edited by its user."""
    template = _template(tmp_path / "templates" / "team", "1.0", V1_FRAGMENT, V1_FILES)
    root = Path(init_from_template(tmp_path / "kb", template).root)
    config = (root / "pinakes.toml").read_text()
    # The user: comments the file, changes one key the template will change, edits one starter
    # file, deletes another, and writes a file where v2 will put a new one.
    config = config.replace("[kb]\n", "# my own comment on top of [kb]\n[kb]\n")
    config = config.replace("abstain_below = 0.2\n", "abstain_below = 0.3  # mine\n")
    (root / "pinakes.toml").write_text(config)
    (root / "README.md").write_text("# Team docs\n\nMy own words.\n")
    (root / "guide/deleted.md").unlink()
    (root / "guide/clash.md").write_text("# Clash\n\nMine, written before v2.\n")
    _template(template, "1.1", V2_FRAGMENT, V2_FILES, folders='["runbooks"]')
    handle = KB.open(root, embedder=FakeHashEmbedder())
    yield handle
    handle.close()


def test_local_template_records_its_source_relative_to_the_kb(stamped: KB) -> None:
    record = load_config(stamped.root).kb
    assert (record.template, record.template_version) == ("team", "1.0")
    assert record.template_source == "../templates/team"


def test_upgrade_plan_sorts_every_file_and_key_and_writes_nothing(stamped: KB) -> None:
    before = {p: p.read_bytes() for p in stamped.root.rglob("*") if p.is_file()}
    plan = plan_upgrade(stamped)
    assert (plan.template, plan.from_version, plan.to_version) == ("team", "1.0", "1.1")
    assert {f.path: f.action for f in plan.files} == {
        "README.md": "conflict",  # the user changed it: kept
        "guide/style.md": "update",  # never touched: updated
        "guide/untouched.md": "update",
        "guide/deleted.md": "kept-deleted",  # the user deleted it: stays deleted
        "guide/new.md": "add",  # new in the template
        "guide/clash.md": "conflict",  # a file of the user's is in the way
    }
    actions = {c.key: c.action for c in plan.config}
    assert actions == {
        "retrieval.k": "set",
        "retrieval.abstain_below": "conflict",
        "schema.relation_types.depends-on.aliases": "set",
        "schema.relation_types.supersedes.inverse": "set",
    }
    assert plan.folders == ["runbooks"]
    assert len(plan.conflicts) == 3
    assert any("abstain_below" in c and "0.3" in c for c in plan.conflicts)
    assert "+k = 10" in plan.config_diff and '+template_version = "1.1"' in plan.config_diff
    assert "abstain_below = 0.3" not in "".join(
        line for line in plan.config_diff.splitlines() if line.startswith(("+", "-"))
    )
    after = {p: p.read_bytes() for p in stamped.root.rglob("*") if p.is_file()}
    assert after == before


def test_upgrade_applies_keeps_the_users_work_and_reruns_as_a_no_op(stamped: KB) -> None:
    root = stamped.root
    done = apply_upgrade(stamped)
    assert done.applied
    assert (root / "README.md").read_text() == "# Team docs\n\nMy own words.\n"
    assert (root / "guide/clash.md").read_text() == "# Clash\n\nMine, written before v2.\n"
    assert not (root / "guide/deleted.md").exists()
    assert (root / "guide/style.md").read_text() == V2_FILES["guide/style.md"]
    assert (root / "guide/new.md").read_text() == V2_FILES["guide/new.md"]
    assert (root / "runbooks").is_dir()
    text = (root / "pinakes.toml").read_text()
    assert "# my own comment on top of [kb]" in text
    assert "abstain_below = 0.3  # mine" in text
    assert "# Team template fragment (comment from the template)." in text
    config = load_config(root)
    assert config.retrieval.k == 10 and config.retrieval.abstain_below == 0.3
    assert config.schema_.relation_types["depends-on"].aliases == ["relies on"]
    assert config.schema_.relation_types["supersedes"].inverse == "superseded-by"
    assert config.kb.template_version == "1.1" and stamped.config.kb.template_version == "1.1"
    lock = read_lock(root)
    assert lock is not None and lock.version == "1.1"
    assert lock.files["guide/new.md"] == content_hash(V2_FILES["guide/new.md"])
    assert tomllib.loads((root / LOCK_FILE).read_text())["config"]["retrieval"]["k"] == 10
    # A rerun is a no-op: nothing planned, nothing written.
    snapshot = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    again = plan_upgrade(stamped)
    assert again.up_to_date and not again.files and not again.config_diff
    assert apply_upgrade(stamped).applied is False
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == snapshot


def test_an_interrupted_upgrade_is_finished_by_running_it_again(stamped: KB) -> None:
    root = stamped.root
    (root / "guide/style.md").write_text(V2_FILES["guide/style.md"])  # half done by hand/crash
    plan = plan_upgrade(stamped)
    assert "guide/style.md" not in {f.path for f in plan.files}
    apply_upgrade(stamped)
    assert plan_upgrade(stamped).up_to_date


def test_upgrade_refuses_an_older_template_and_a_kb_without_one(
    tmp_path: Path, stamped: KB
) -> None:
    template = tmp_path / "templates" / "team"
    _template(template, "0.9", V1_FRAGMENT, V1_FILES)
    with pytest.raises(TemplateError, match="older"):
        plan_upgrade(stamped)
    bare = tmp_path / "bare"
    KB.init(bare)
    with KB.open(bare, embedder=FakeHashEmbedder()) as kb:
        with pytest.raises(TemplateError) as info:
            plan_upgrade(kb)
        assert "--template" in (info.value.hint or "")


def test_a_kb_without_template_can_adopt_one(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    KB.init(root)
    (root / "README.md").write_text("# Mine\n")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        plan = plan_upgrade(kb, "research-papers")
        assert plan.from_version is None
        assert {f.path: f.action for f in plan.files}["README.md"] == "conflict"
        apply_upgrade(kb, "research-papers")
        assert (root / "README.md").read_text() == "# Mine\n"
        assert (root / "papers/how-to-add-a-paper.md").exists()
        assert kb.config.kb.template == "research-papers"
        assert "cites" in kb.config.schema_.relation_types
        assert plan_upgrade(kb).up_to_date


def test_upgrade_never_writes_an_invalid_config(stamped: KB) -> None:
    # The user gave "supersedes" to another relation as an alias: v2's new relation clashes.
    path = stamped.root / "pinakes.toml"
    path.write_text(
        path.read_text() + '\n[schema.relation_types.replaces]\naliases = ["supersedes"]\n'
    )
    before = path.read_text()
    with (
        KB.open(stamped.root, embedder=FakeHashEmbedder()) as kb,
        pytest.raises(TemplateError, match="invalid"),
    ):
        apply_upgrade(kb)
    assert path.read_text() == before


def test_a_damaged_lock_is_a_clear_error(stamped: KB) -> None:
    (stamped.root / LOCK_FILE).write_text("template = \n")
    with pytest.raises(TemplateError, match="damaged"):
        plan_upgrade(stamped)


def test_init_into_an_existing_kb_is_refused(tmp_path: Path) -> None:
    KB.init(tmp_path / "kb")
    with pytest.raises(ConfigError, match="already exists"):
        init_from_template(tmp_path / "kb", "general")
