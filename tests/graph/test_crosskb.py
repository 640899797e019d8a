"""Cross-KB links: resolved through the fleet, followed one hop across, dangling reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, doc_ids, make_kb, set_config
from pinakes_core import KB, DocumentNotFoundError, PinakesError
from pinakes_core.manage.crosskb import Peers
from pinakes_core.manage.registry import FleetRegistry
from pinakes_core.uri import new_ulid

pytest.importorskip("pinakes_graph")


def two_kbs(
    tmp_path: Path, fake: FakeHashEmbedder, kb_backend: str = "sqlite"
) -> tuple[KB, KB, dict[str, str]]:
    """KB "papers" holds raft.md; KB "notes" links to it by pnk://papers/<id> and by KB id."""
    target = new_ulid()
    papers = make_kb(
        tmp_path / "papers",
        {
            "raft.md": "# Raft paper\n\nIn search of an understandable consensus algorithm.\n",
            "raft.md.pnk.yaml": f"id: {target}\n",
            "paxos.md": "# Paxos paper\n\nThe part-time parliament.\n",
        },
        name="papers",
    )
    set_config(papers, "store", f'backend = "{kb_backend}"')
    papers_id = KB.open(papers).config.kb.id
    notes = make_kb(
        tmp_path / "notes",
        {
            "reading.md": "# Reading\n\nNotes on consensus papers.\n",
            "reading.md.pnk.yaml": (
                f"id: {new_ulid()}\nlinks:\n  - to: pnk://papers/{target}\n    rel: cites\n"
                f"  - to: pnk://{papers_id}/{new_ulid()}\n    rel: cites\n"
            ),
            "local.md": "# Local\n\nSee [reading](reading.md).\n",
        },
        name="notes",
    )
    registry = FleetRegistry.load()
    registry.add(papers)
    registry.add(notes)
    registry.save()
    a, b = KB.open(notes, embedder=fake), KB.open(papers, embedder=fake)
    a.sync()
    b.sync()
    return a, b, {"target": target, "papers_id": papers_id}


def test_a_cross_kb_link_resolves_then_dangles_after_the_target_is_deleted(
    tmp_path: Path, fake_embedder: FakeHashEmbedder, kb_backend: str
) -> None:
    """Acceptance (issue 17), with the target KB's index in SQLite or in PostgreSQL (issue 38)."""
    notes, papers, ids = two_kbs(tmp_path, fake_embedder, kb_backend)
    result = notes.links("reading.md", direction="out")
    across = [n for n in result.neighbours if n.kb is not None]
    assert [(n.kb, n.doc_id, n.path, n.rel, n.distance) for n in across] == [
        ("papers", ids["target"], "raft.md", "cites", 1)
    ]
    assert across[0].model_dump()["kb"] == "papers"
    # The second link names the KB by id, but no such document: reported with the reason.
    assert [u.reason for u in result.unresolved] == [
        f"no document {result.unresolved[0].target.rsplit('/', 1)[1]} in KB 'papers'"
    ]
    report = notes.doctor()
    cross = next(f for f in report.findings if f.check == "cross-kb-links")
    assert cross.severity == "warning" and len(cross.items) == 1
    assert not any(
        f.check == "dangling-links" and any("papers" in i for i in f.items) for f in report.findings
    )

    (tmp_path / "papers" / "raft.md").unlink()
    papers.sync()
    result = notes.links("reading.md", direction="out")
    assert not [n for n in result.neighbours if n.kb is not None]
    reasons = {u.target: u.reason for u in result.unresolved}
    assert reasons[f"pnk://papers/{ids['target']}"] == (
        f"no document {ids['target']} in KB 'papers'"
    )
    cross = next(f for f in notes.doctor().findings if f.check == "cross-kb-links")
    assert cross.severity == "warning" and len(cross.items) == 2
    assert any(f"pnk://papers/{ids['target']}" in item for item in cross.items)


