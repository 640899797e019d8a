"""The fleet: registry round trips, moved KBs, merged search, per-KB filters and sync."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB, ConfigError, Hit, SearchResult
from pinakes_core.index.lock import sync_lock
from pinakes_core.index.store import Store
from pinakes_core.manage.fleet import Fleet, merge_hits, registry_status
from pinakes_core.manage.registry import FleetRegistry, registry_path

NOTES = {
    "raft.md": "# Raft\n\nRaft elects a leader with randomized election timeouts.\n",
    "notes/paxos.md": "# Paxos\n\nPaxos reaches agreement with proposers and acceptors.\n",
}
GARDEN = {
    "tomatoes.md": "# Tomatoes\n\nTomatoes need full sun and regular watering.\n",
    "notes/roses.md": "# Roses\n\nPrune roses in early spring before new growth.\n",
}


def test_registry_path_follows_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PINAKES_FLEET", str(tmp_path / "x.toml"))
    assert registry_path() == tmp_path / "x.toml"
    monkeypatch.delenv("PINAKES_FLEET")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert registry_path() == tmp_path / "cfg" / "pinakes" / "fleet.toml"


def test_registry_round_trips_and_keeps_comments(tmp_path: Path) -> None:
    a = make_kb(tmp_path / "a", NOTES, name="notes")
    b = make_kb(tmp_path / "b", GARDEN, name="garden")
    path = tmp_path / "conf" / "fleet.toml"
    path.parent.mkdir()
    path.write_text("# my KBs, hand-written\n", encoding="utf-8")
    registry = FleetRegistry.load(path)
    assert registry.add(a) == (registry.entries[0], "added")
    entry, action = registry.add(b / "notes")  # a folder inside the KB finds its root
    assert action == "added" and entry.path == b.resolve() and entry.name == "garden"
    registry.save()
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# my KBs, hand-written\n")
    path.write_text(text.replace('name = "garden"', 'name = "garden"  # the allotment'))

    again = FleetRegistry.load(path)
    assert [(e.name, e.kb_id, e.path) for e in again] == [
        ("notes", KB.open(a).config.kb.id, a.resolve()),
        ("garden", KB.open(b).config.kb.id, b.resolve()),
    ]
    assert again.find("garden") == again.find(KB.open(b).config.kb.id) == again.find(str(b))
    assert again.add(a) == (again.entries[0], "unchanged")
    again.remove("notes")
    again.save()
    final = path.read_text(encoding="utf-8")
    assert "# the allotment" in final and "# my KBs, hand-written" in final
    assert [e.name for e in FleetRegistry.load(path)] == ["garden"]


def test_a_moved_kb_is_found_again_not_duplicated(tmp_path: Path) -> None:
    a = make_kb(tmp_path / "a", NOTES, name="notes")
    registry = FleetRegistry.load()
    registry.add(a)
    registry.save()
    moved = tmp_path / "elsewhere" / "notes"
    moved.parent.mkdir()
    shutil.move(a, moved)
    status = registry_status()
    assert [(s.name, s.state) for s in status] == [("notes", "missing")]
    with pytest.raises(ConfigError, match="not at"):
        Fleet.open(["notes"])

    registry = FleetRegistry.load()
    entry, action = registry.add(moved)
    registry.save()
    assert action == "moved" and entry.name == "notes"
    reloaded = FleetRegistry.load()
    assert len(reloaded) == 1 and reloaded.entries[0].path == moved.resolve()
    assert [s.state for s in registry_status()] == ["ok"]


def test_names_are_unique_and_bad_registries_name_the_problem(tmp_path: Path) -> None:
    a = make_kb(tmp_path / "a", NOTES, name="notes")
    b = make_kb(tmp_path / "b", GARDEN, name="notes")
    registry = FleetRegistry.load()
    registry.add(a)
    with pytest.raises(ConfigError, match="taken"):
        registry.add(b)
    assert registry.add(b, name="notes-2")[1] == "added"
    with pytest.raises(ConfigError, match="not a valid KB name"):
        registry.add(b, name="no spaces")
    with pytest.raises(ConfigError, match="No KB called"):
        registry.remove("nope")

    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[[kb]]\nname = "x"\nid = "not-a-ulid"\npath = "/x"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"entry 1: id 'not-a-ulid'"):
        FleetRegistry.load()
    path.write_text('[[kb]]\nname = "x"\nid = "01JAXR3T5W6Z8Q9N0P1R2S3T4V"\npth = "/x"\n')
    with pytest.raises(ConfigError, match="unknown key 'pth'"):
        FleetRegistry.load()
    path.write_text("[[kb]\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        FleetRegistry.load()


def _hit(doc: str, score: float) -> Hit:
    return Hit(
        doc_id=doc,
        chunk=0,
        path=f"{doc}.md",
        title=doc,
        heading_path=[],
        text=doc,
        score=score,
        lines=(1, 1),
        ranks={},
    )


def test_merge_orders_by_score_and_takes_the_top_kbs_confidence() -> None:
    relevant = SearchResult(
        query="q", hits=[_hit("a1", 0.71), _hit("a2", 0.52)], confidence=0.9, timings_ms={}
    )
    weak = SearchResult(
        query="q",
        hits=[_hit("b1", 0.2), _hit("b2", 0.1)],
        confidence=0.05,
        abstain=True,
        timings_ms={},
    )
    hits, confidence, abstain, top = merge_hits([("b", "B", weak), ("a", "A", relevant)], 3)
    assert [(h.kb, h.doc_id) for h in hits] == [("a", "a1"), ("a", "a2"), ("b", "b1")]
    assert (confidence, abstain, top) == (0.9, None, "a")
    assert hits[0].kb_id == "A"
    # Equal scores: the KB with the higher confidence first, whatever the fleet order.
    tied = SearchResult(query="q", hits=[_hit("c1", 0.71)], confidence=0.3, timings_ms={})
    hits, confidence, _, top = merge_hits([("c", "C", tied), ("a", "A", relevant)], 2)
    assert [h.doc_id for h in hits] == ["a1", "c1"] and top == "a"
    assert merge_hits([("a", "A", SearchResult(query="q", hits=[], timings_ms={}))], 3) == (
        [],
        None,
        None,
        None,
    )


def test_filters_apply_inside_each_kb(tmp_path: Path, fake_embedder: FakeHashEmbedder) -> None:
    registry = FleetRegistry.load()
    for name, files in (("notes", NOTES), ("garden", GARDEN)):
        registry.add(make_kb(tmp_path / name, files, name=name))
    registry.save()
    with Fleet.open(embedder=fake_embedder) as fleet:
        assert fleet.names == ["notes", "garden"]
        result = fleet.search("leader roses agreement tomatoes", k=10, path="notes/")
        assert {(h.kb, h.path) for h in result.hits} == {
            ("notes", "notes/paxos.md"),
            ("garden", "notes/roses.md"),
        }
        assert [o.name for o in result.kbs] == ["notes", "garden"]
        assert all(o.error is None and o.hits == 1 for o in result.kbs)
        assert result.kb == result.hits[0].kb
        # A KB chosen by folder and one by name.
        with Fleet.open([str(tmp_path / "garden"), "notes"], embedder=fake_embedder) as two:
            assert two.names == ["garden", "notes"]
        with pytest.raises(ConfigError, match="neither a KB"):
            Fleet.open(["nowhere"], embedder=fake_embedder)


def test_fleet_sync_goes_on_when_one_kb_fails(tmp_path: Path, fake_embedder) -> None:
    registry = FleetRegistry.load()
    for name, files in (("notes", NOTES), ("garden", GARDEN)):
        registry.add(make_kb(tmp_path / name, files, name=name))
    registry.save()
    with Fleet.open(embedder=fake_embedder) as fleet:
        # A live process (this one) holds the notes KB's sync lock.
        with sync_lock(Store.location(tmp_path / "notes").parent):
            report = fleet.sync()
        assert [i.name for i in report.failed] == ["notes"]
        assert "Another sync" in (report.failed[0].error or "")
        garden = next(i for i in report.kbs if i.name == "garden")
        assert garden.report is not None and len(garden.report.added) == 2
        assert not fleet.sync().failed
    status = {s.name: s for s in registry_status()}
    assert status["notes"].status is not None and status["notes"].status.documents == 2
    assert status["garden"].status is not None and status["garden"].status.stale["new"] == 0


@pytest.mark.model
def test_a_kb_with_nothing_relevant_contributes_no_top_hit(tmp_path: Path) -> None:
    """Acceptance (issue 17): the merge is on comparable scores, not interleaved ranks."""
    example = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"
    notes = tmp_path / "distsys-notes"
    shutil.copytree(example, notes, ignore=shutil.ignore_patterns(".pinakes"))
    garden = make_kb(
        tmp_path / "garden",
        {
            "tomatoes.md": "# Tomatoes\n\nTomatoes need full sun, deep watering twice a week "
            "and a stake once the first truss sets.\n",
            "compost.md": "# Compost\n\nTurn the heap every fortnight; keep it as damp as a "
            "wrung-out sponge. Brown leaves balance green clippings.\n",
            "roses.md": "# Roses\n\nPrune roses in early spring, just above an outward bud.\n",
        },
        name="garden",
    )
    registry = FleetRegistry.load()
    registry.add(notes)
    registry.add(garden)
    registry.save()
    with Fleet.open() as fleet:
        fleet.sync()
        result = fleet.search("how does raft elect a new leader after a crash", k=5)
    assert result.hits and result.kb == "distsys-notes"
    assert [h.kb for h in result.hits[:3]] == ["distsys-notes"] * 3, [
        (h.kb, h.path, h.score) for h in result.hits
    ]
    own = next(o for o in result.kbs if o.name == "distsys-notes")
    assert result.confidence == own.confidence


def test_fleet_open_refuses_two_kbs_with_one_id(tmp_path: Path, fake_embedder) -> None:
    a = make_kb(tmp_path / "a", NOTES, name="notes")
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    (copy / "pinakes.toml").write_text(
        (copy / "pinakes.toml").read_text().replace('name = "notes"', 'name = "copy"')
    )
    with pytest.raises(ConfigError, match="same \\[kb\\] id"):
        Fleet.open([str(a), str(copy)], embedder=fake_embedder)
    assert os.path.isdir(copy)
