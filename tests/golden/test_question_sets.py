"""The labelled question sets: valid, large enough, and pointing at documents that exist."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pinakes_core.manage.eval import load_questions

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ROOT.parent / "shared" / "corpora"
#: set -> (question file, folder its relevant paths are relative to, minimum size per class)
SETS = {
    "golden": (
        "golden/questions.jsonl",
        ROOT / "golden" / "kb",
        {"lookup": 40, "paraphrase": 30, "multi-hop": 25, "none": 20, "offtopic": 20},
    ),
    "nushell": (
        "golden/nushell/questions.jsonl",
        CORPORA / "nushell-docs",
        {
            "lookup": 40,
            "paraphrase": 30,
            "lexical": 25,
            "filter": 15,
            "multi-hop": 25,
            "none": 20,
            "offtopic": 20,
        },
    ),
    "dendron": (
        "golden/dendron/questions.jsonl",
        CORPORA / "dendron-site",
        {
            "lookup": 20,
            "paraphrase": 15,
            "lexical": 10,
            "multi-hop": 10,
            "none": 10,
            "offtopic": 15,
        },
    ),
    # Our own small sets (issue 36): a personal-notes folder and the bundled example KB.
    "personal": (
        "golden/personal/questions.jsonl",
        ROOT / "golden" / "personal" / "kb",
        {"lookup": 10, "paraphrase": 10, "lexical": 3, "none": 5, "offtopic": 3},
    ),
    "example": (
        "golden/example/questions.jsonl",
        ROOT / "examples" / "distsys-notes",
        {"lookup": 5, "paraphrase": 5, "lexical": 3, "none": 3, "offtopic": 1},
    ),
}


@pytest.mark.parametrize("name", sorted(SETS))
def test_question_set_loads_with_every_class_it_promises(name: str) -> None:
    path, _, minimum = SETS[name]
    questions = load_questions(ROOT / path)
    counts = Counter(q.cls for q in questions)
    short = {c: counts[c] for c, n in minimum.items() if counts[c] < n}
    assert not short, f"{path}: too few questions in {short}"
    for q in questions:
        if q.cls == "multi-hop":
            assert len(set(q.relevant)) >= 2, f"{q.id}: multi-hop needs 2+ documents"
        if q.cls == "filter":
            assert q.filters is not None, f"{q.id}: a filter question without filters"
            assert all(p.startswith(q.filters.path or "") for p in q.relevant), q.id


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_relevant_document_exists(name: str) -> None:
    path, folder, _ = SETS[name]
    if not folder.is_dir():
        pytest.skip(f"{folder} is not on this machine")
    missing = [
        (q.id, rel)
        for q in load_questions(ROOT / path)
        for rel in q.relevant
        if not (folder / rel).is_file()
    ]
    assert not missing, f"{path}: relevant documents missing under {folder}: {missing[:5]}"


def test_held_out_sets_share_no_question_with_golden() -> None:
    """Golden is tuned on; a question repeated in a held-out set would leak that tuning."""
    golden = {q.query.casefold() for q in load_questions(ROOT / SETS["golden"][0])}
    for name in ("nushell", "dendron"):
        repeated = [
            q.id for q in load_questions(ROOT / SETS[name][0]) if q.query.casefold() in golden
        ]
        assert not repeated, f"{name} repeats golden questions: {repeated}"
