"""Doctor checks of the graph layer: hubs and zero-link documents (DESIGN §6)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pinakes_graph")

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB


def _kb(tmp_path: Path) -> Path:
    files: dict[str, str] = {}
    # 12 documents in three folders; "glue" is on 9 of them, "rare" on 2.
    for i in range(12):
        tags = ["glue"] if i < 9 else []
        if i < 2:
            tags.append("rare")
        front = f"---\ntags: [{', '.join(tags)}]\n---\n" if tags else ""
        link = "[[d1]]\n" if i in (4, 5) else ""
        files[f"f{i % 3}/d{i}.md"] = f"{front}# d{i}\n\nBody {i}.\n{link}"
    return make_kb(tmp_path / "kb", files)


def test_hubs_finding_names_the_highest_degree_tag(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        findings = {f.check: f for f in kb.doctor().findings}
    hubs = findings["hubs"]
    assert hubs.items[0] == "tag glue: 9"
    assert "dir f0: 4" in hubs.items and "tag rare: 2" in hubs.items
    assert hubs.severity == "warning"
    assert "'glue'" in hubs.message and "9 of 12" in hubs.message
    assert "graph-edges" in findings


def test_zero_link_documents_counted_with_share(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        finding = next(f for f in kb.doctor().findings if f.check == "zero-link-documents")
    # d1 is linked from d4 and d5: 3 documents have links, 9 do not.
    assert finding.message.startswith("9 of 12 documents (75%)")
    assert len(finding.items) == 9
    assert not any(item.endswith(("/d1.md", "/d4.md", "/d5.md")) for item in finding.items)


def test_small_kb_hubs_are_informational(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "---\ntags: [x]\n---\n# A\n", "b.md": "# B\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hubs = next(f for f in kb.doctor().findings if f.check == "hubs")
    assert hubs.severity == "info"
    assert hubs.items == ["dir /: 2", "tag x: 1"]