def test_links_follow_incoming_cross_kb_links_one_hop(
    tmp_path: Path, fake_embedder: FakeHashEmbedder, kb_backend: str
) -> None:
    notes, papers, ids = two_kbs(tmp_path, fake_embedder, kb_backend)
    reading = doc_ids(tmp_path / "notes")["reading.md"]
    result = papers.links("raft.md", direction="in")
    assert [(n.kb, n.doc_id, n.direction, n.rel) for n in result.neighbours] == [
        ("notes", reading, "in", "cites")
    ]
    # From local.md two hops: reading.md (local) then raft.md across, never further.
    deep = notes.links("local.md", direction="out", depth=3)
    by_doc = {n.doc_id: n for n in deep.neighbours}
    assert by_doc[ids["target"]].kb == "papers" and by_doc[ids["target"]].distance == 2
    assert by_doc[ids["target"]].via == reading
    assert "kb" not in by_doc[reading].model_dump()  # a local neighbour's JSON is unchanged
    # With a query, neighbours across are scored by similarity like local ones.
    ranked = notes.links("reading.md", direction="out", query="understandable consensus")
    assert next(n for n in ranked.neighbours if n.kb).score > 0


def test_pnk_link_accepts_a_target_in_another_kb(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    notes, _papers, ids = two_kbs(tmp_path, fake_embedder)
    paxos = doc_ids(tmp_path / "papers")["paxos.md"]
    path, _, after = notes.add_link("local.md", "paxos.md", "cites", dst_kb="papers")
    assert path == "local.md.pnk.yaml"
    assert f"to: pnk://{ids['papers_id']}/{paxos}" in after
    with pytest.raises(PinakesError, match="already links"):
        notes.add_link("local.md", f"pnk://papers/{paxos}", "cites")
    # A bare ULID found only in another KB of the fleet.
    _, _, after = notes.add_link("local.md", ids["target"], "extends")
    assert f"to: pnk://{ids['papers_id']}/{ids['target']}" in after
    with pytest.raises(DocumentNotFoundError, match="not in the fleet registry"):
        notes.add_link("local.md", f"pnk://elsewhere/{paxos}", "cites")
    with pytest.raises(DocumentNotFoundError, match=r"No document 'nope\.md' in KB 'papers'"):
        notes.add_link("local.md", "nope.md", "cites", dst_kb="papers")
    notes.sync()
    out = notes.links("local.md", direction="out")
    assert {(n.kb, n.doc_id) for n in out.neighbours if n.kb} == {
        ("papers", paxos),
        ("papers", ids["target"]),
    }


def test_a_server_restricts_peers_to_what_it_serves(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    notes, _papers, ids = two_kbs(tmp_path, fake_embedder)
    notes.use_peers(Peers.of(notes.config.kb.id, []))
    result = notes.links("reading.md", direction="out")
    assert not [n for n in result.neighbours if n.kb]
    assert {u.reason for u in result.unresolved} == {
        "KB 'papers' is not in the fleet",
        f"KB '{ids['papers_id']}' is not in the fleet",
    }


def test_links_written_with_a_fleet_name_resolve_both_ways(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    target = new_ulid()
    papers = make_kb(
        tmp_path / "papers",
        {"raft.md": "# Raft\n\nConsensus.\n", "raft.md.pnk.yaml": f"id: {target}\n"},
        name="papers",
    )
    notes = make_kb(
        tmp_path / "notes",
        {
            "n.md": "# N\n\nNotes.\n",
            "n.md.pnk.yaml": f"id: {new_ulid()}\nlinks:\n  - to: pnk://lit/{target}\n",
        },
        name="notes",
    )
    registry = FleetRegistry.load()
    registry.add(papers, name="lit")  # a machine-local name, not the KB's [kb] name
    registry.add(notes)
    registry.save()
    with KB.open(notes, embedder=fake_embedder) as a, KB.open(papers, embedder=fake_embedder) as b:
        a.sync()
        b.sync()
        out = a.links("n.md", direction="out")
        assert [(n.kb, n.doc_id) for n in out.neighbours] == [("lit", target)]
        back = b.links("raft.md", direction="in")
        assert [(n.kb, n.path) for n in back.neighbours] == [("notes", "n.md")]


def test_a_cross_kb_hop_over_the_cap_goes_to_the_frontier_with_its_kb_and_path(
    tmp_path: Path, fake_embedder: FakeHashEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinakes_core.manage import crosskb

    monkeypatch.setattr(crosskb, "CROSS_CAP", 0)
    notes, _, ids = two_kbs(tmp_path, fake_embedder)
    result = notes.links("reading.md", direction="out")
    assert not [n for n in result.neighbours if n.kb is not None]
    assert [(f.kb, f.doc_id, f.path, f.reason) for f in result.frontier] == [
        ("papers", ids["target"], "raft.md", "rows")
    ]
    assert result.truncated
