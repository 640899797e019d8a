"""Write-back: link suggestions staged in sidecars, reviewed, never duplicated."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, doc_ids, make_kb, set_config
from paid_support import (
    ScriptedProvider,
    constant_calibration,
    plan,
    scripted_config,
    solve,
    synthesis,
)
from pinakes_core import KB
from pinakes_core.errors import SidecarError
from pinakes_core.paid.ask import ask
from pinakes_core.paid.suggestions import read_suggestions
from pinakes_core.paid.writeback import SUGGESTED_KEY, review, staged

FILES: dict[str, str | bytes] = {
    "services/ledger.md": "# Ledger service\n\nThe ledger service is owned by the payments team.\n",
    "teams/payments.md": "# Payments team\n\nThe payments team answers pages through the falcon rotation.\n",
    "rotations/falcon.md": "# Falcon rotation\n\nThe falcon rotation pages Ana and Bo on weekdays.\n",
    "misc/garden.md": "# Garden\n\nTomatoes need sun.\n",
}
QUESTION = "who gets paged for the ledger service"


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    root = make_kb(tmp_path / "kb", FILES)
    scripted_config(root, "passages = 1\n")
    set_config(root, "deep", "passages = 1")
    (root / "services" / "ledger.md.pnk.yaml").write_text(
        "# my notes about the ledger\nid: 01JAXR3T5W6Z8Q9N0P1R2S3T4V\ntags: [core]   # keep me\n"
    )
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    constant_calibration(handle, -6.0)  # low confidence: --deep runs its loop
    return handle


def deep_run(kb: KB, *, write: bool) -> object:
    ids = doc_ids(kb.root)
    ledger, payments = ids["services/ledger.md"], ids["teams/payments.md"]
    kb_id = kb.config.kb.id

    def final(messages: list[dict[str, str]]) -> str:
        return synthesis(
            f"Ledger [pnk://{kb_id}/{ledger}#0] is owned by payments [pnk://{kb_id}/{payments}#0].",
            relations=[
                {
                    "from": f"pnk://{kb_id}/{ledger}#0",
                    "to": f"pnk://{kb_id}/{payments}#0",
                    "rel": "owned by",
                }
            ],
        )

    def reply(messages: list[dict[str, str]]) -> str:
        system = messages[0]["content"]
        if system.startswith("You plan"):
            return plan(("s1", "which team owns the payments falcon rotation", []))
        if system.startswith("You answer one sub-question"):
            return solve(
                f"Payments [pnk://{kb_id}/{payments}#0], see [pnk://{kb_id}/{ledger}#0].",
                "Payments owns the ledger.",
            )
        return final(messages)

    with ScriptedProvider([reply] * 4):
        return ask(
            KB.open(kb.root, embedder=FakeHashEmbedder()),
            QUESTION,
            deep=True,
            write_suggestions=write,
        )


def sidecars(root: Path) -> dict[Path, str]:
    return {p: p.read_text() for p in root.rglob("*.pnk.yaml")}


def test_nothing_is_written_without_the_flag(kb: KB) -> None:
    before = sidecars(kb.root)
    result = deep_run(kb, write=False)
    assert result.suggestions  # type: ignore[attr-defined]
    assert all(s.status == "proposed" for s in result.suggestions)  # type: ignore[attr-defined]
    assert sidecars(kb.root) == before


def test_staged_suggestions_are_typed_reviewable_and_never_duplicated(kb: KB) -> None:
    result = deep_run(kb, write=True)
    [suggestion] = result.suggestions  # type: ignore[attr-defined]
    assert suggestion.status == "staged" and suggestion.rel == "owned-by"
    # Cited together in the sub-answer and the final answer, and typed by the model: 3.
    assert suggestion.support == 3 and suggestion.confidence == 0.875
    side = kb.root / "services" / "ledger.md.pnk.yaml"
    text = side.read_text()
    assert text.startswith("# my notes about the ledger\nid: 01JAXR3T5W6Z8Q9N0P1R2S3T4V\n")
    assert "tags: [core]   # keep me" in text
    assert SUGGESTED_KEY in text and "origin: deep" in text
    assert f"operation: {result.operation_id}" in text  # type: ignore[attr-defined]
    # "owned-by" is outside the (empty) [schema]: staging it also logs a schema suggestion.
    [logged], _ = read_suggestions(kb.root)
    assert (logged.kind, logged.name, logged.origin) == ("relation", "owned-by", "deep")
    assert logged.run == result.operation_id  # type: ignore[attr-defined]
    # The same suggestion again is recognised as staged already.
    again = deep_run(kb, write=True)
    assert [s.status for s in again.suggestions] == ["duplicate"]  # type: ignore[attr-defined]
    assert side.read_text() == text
    [item] = staged(kb)
    assert item.src_path == "services/ledger.md" and item.dst_path == "teams/payments.md"
    assert item.rel == "owned-by" and item.confidence == 0.875
    # Sync does not index a staged suggestion as a link.
    kb.sync()
    conn = kb.store().conn
    assert conn.execute("SELECT COUNT(*) FROM links WHERE rel = 'owned-by'").fetchone()[0] == 0
    report = review(kb, accept=[item.id])
    assert [s.id for s in report.accepted] == [item.id] and staged(kb) == []
    accepted = side.read_text()
    assert SUGGESTED_KEY not in accepted and "links:" in accepted and "# keep me" in accepted
    kb.sync()
    row = (
        kb.store().conn.execute("SELECT rel, dst_doc FROM links WHERE rel = 'owned-by'").fetchone()
    )
    assert row is not None and row[1] == doc_ids(kb.root)["teams/payments.md"]
    # Now an authored link exists: a new run does not stage it again.
    third = deep_run(kb, write=True)
    assert [s.status for s in third.suggestions] == ["duplicate"]  # type: ignore[attr-defined]
    assert side.read_text() == accepted


def test_rejected_suggestions_are_removed_and_unknown_ids_reported(kb: KB) -> None:
    deep_run(kb, write=True)
    [item] = staged(kb)
    report = review(kb, reject=[item.id, "nope"])
    assert [s.id for s in report.rejected] == [item.id] and report.unknown == ["nope"]
    text = (kb.root / "services" / "ledger.md.pnk.yaml").read_text()
    assert SUGGESTED_KEY not in text and "links:" not in text and "# keep me" in text


def test_review_of_a_sidecar_holding_a_value_python_cannot_build_is_a_clean_refusal(
    tmp_path: Path,
) -> None:
    # Sync keeps `reviewed: 2024-02-30` as text; the rewriter's fallback re-load raised a bare
    # ValueError out of `pnk review`.
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nAlpha text.\n", "b.md": "# B\n\nBeta.\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        doc = dict((p, d) for d, p in kb.store().conn.execute("SELECT doc_id, path FROM documents"))
        side = root / "a.md.pnk.yaml"
        text = (
            f"id: {doc['a.md']}\nreviewed: 2024-02-30\nsuggested_links:\n- to: b.md\n  rel: see\n"
        )
        side.write_text(text)
        assert not kb.sync().skipped
        item = staged(kb)[0]
        with pytest.raises(SidecarError, match=r"a\.md\.pnk\.yaml"):
            review(kb, accept=[item.id])
    assert side.read_text() == text  # left as it was


def test_review_never_writes_through_a_sidecar_symlink_leading_out_of_the_kb(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nAlpha text.\n", "b.md": "# B\n\nBeta.\n"})
    outside = tmp_path / "outside.yaml"
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        doc = dict((p, d) for d, p in kb.store().conn.execute("SELECT doc_id, path FROM documents"))
        text = f"id: {doc['a.md']}\nsuggested_links:\n- to: b.md\n  rel: see\n"
        outside.write_text(text)
        side = root / "a.md.pnk.yaml"
        side.unlink()
        side.symlink_to(outside)
        item = staged(kb)[0]
        with pytest.raises(SidecarError, match="outside the KB"):
            review(kb, accept=[item.id])
    assert outside.read_text() == text and side.is_symlink()  # neither the file nor the link


def test_a_sidecar_holding_an_alias_bomb_stages_nothing(tmp_path: Path) -> None:
    # Read like every sidecar: checked for aliases that expand without bound before loading.
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nAlpha text.\n", "b.md": "# B\n\nBeta.\n"})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        doc = dict((p, d) for d, p in kb.store().conn.execute("SELECT doc_id, path FROM documents"))
        levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"] + [
            f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)
        ]
        side = root / "a.md.pnk.yaml"
        side.write_text(
            f"id: {doc['a.md']}\n" + "\n".join(levels) + "\n"
            "suggested_links:\n- to: b.md\n  rel: see\n  note: *l8\n"
        )
        assert staged(kb) == []
