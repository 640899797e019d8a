"""The multi-hop benchmark script: recall, format loaders and an end-to-end smoke run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_benchmark

mh = load_benchmark("multihop")


def key(title: str, text: str) -> str:
    return f"{title}\n{text}"


# -- recall ---------------------------------------------------------------------------------------


def test_recall_counts_gold_in_top_k() -> None:
    gold = [frozenset({"a"}), frozenset({"b"})]
    ranked = ["x", "a", "y", "z", "b", "w"]
    assert mh.recall_at_k(ranked, gold, 2) == 0.5
    assert mh.recall_at_k(ranked, gold, 5) == 1.0
    assert mh.recall_at_k(ranked, gold, 1) == 0.0


def test_recall_unit_is_satisfied_by_any_of_its_passages() -> None:
    gold = [frozenset({"t1-a", "t1-b"}), frozenset({"t2"}), frozenset({"t3"})]
    assert mh.recall_at_k(["t1-b", "t1-a", "q"], gold, 2) == pytest.approx(1 / 3)


def test_recall_missing_gold_stays_in_denominator() -> None:
    gold = [frozenset({"a"}), frozenset()]
    assert mh.recall_at_k(["a", "b"], gold, 5) == 0.5


def test_recall_without_gold_is_unscored() -> None:
    assert mh.recall_at_k(["a"], [], 5) is None
    assert mh.mean_recall([None, 1.0, 0.5]) == 75.0
    assert mh.mean_recall([None]) is None


def test_mean_recall_is_percent_with_one_decimal() -> None:
    assert mh.mean_recall([1.0, 0.0, 0.0]) == 33.3
    assert mh.mean_recall([2 / 3, 1.0]) == 83.3


def test_rank_passages_dedupes_chunks_of_one_document() -> None:
    mapping = {"docs/1.md": "A", "docs/2.md": "B", "docs/3.md": "C"}
    paths = ["docs/2.md", "docs/2.md", "docs/1.md", "unknown.md", "docs/2.md", "docs/3.md"]
    assert mh.rank_passages(paths, mapping) == ["B", "A", "C"]


def test_slug_and_document_text() -> None:
    assert mh.slug("Ermengarde of Tours") == "ermengarde-of-tours"
    assert mh.slug("Alû") == "alu"
    assert mh.slug("???") == "passage"
    assert len(mh.slug("x" * 500)) <= 60
    passage = mh.Passage("Teutberga", "A queen.")
    assert mh.document_text(passage) == "# Teutberga\n\nA queen.\n"
    assert passage.key == "Teutberga\nA queen."


# -- loaders --------------------------------------------------------------------------------------

TWOWIKI_CORPUS = [
    {"title": "Lothair II", "text": "Son of Ermengarde."},
    {"title": "Ermengarde of Tours", "text": "Died 851."},
    {"title": "Ermengarde of Tours", "text": "A second passage."},
    {"title": "Lothair II", "text": "Son of Ermengarde."},  # exact duplicate: dropped
    {"title": "Noise", "text": "Unrelated."},
]

TWOWIKI_QUESTIONS = [
    {
        "id": "q1",
        "question": "When did Lothair II's mother die?",
        "question_type": "compositional",
        "evidence": [["Lothair II", "mother", "Ermengarde"], ["Ermengarde", "died", "851"]],
        "gold_titles": ["Lothair II", "Ermengarde of Tours"],
        "complete": True,
    },
    {
        "id": "q2",
        "question": "Where did Maurice's father die?",
        "question_type": "compositional",
        "evidence": [["Maurice", "father", "William"], ["William", "died in", "Delft"]],
        "gold_titles": ["Lothair II"],
        "complete": False,
    },
    {
        "id": "q3",
        "question": "Nothing in the corpus?",
        "question_type": "inference",
        "evidence": [["X", "spouse", "Y"], ["Y", "sibling", "Z"]],
        "gold_titles": [],
        "complete": False,
    },
]


def test_2wiki_loader() -> None:
    passages = mh.parse_corpus(TWOWIKI_CORPUS)
    assert len(passages) == 4
    fmt, questions = mh.parse_questions(TWOWIKI_QUESTIONS, passages)
    assert fmt == "2wiki"
    q1, q2, q3 = questions
    assert q1.qid == "q1" and q1.qtype == "compositional"
    assert q1.gold == [
        frozenset({key("Lothair II", "Son of Ermengarde.")}),
        frozenset(
            {
                key("Ermengarde of Tours", "Died 851."),
                key("Ermengarde of Tours", "A second passage."),
            }
        ),
    ]
    assert [q.complete for q in questions] == [True, False, False]
    assert q3.gold == []
    # Either passage of a gold title satisfies it.
    ranked = [
        key("Ermengarde of Tours", "A second passage."),
        key("Lothair II", "Son of Ermengarde."),
    ]
    assert mh.recall_at_k(ranked, q1.gold, 2) == 1.0
    assert mh.recall_at_k(ranked, q2.gold, 2) == 1.0


def test_2wiki_complete_without_the_flag() -> None:
    items = [{k: v for k, v in q.items() if k != "complete"} for q in TWOWIKI_QUESTIONS]
    _, questions = mh.parse_questions(items, mh.parse_corpus(TWOWIKI_CORPUS))
    assert [q.complete for q in questions] == [True, False, False]


def test_2wiki_gold_title_absent_from_corpus_is_counted() -> None:
    item = {**TWOWIKI_QUESTIONS[0], "gold_titles": ["Lothair II", "Nowhere"]}
    _, [question] = mh.parse_questions([item], mh.parse_corpus(TWOWIKI_CORPUS))
    assert question.gold_missing == 1
    assert mh.recall_at_k([key("Lothair II", "Son of Ermengarde.")], question.gold, 2) == 0.5


MUSIQUE_CORPUS = [
    {"title": "Journal", "text": "Published by the APA."},
    {"title": "APA", "text": "First president: G. Stanley Hall."},
    {"title": "APA", "text": "Another APA paragraph."},
    {"title": "Noise", "text": "Something else."},
]

MUSIQUE_QUESTIONS = [
    {
        "id": "2hop__1_2",
        "question": "Who was the first president of the publisher of Journal?",
        "paragraphs": [
            {
                "idx": 0,
                "title": "Noise",
                "paragraph_text": "Something else.",
                "is_supporting": False,
            },
            {
                "idx": 1,
                "title": "Journal",
                "paragraph_text": "Published by the APA.",
                "is_supporting": True,
            },
            {
                "idx": 2,
                "title": "APA",
                "paragraph_text": "Another APA paragraph.",
                "is_supporting": False,
            },
            {
                "idx": 3,
                "title": "APA",
                "paragraph_text": "First president: G. Stanley Hall.",
                "is_supporting": True,
            },
        ],
        "answer": "G. Stanley Hall",
        "answerable": True,
    }
]


def test_musique_loader_is_passage_level() -> None:
    passages = mh.parse_corpus(MUSIQUE_CORPUS)
    fmt, [question] = mh.parse_questions(MUSIQUE_QUESTIONS, passages)
    assert fmt == "musique"
    assert question.qid == "2hop__1_2"
    assert question.gold == [
        frozenset({key("Journal", "Published by the APA.")}),
        frozenset({key("APA", "First president: G. Stanley Hall.")}),
    ]
    assert question.gold_missing == 0
    assert question.complete is None
    # The other paragraph with the same title does not count.
    ranked = [key("APA", "Another APA paragraph."), key("Journal", "Published by the APA.")]
    assert mh.recall_at_k(ranked, question.gold, 2) == 0.5


HOTPOT_CORPUS = {
    "Alû": ["Alû is a demon.", " It is Akkadian."],
    "Lilu (mythology)": ["Lilu is a spirit."],
    "Demon Dice": ["A dice game."],
}

HOTPOT_QUESTIONS = [
    {
        "_id": "5a77",
        "question": "If Gallu is a demon Lilu is what?",
        "supporting_facts": [["Alû", 1], ["Lilu (mythology)", 0], ["Alû", 0]],
        "context": [[title, sents] for title, sents in HOTPOT_CORPUS.items()],
        "answer": "a spirit",
        "type": "bridge",
        "level": "easy",
    }
]


def test_hotpotqa_loader_joins_sentences_and_dedupes_titles() -> None:
    passages = mh.parse_corpus(HOTPOT_CORPUS)
    assert passages[0] == mh.Passage("Alû", "Alû is a demon. It is Akkadian.")
    fmt, [question] = mh.parse_questions(HOTPOT_QUESTIONS, passages)
    assert fmt == "hotpotqa"
    assert question.qid == "5a77" and question.qtype == "bridge"
    assert question.gold == [
        frozenset({key("Alû", "Alû is a demon. It is Akkadian.")}),
        frozenset({key("Lilu (mythology)", "Lilu is a spirit.")}),
    ]


def test_format_detection_and_errors() -> None:
    assert mh.detect_format(TWOWIKI_QUESTIONS) == "2wiki"
    assert mh.detect_format(MUSIQUE_QUESTIONS) == "musique"
    assert mh.detect_format(HOTPOT_QUESTIONS) == "hotpotqa"
    with pytest.raises(ValueError, match="unknown question format"):
        mh.detect_format([{"question": "?"}])
    with pytest.raises(ValueError, match="no questions"):
        mh.detect_format([])
    with pytest.raises(ValueError):
        mh.parse_corpus("not a corpus")


def test_load_json_reads_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(
        '{"title": "A", "text": "a"}\n\n{"title": "B", "text": "b"}\n', encoding="utf-8"
    )
    assert [p.title for p in mh.parse_corpus(mh.load_json(path))] == ["A", "B"]


def test_parse_baselines_reads_table_a() -> None:
    text = (
        "# Baselines\n\n## Table A — x\n\n"
        "| Retriever (HippoRAG 2 paper) | NQ | MuSiQue | 2Wiki | HotpotQA |\n"
        "|---|---|---|---|---|\n"
        "| Contriever | 1.0 / 2.0 | 34.8 / 46.6 | 46.6 / 57.5 | 58.4 / 75.3 |\n"
        "| BM25 | 1.0 / 2.0 | 32.4 / 43.5 | 55.3 / 65.3 | 57.3 / 74.8 |\n"
        "| HippoRAG 2 (GPT-4o-mini) | 1 / 2 | 53.5 / 74.2 | 74.6 / 90.2 | 80.5 / 95.7 |\n"
        "| **HippoRAG 2 (Llama-3.3-70B-Instruct; main result)** | 1 / 2 | 56.1 / 74.7 | – | x |\n"
        "\n## Table B\n\n| Retriever | MuSiQue |\n|---|---|\n| BM25 | 9.9 / 9.9 |\n"
    )
    table = mh.parse_baselines(text)
    assert table["MuSiQue"]["BM25"] == (32.4, 43.5)
    assert table["2Wiki"]["Contriever"] == (46.6, 57.5)
    assert table["MuSiQue"]["HippoRAG 2 (Llama-3.3-70B)"] == (56.1, 74.7)
    assert "HippoRAG 2 (Llama-3.3-70B)" not in table["2Wiki"]
    assert mh.parse_baselines("no tables") == {}


# -- end to end -----------------------------------------------------------------------------------


@pytest.mark.model
@pytest.mark.slow
def test_smoke_musique_bm25(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions, corpus, _ = mh.DATASETS["musique"]
    if not ((mh.DATASETS_DIR / questions).is_file() and (mh.DATASETS_DIR / corpus).is_file()):
        pytest.skip(f"MuSiQue files not found under {mh.DATASETS_DIR}")
    # A slice of the real files keeps the smoke run to ~100 passages: the first five questions
    # and only the corpus passages that appear among their paragraphs.
    items = json.loads((mh.DATASETS_DIR / questions).read_text())[:5]
    wanted = {(p["title"], p["paragraph_text"]) for item in items for p in item["paragraphs"]}
    passages = [
        p
        for p in json.loads((mh.DATASETS_DIR / corpus).read_text())
        if (p["title"], p["text"]) in wanted
    ]
    (tmp_path / "q.json").write_text(json.dumps(items))
    (tmp_path / "c.json").write_text(json.dumps(passages))
    argv = ["--questions", str(tmp_path / "q.json"), "--corpus", str(tmp_path / "c.json")]
    argv += ["--configs", "bm25", "--json"]
    assert mh.main([*argv, "--workdir", str(tmp_path / "work")]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["dataset"] == "custom"  # a --questions/--corpus run
    assert result["questions"] == 5
    assert list(result["configs"]) == ["bm25"]
    scores = result["configs"]["bm25"]
    assert 0.0 <= scores["recall@2"] <= scores["recall@5"] <= 100.0
    assert result["sync"]["chunks_embedded"] > 0
    assert result["seconds"] > 0
