"""Incremental sync: hash diffing, vector reuse, deletes, renames, rebuilds (DESIGN §4)."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from conftest import SMALL_KB, FakeHashEmbedder, db, doc_ids, make_kb, scalar, set_config
from pinakes_core import KB
from pinakes_core.read.identity import path_id
from pinakes_core.uri import is_ulid

LONG_DOC = (
    "# Ledger\n\n"
    "The ledger records every payment with a monotonically increasing sequence number.\n\n"
    "## Retries\n\n"
    "A failed payment is retried up to five times with exponential backoff.\n\n"
    "## Reconciliation\n\n"
    "Nightly reconciliation compares ledger totals against the bank statement.\n\n"
    "## Archival\n\n"
    "Entries older than seven years are moved to cold storage.\n"
)


def _embed_hashes(root: Path, path: str) -> list[str]:
    conn = db(root)
    try:
        return [
            r[0]
            for r in conn.execute(
                "SELECT c.embed_hash FROM chunks c JOIN documents d USING (doc_id) "
                "WHERE d.path = ? ORDER BY c.ordinal",
                (path,),
            )
        ]
    finally:
        conn.close()


def _assert_store_consistent(root: Path) -> None:
    conn = db(root)
    try:
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        fts = conn.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()[0]
        assert fts == chunks
        no_vector = conn.execute(
            "SELECT COUNT(*) FROM chunks c LEFT JOIN vectors v USING (embed_hash) "
            "WHERE v.embed_hash IS NULL"
        ).fetchone()[0]
        assert no_vector == 0
        orphan_vectors = conn.execute(
            "SELECT COUNT(*) FROM vectors WHERE embed_hash NOT IN "
            "(SELECT embed_hash FROM chunks UNION SELECT embed_hash FROM node_vectors)"
        ).fetchone()[0]
        assert orphan_vectors == 0
        counted = conn.execute(
            "SELECT COUNT(*) FROM documents d WHERE chunk_count != "
            "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.doc_id)"
        ).fetchone()[0]
        assert counted == 0
    finally:
        conn.close()


def test_first_sync_adds_everything_and_second_sync_is_a_no_op(kb: KB, fake_embedder) -> None:
    first = kb.sync()
    assert sorted(first.added) == sorted(SMALL_KB)
    assert first.chunks_embedded == len(fake_embedder.chunk_texts) > 0
    assert first.rebuilt is None
    _assert_store_consistent(kb.root)

    fake_embedder.reset()
    second = kb.sync()
    assert (second.added, second.changed, second.removed, second.renamed) == ([], [], [], [])
    assert second.chunks_embedded == 0
    assert second.unchanged == len(SMALL_KB)
    assert fake_embedder.chunk_texts == []


def test_appending_a_paragraph_embeds_only_the_changed_chunk(kb: KB, fake_embedder) -> None:
    (kb.root / "ledger.md").write_text(LONG_DOC, encoding="utf-8")
    kb.sync()
    before = _embed_hashes(kb.root, "ledger.md")
    assert len(before) == 4

    fake_embedder.reset()
    (kb.root / "ledger.md").write_text(
        LONG_DOC + "\nRestores from cold storage take two business days.\n", encoding="utf-8"
    )
    report = kb.sync()
    after = _embed_hashes(kb.root, "ledger.md")

    assert report.changed == ["ledger.md"]
    assert report.added == report.removed == []
    new_hashes = set(after) - set(before)
    assert len(new_hashes) == 1  # only the last section's chunk changed
    assert report.chunks_embedded == len(new_hashes) == len(fake_embedder.chunk_texts)
    assert "two business days" in fake_embedder.chunk_texts[0]
    assert report.chunks_reused == len(after) - 1 == 3
    _assert_store_consistent(kb.root)


def test_inserting_a_paragraph_mid_document_shifts_lines_but_reuses_vectors(
    kb: KB, fake_embedder
) -> None:
    (kb.root / "ledger.md").write_text(LONG_DOC, encoding="utf-8")
    kb.sync()
    fake_embedder.reset()
    edited = LONG_DOC.replace(
        "## Retries\n", "## Retries\n\nRetries are idempotent thanks to request keys.\n"
    )
    (kb.root / "ledger.md").write_text(edited, encoding="utf-8")
    report = kb.sync()
    assert report.changed == ["ledger.md"]
    assert report.chunks_embedded == 1
    assert report.chunks_reused == 3
    archival_start = scalar(kb.root, "SELECT start_line FROM chunks WHERE text LIKE '## Archival%'")
    assert archival_start == LONG_DOC.split("\n").index("## Archival") + 1 + 2


def test_touching_a_file_rereads_it_but_embeds_nothing(kb: KB, fake_embedder) -> None:
    kb.sync()
    fake_embedder.reset()
    target = kb.root / "raft.md"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))

    report = kb.sync()
    assert (report.added, report.changed, report.removed) == ([], [], [])
    assert report.chunks_embedded == 0
    assert fake_embedder.chunk_texts == []
    # The new stat is recorded, so the next sync does not even re-read the file.
    stored = scalar(kb.root, "SELECT mtime_ns FROM documents WHERE path = 'raft.md'")
    assert stored == target.stat().st_mtime_ns
    assert kb.status().stale == {"new": 0, "changed": 0, "removed": 0}


def test_the_sync_after_a_first_sync_reads_no_note_again(kb: KB, fake_embedder) -> None:
    # The first sync writes each note's sidecar after it started, so the next one finds every
    # note racy (written in the last sync's tick): it hashes them, and reads none again.
    kb.sync()
    assert (kb.root / "raft.md.pnk.yaml").exists()
    fake_embedder.reset()
    stages: list[tuple[str, int, int]] = []
    report = kb.sync(progress=lambda stage, done, total: stages.append((stage, done, total)))
    assert (report.added, report.changed, report.removed) == ([], [], [])
    assert [s for s in stages if s[0] == "read"] == []
    assert fake_embedder.chunk_texts == []
    # A racy note whose bytes did change is still read (same size, same mtime).
    target = kb.root / "raft.md"
    st = target.stat()
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace("leader", "LEADER", 1), encoding="utf-8")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    with db(kb.root) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'sync_started'", (st.st_mtime_ns / 1e9,)
        )
    assert kb.sync().changed == ["raft.md"]


def test_status_reports_stale_files_before_sync(kb: KB) -> None:
    kb.sync()
    (kb.root / "new.md").write_text("# New\n\nfresh text\n", encoding="utf-8")
    (kb.root / "notes" / "paxos.md").unlink()
    with (kb.root / "raft.md").open("a", encoding="utf-8") as f:
        f.write("\nMore.\n")
    assert kb.status().stale == {"new": 1, "changed": 1, "removed": 1}


def test_deleted_file_is_removed_with_chunks_vectors_and_tags(kb: KB) -> None:
    kb.sync()
    raft_id = doc_ids(kb.root)["raft.md"]
    hashes = _embed_hashes(kb.root, "raft.md")
    assert scalar(kb.root, "SELECT COUNT(*) FROM doc_tags WHERE doc_id = ?", (raft_id,)) == 2

    (kb.root / "raft.md").unlink()
    report = kb.sync()

    assert report.removed == ["raft.md"]
    assert report.added == report.changed == []
    for table, column in (
        ("documents", "doc_id"),
        ("chunks", "doc_id"),
        ("doc_tags", "doc_id"),
        ("links", "src_doc"),
    ):
        assert scalar(kb.root, f"SELECT COUNT(*) FROM {table} WHERE {column} = ?", (raft_id,)) == 0
    marks = ",".join("?" * len(hashes))
    assert (
        scalar(kb.root, f"SELECT COUNT(*) FROM vectors WHERE embed_hash IN ({marks})", hashes) == 0
    )
    _assert_store_consistent(kb.root)
    assert all(h.path != "raft.md" for h in kb.search("raft leader election").hits)


def test_rename_with_sidecar_keeps_the_ulid(kb: KB, fake_embedder) -> None:
    kb.sync()
    raft_id = doc_ids(kb.root)["raft.md"]
    fake_embedder.reset()
    (kb.root / "archive").mkdir()
    (kb.root / "raft.md").rename(kb.root / "archive" / "raft.md")
    (kb.root / "raft.md.pnk.yaml").rename(kb.root / "archive" / "raft.md.pnk.yaml")
    # A rename plus an edit: the sidecar still carries the identity.
    with (kb.root / "archive" / "raft.md").open("a", encoding="utf-8") as f:
        f.write("\n## Membership\n\nJoint consensus changes the cluster configuration.\n")

    report = kb.sync()
    assert [(r.doc_id, r.old, r.new) for r in report.renamed] == [
        (raft_id, "raft.md", "archive/raft.md")
    ]
    assert report.added == report.removed == []
    assert doc_ids(kb.root)["archive/raft.md"] == raft_id
    assert "raft.md" not in doc_ids(kb.root)
    assert report.chunks_embedded == 1  # only the new section
    assert kb.read(raft_id).path == "archive/raft.md"
    _assert_store_consistent(kb.root)


def test_move_without_sidecar_keeps_the_ulid_by_content_hash(kb: KB, fake_embedder) -> None:
    kb.sync()
    paxos_id = doc_ids(kb.root)["notes/paxos.md"]
    fake_embedder.reset()
    (kb.root / "notes" / "paxos.md").rename(kb.root / "paxos-moved.md")

    report = kb.sync()
    assert [(r.doc_id, r.old, r.new) for r in report.renamed] == [
        (paxos_id, "notes/paxos.md", "paxos-moved.md")
    ]
    assert report.added == report.removed == []
    assert report.chunks_embedded == 0
    now = doc_ids(kb.root)
    assert now["paxos-moved.md"] == paxos_id
    assert "notes/paxos.md" not in now
    # The moved file gets a sidecar carrying its old identity.
    assert (kb.root / "paxos-moved.md.pnk.yaml").read_text(encoding="utf-8") == f"id: {paxos_id}\n"
    again = kb.sync()
    assert (again.added, again.changed, again.removed, again.renamed) == ([], [], [], [])


def test_sync_writes_skeleton_sidecars_and_never_touches_documents_or_sidecars(
    kb_root: Path, fake_embedder
) -> None:
    existing = (
        "# my notes about raft\nid: 01ARZ3NDEKTSV4RRFFQ69G5FAV  # keep me\n"
        "title: Raft (sidecar)\n\ntags: [b, a]   # order matters to me\n"
    )
    (kb_root / "raft.md.pnk.yaml").write_text(existing, encoding="utf-8")
    docs_before = {rel: (kb_root / rel).read_bytes() for rel in SMALL_KB}

    with KB.open(kb_root, embedder=fake_embedder) as kb:
        kb.sync()
        ids = doc_ids(kb_root)
        (kb_root / "raft.md").write_text(SMALL_KB["raft.md"] + "\nedit\n", encoding="utf-8")
        docs_before["raft.md"] = (kb_root / "raft.md").read_bytes()
        kb.sync()

    assert (kb_root / "raft.md.pnk.yaml").read_text(encoding="utf-8") == existing
    assert ids["raft.md"] == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    for rel, data in docs_before.items():
        assert (kb_root / rel).read_bytes() == data
        if rel != "raft.md":
            skeleton = (kb_root / (rel + ".pnk.yaml")).read_text(encoding="utf-8")
            assert skeleton == f"id: {ids[rel]}\n"
            assert is_ulid(ids[rel])
    assert len(set(ids.values())) == len(ids)


def test_write_sidecars_off_writes_no_sidecars(kb_root: Path, fake_embedder) -> None:
    from conftest import set_config

    set_config(kb_root, "sync", "write_sidecars = false")
    with KB.open(kb_root, embedder=fake_embedder) as kb:
        report = kb.sync()
    assert len(report.added) == len(SMALL_KB)
    assert not list(kb_root.rglob("*.pnk.yaml"))


def test_schema_version_mismatch_rebuilds_the_store(kb: KB, fake_embedder) -> None:
    kb.sync()
    ids = doc_ids(kb.root)
    chunks = scalar(kb.root, "SELECT COUNT(*) FROM chunks")
    conn = sqlite3.connect(kb.root / ".pinakes" / "index.db")
    conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()

    fake_embedder.reset()
    report = kb.sync()
    assert isinstance(report.rebuilt, str) and report.rebuilt
    assert "0" in report.rebuilt
    assert sorted(report.added) == sorted(SMALL_KB)
    assert report.chunks_embedded == chunks
    assert doc_ids(kb.root) == ids  # identities come back from the sidecars
    assert scalar(kb.root, "SELECT value FROM meta WHERE key = 'schema_version'") != "0"
    assert scalar(kb.root, "SELECT COUNT(*) FROM chunks") == chunks
    _assert_store_consistent(kb.root)
    assert kb.sync().rebuilt is None


def test_rebuild_flag_rebuilds(kb: KB, fake_embedder) -> None:
    kb.sync()
    fake_embedder.reset()
    report = kb.sync(rebuild=True)
    assert report.rebuilt
    assert sorted(report.added) == sorted(SMALL_KB)
    assert report.chunks_embedded == len(fake_embedder.chunk_texts) > 0


def test_model_change_reembeds_every_chunk(kb_root: Path) -> None:
    first = FakeHashEmbedder(model_id="fake-a", dim=32)
    with KB.open(kb_root, embedder=first) as kb:
        kb.sync()
    distinct = scalar(kb_root, "SELECT COUNT(DISTINCT embed_hash) FROM chunks")

    second = FakeHashEmbedder(model_id="fake-b", dim=16)
    with KB.open(kb_root, embedder=second) as kb:
        report = kb.sync()
        assert (report.added, report.changed, report.removed) == ([], [], [])
        assert report.chunks_embedded == distinct == len(second.chunk_texts)
        assert scalar(kb_root, "SELECT value FROM meta WHERE key = 'model_id'") == "fake-b"
        assert scalar(kb_root, "SELECT value FROM meta WHERE key = 'dim'") == "16"
        assert {len(v) for (v,) in db(kb_root).execute("SELECT vector FROM vectors")} == {16 * 4}
        hits = kb.search("leader election").hits
        assert hits and hits[0].path == "raft.md"
        assert kb.sync().chunks_embedded == 0


def test_identical_chunks_across_documents_are_embedded_once(tmp_path: Path) -> None:
    text = "# Same\n\nShared boilerplate paragraph.\n"
    root = make_kb(tmp_path / "kb", {"a.md": text, "b.md": text})
    fake = FakeHashEmbedder()
    with KB.open(root, embedder=fake) as kb:
        report = kb.sync()
    assert report.chunks_embedded == 1
    assert scalar(root, "SELECT COUNT(*) FROM chunks") == 2
    assert scalar(root, "SELECT COUNT(DISTINCT embed_hash) FROM chunks") == 1
    assert scalar(root, "SELECT COUNT(*) FROM vectors v JOIN chunks c USING (embed_hash)") == 2


def test_search_sees_a_sync_from_another_kb_object(kb_root: Path, fake_embedder) -> None:
    reader = KB.open(kb_root, embedder=fake_embedder)
    writer = KB.open(kb_root, embedder=fake_embedder)
    try:
        writer.sync()
        assert all(h.path != "late.md" for h in reader.search("zeppelin").hits)
        (kb_root / "late.md").write_text("# Late\n\nzeppelin airship hangar\n", encoding="utf-8")
        writer.sync()
        assert reader.search("zeppelin").hits[0].path == "late.md"
    finally:
        reader.close()
        writer.close()


def test_copy_of_kb_folder_keeps_ids(kb: KB, tmp_path: Path) -> None:
    kb.sync()
    ids = doc_ids(kb.root)
    clone = tmp_path / "clone"
    shutil.copytree(kb.root, clone, ignore=shutil.ignore_patterns(".pinakes"))
    with KB.open(clone, embedder=FakeHashEmbedder()) as other:
        other.sync()
    assert doc_ids(clone) == ids


def test_sidecar_edit_updates_metadata_and_reembeds_only_on_title_change(
    kb: KB, fake_embedder
) -> None:
    kb.sync()
    raft_id = doc_ids(kb.root)["raft.md"]
    side = kb.root / "raft.md.pnk.yaml"
    fake_embedder.reset()
    side.write_text(side.read_text(encoding="utf-8") + "tags: [Storage]\n", encoding="utf-8")
    report = kb.sync()
    assert report.changed == ["raft.md"]
    assert report.chunks_embedded == 0  # tags are not part of the embedded text
    assert "storage" in kb.read(raft_id).tags
    assert {h.path for h in kb.search("leader", tags=["storage"]).hits} == {"raft.md"}

    side.write_text(side.read_text(encoding="utf-8") + "title: Totally New\n", encoding="utf-8")
    report = kb.sync()
    assert report.changed == ["raft.md"]
    assert report.chunks_embedded == kb.read(raft_id).chunks == 3  # the title prefixes every chunk
    assert kb.read(raft_id).title == "Totally New"
    assert doc_ids(kb.root)["raft.md"] == raft_id


OUTLINE_DOC = (
    "# Handbook\n\n## Setup\n\n### Install\n\nRun the installer.\n\n### Configure\n\n"
    "Edit the config file.\n\n## Reference\n\n### Commands\n\n#### ls\n\nLists files.\n\n"
    "## Appendix\n"
)


def test_no_heading_only_chunk_is_stored_and_a_new_chunker_rechunks_old_stores(
    kb: KB, fake_embedder
) -> None:
    (kb.root / "handbook.md").write_text(OUTLINE_DOC, encoding="utf-8")
    kb.sync()
    conn = db(kb.root)
    try:
        texts = [r[0] for r in conn.execute("SELECT text FROM chunks")]
        stored = conn.execute("SELECT value FROM meta WHERE key = 'chunking'").fetchone()[0]
        # Pretend the store was chunked by an older chunker with a heading-only chunk.
        conn.execute("UPDATE meta SET value = '1:256' WHERE key = 'chunking'")
        conn.commit()
    finally:
        conn.close()
    assert stored.endswith(":256")
    for text in texts:
        lines = [line for line in text.split("\n") if line.strip()]
        assert not all(line.startswith("#") for line in lines), text
    handbook = [t for t in texts if "Lists files." in t]
    assert handbook == ["## Reference\n\n### Commands\n\n#### ls\n\nLists files.\n\n## Appendix"]

    fake_embedder.reset()
    report = kb.sync()
    # Every document is re-chunked; unchanged chunk texts keep their vectors.
    assert sorted(report.changed) == sorted([*SMALL_KB, "handbook.md"])
    assert report.chunks_embedded == 0 and report.chunks_reused > 0
    assert scalar(kb.root, "SELECT value FROM meta WHERE key = 'chunking'") == stored
    _assert_store_consistent(kb.root)
    assert kb.sync().changed == []  # and only once


def test_aliases_are_searchable_names_and_older_full_text_rows_are_rebuilt(
    kb: KB, fake_embedder
) -> None:
    (kb.root / "incident.md").write_text(
        "---\naliases: [INC-2025-036, fraudnet-v7 rollback]\n---\n# Fraud model incident\n\n"
        "The new model blocked legitimate payments for two hours.\n",
        encoding="utf-8",
    )
    kb.sync()

    def found(query: str) -> list[str]:
        return [hit.path for hit in kb.search(query, channels=["bm25"]).hits]

    assert found("INC-2025-036") == ["incident.md"]
    assert found("fraudnet rollback")[0] == "incident.md"
    # A store indexed before aliases were names: its full-text rows hold the title alone.
    conn = db(kb.root)
    try:
        conn.execute(
            "UPDATE chunks_fts SET title = (SELECT d.title FROM chunks c JOIN documents d "
            "USING (doc_id) WHERE c.chunk_id = chunks_fts.rowid)"
        )
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'fts_rows'")
        conn.commit()
    finally:
        conn.close()
    assert found("INC-2025-036") == []

    fake_embedder.reset()
    report = kb.sync()
    # Every document is re-indexed once, re-embedding nothing.
    assert sorted(report.changed) == sorted([*SMALL_KB, "incident.md"])
    assert report.chunks_embedded == 0 and report.chunks_reused > 0
    assert found("INC-2025-036") == ["incident.md"]
    _assert_store_consistent(kb.root)
    assert kb.sync().changed == []


def test_inline_tags_tag_the_document_and_a_parent_tag_finds_nested_ones(
    tmp_path: Path,
) -> None:
    files = {
        "a.md": "---\ntags: [ops]\n---\n# A\n\nKeys tagged. #project/alpha #Review\n",
        "b.md": "# B\n\nKeys tagged: no, `#code` and C# are not tags.\n",
        "c.md": "# C\n\nKeys tagged. See #project\n",
    }
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        assert kb.read("a.md").tags == ["ops", "project/alpha", "review"]
        assert kb.read("b.md").tags == []

        def tagged(*tags: str) -> list[str]:
            return sorted({h.path for h in kb.search("keys tagged", k=10, tags=list(tags)).hits})

        assert tagged() == ["a.md", "b.md", "c.md"]
        assert tagged("project") == ["a.md", "c.md"]  # project and project/alpha
        assert tagged("project/alpha") == ["a.md"]
        assert tagged("proj") == []  # a prefix of a name is not a parent
        assert tagged("#Review", "ops") == ["a.md"]
        assert tagged("project/") == tagged("PROJECT") == ["a.md", "c.md"]
        assert tagged("#") == []  # names no tag
        # Turning inline tags off re-reads every document at the next sync, no file changed.
        set_config(root, "frontmatter", "inline_tags = false")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = kb.sync()
        assert sorted(report.changed) == sorted(files) and report.chunks_embedded == 0
        assert kb.read("a.md").tags == ["ops"]
        assert kb.sync().changed == []


def test_a_page_opening_with_properties_keeps_their_links_and_its_identity(tmp_path: Path) -> None:
    # Logseq and Obsidian's Dataview/Breadcrumbs write up:: [[Parent]] at a note's top; Logseq's
    # id:: is a block-reference id, which must not become the document's id.
    files = {
        "parent.md": "# Parent\n\nthe hub\n",
        "child.md": "up:: [[Parent]]\nid:: 64f1c0de-0000-4000-8000-000000000000\n\n- a block\n",
    }
    root = make_kb(tmp_path / "kb", files)
    set_config(root, "sidecars", 'write = "never"')
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        view = kb.read("child.md")
        assert view.meta["up"] == "[[Parent]]"
        assert [link.path for link in kb.links("child.md").neighbours] == ["parent.md"]
    assert doc_ids(root)["child.md"] == path_id(
        scalar(root, "SELECT value FROM meta WHERE key = 'kb_id'"), "child.md"
    )


def _synced_titles(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    """The titles a sync gives the documents of ``files``, by path."""
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    return {r["path"]: r["title"] for r in db(root).execute("SELECT path, title FROM documents")}


def test_folder_pages_without_a_title_take_their_folders_name(tmp_path: Path) -> None:
    files = {"hugo-modules/_index.md": "Modules are Hugo's unit.\n", "README.md": "Top page.\n"}
    titles = _synced_titles(tmp_path, files)
    assert titles == {"hugo-modules/_index.md": "hugo-modules", "README.md": "README"}


def test_a_template_placeholder_names_no_document(tmp_path: Path) -> None:
    # Obsidian template notes (obsidian-hub: 21 of them were all titled "{{title}}").
    files = {
        "Templates/T - New Note.md": "# {{title}}\n\nDescribe the note.\n",
        "Templates/Daily.md": "---\ntitle: <% tp.file.title %>\n---\n# Daily log\n\nToday.\n",
        "Templates/Weekly.md": "---\ntitle: '{{ title }}'\n---\n# <% tp.date.now() %>\n\nWeek.\n",
        "hugo.md": "# Using {{ .Title }} in layouts\n\nA heading about templates stays a title.\n",
    }
    titles = _synced_titles(tmp_path, files)
    assert titles == {
        "Templates/T - New Note.md": "T - New Note",
        "Templates/Daily.md": "Daily log",
        "Templates/Weekly.md": "Weekly",
        "hugo.md": "Using {{ .Title }} in layouts",
    }


def test_a_logseq_graph_indexes_no_backups_and_reports_unwritten_pages_apart(
    tmp_path: Path,
) -> None:
    # Logseq keeps copies of pages under logseq/bak and logseq/version-files, and a [[reference]]
    # names a page that exists once opened: neither is a document nor a broken link.
    files = {
        "logseq/config.edn": "{:meta/version 1}\n",
        "pages/Ideas.md": "- Ideas link [[Plans]] and [[Someday]] and [gone](nowhere.md)\n",
        "pages/Plans.md": "- Plans.\n",
        "logseq/bak/pages/Ideas/2024-01-01T10_00_00.md": "- Ideas, an old copy.\n",
        "logseq/version-files/base/pages/Ideas.md": "- Ideas, a version.\n",
    }
    root = make_kb(tmp_path / "kb", files)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        paths = sorted(r["path"] for r in db(root).execute("SELECT path FROM documents"))
        findings = {f.check: f for f in kb.doctor().findings}
    assert paths == ["pages/Ideas.md", "pages/Plans.md"]
    assert findings["unwritten-pages"].items == ["pages/Ideas.md: Someday"]
    assert findings["dangling-links"].items[0].startswith("pages/Ideas.md: nowhere.md")
