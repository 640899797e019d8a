"""The reader (issue 36): the bundled cross-encoder, its rerank and its confidence features."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import FakeHashEmbedder, make_calibration, make_kb, set_config
from pinakes_core import KB
from pinakes_core.errors import ReaderError
from pinakes_core.search import calibration as selfcal
from pinakes_core.search.calibration import SyntheticQuery, fit_self
from pinakes_core.search.confidence import FEATURES, READER_FEATURES, Calibration
from pinakes_core.search.reader import FILES, Reader, default_reader, reader_folder, sigmoid
from pinakes_core.search.reading import (
    WINDOW_CHARS,
    combine_scores,
    passage_text,
    reader_features,
    window,
)
from pinakes_core.search.retrieval import default_channels

NOTES = {
    f"notes/topic{i}.md": (
        f"# Topic {i}\n\nThe service{i} component listens on port {7000 + i} and stores "
        f"journal entries for team{i}.\n\n## Owners\n\nTeam{i} owns service{i}; escalate to "
        f"lead{i} when the queue{i} backs up beyond {i + 3} minutes.\n"
    )
    for i in range(12)
}


# -- the model ------------------------------------------------------------------------------------


def _copy_reader(target: Path, *, without: str | None = None) -> Path:
    target.mkdir(parents=True)
    for name in FILES:
        if name != without:
            shutil.copyfile(reader_folder() / name, target / name)
    return target


def test_a_reader_folder_missing_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "provenance.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ReaderError, match=r"has no reader\.onnx, tokenizer\.json") as raised:
        Reader(tmp_path)
    assert "reader = false" in str(raised.value)  # the way out is in the message


def test_a_provenance_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    for name in FILES:
        (tmp_path / name).write_text("not json", encoding="utf-8")
    with pytest.raises(ReaderError, match=r"provenance\.json"):
        Reader(tmp_path)


def test_a_max_length_that_is_no_token_count_is_refused(tmp_path: Path) -> None:
    for name in FILES:
        (tmp_path / name).write_text("{}", encoding="utf-8")
    (tmp_path / "provenance.json").write_text(
        json.dumps({"hyper_parameters": {"max_length": "long"}}), encoding="utf-8"
    )
    with pytest.raises(ReaderError, match=r"max_length 'long'"):
        Reader(tmp_path)


@pytest.mark.model
def test_a_corrupt_model_file_is_refused_naming_it(tmp_path: Path) -> None:
    folder = _copy_reader(tmp_path / "reader", without="reader.onnx")
    (folder / "reader.onnx").write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ReaderError, match=r"Cannot load the reader model .*reader\.onnx"):
        Reader(folder)


@pytest.mark.model
def test_a_corrupt_tokenizer_is_refused_naming_it(tmp_path: Path) -> None:
    folder = _copy_reader(tmp_path / "reader", without="tokenizer.json")
    (folder / "tokenizer.json").write_text('{"version": "1.0"}', encoding="utf-8")
    with pytest.raises(ReaderError, match=r"tokenizer .*tokenizer\.json"):
        Reader(folder)


@pytest.mark.model
def test_the_bundled_reader_scores_pairs_in_order_and_alike_alone_or_batched() -> None:
    reader = default_reader()
    assert default_reader() is reader  # loaded once per process
    query = "which port does service3 listen on?"
    passages = [NOTES["notes/topic3.md"], "Bread needs flour, water, salt and time.", ""]
    batched = reader.logits(query, passages)
    assert batched.shape == (3,) and batched.dtype == np.float32
    assert np.isfinite(batched).all()
    alone = np.array([reader.logits(query, [p])[0] for p in passages])
    # Padding to the batch's longest changes a pair's score only by the int8 model's noise:
    # dynamic quantisation scales activations per batch (0.02 logits measured, untrained head).
    np.testing.assert_allclose(batched, alone, atol=0.1)
    assert reader.logits(query, []).shape == (0,)


@pytest.mark.model
def test_a_very_long_query_or_passage_is_cut_not_refused() -> None:
    reader = default_reader()
    scores = reader.logits("why " * 5000, ["word " * 20000, "short"])
    assert scores.shape == (2,) and np.isfinite(scores).all()


# -- the rule --------------------------------------------------------------------------------------


def test_the_combined_score_stays_between_its_parts() -> None:
    assert combine_scores(0.4, 0.4) == pytest.approx(0.4)
    assert 0.4 < combine_scores(0.4, 0.9) < 0.9
    assert combine_scores(1.0, 1.0) <= 1.0 and combine_scores(0.0, 0.0) >= 0.0
    assert float(sigmoid(0.0)) == 0.5 and float(sigmoid(1e9)) == 1.0


def test_the_passage_the_reader_reads_carries_its_title_and_headings() -> None:
    assert passage_text("Ledger", ["Ledger", "Ports"], "Port 7300.") == "Ledger › Ports\nPort 7300."
    assert passage_text("", [], "text") == "text"


def test_the_reader_reads_the_window_of_a_long_passage_around_the_query() -> None:
    filler = [f"Sentence {i} is about gardening and tomatoes." for i in range(30)]
    text = " ".join([*filler[:20], "The ledger listens on port 7300.", *filler[20:]])
    cut = window(text, "which port does the ledger listen on?")
    assert "port 7300" in cut and len(cut) <= WINDOW_CHARS
    assert window("short text", "anything") == "short text"
    # nothing of the query in it: read from the start
    assert window(text, "zebra") == text[:WINDOW_CHARS]


def test_reader_features_read_the_top_hit_and_its_lead_over_other_documents() -> None:
    read = {1: ("A", 2.0), 2: ("A", 3.0), 3: ("B", 0.5), 4: ("C", -1.0)}
    assert reader_features(read, 1) == {"reader_top": 2.0, "reader_doc_margin": 1.5}
    assert reader_features({1: ("A", 2.0)}, 1) == {"reader_top": 2.0, "reader_doc_margin": 0.0}
    assert reader_features(read, 99) == {}  # the reader did not read the top hit


def test_the_reader_runs_last_and_only_when_asked() -> None:
    from pinakes_core.config import RetrievalConfig

    on = RetrievalConfig(reader=True, graph_channel="off")
    assert default_channels(on, entities=False, concepts=False) == ["bm25", "dense", "reader"]
    assert "reader" not in default_channels(on, entities=False, concepts=False, reader=False)
    off = RetrievalConfig(graph_channel="off")
    assert "reader" not in default_channels(off, entities=False, concepts=False)
    assert default_channels(off, entities=True, concepts=False, reader=True)[-1] == "reader"


# -- the calibration -----------------------------------------------------------------------------


def _with_reader(base: Calibration, coef: float = 1.0) -> Calibration:
    names = [*FEATURES, *READER_FEATURES]
    return base.model_copy(
        update={
            "features": names,
            "off": [0.0] * len(names),
            "scale": [1.0] * len(names),
            "coef": [*base.coef, coef, coef],
            "base": base,
        }
    )


def test_a_calibration_with_the_reader_judges_unread_searches_by_its_base() -> None:
    base = make_calibration(intercept=-1.0)
    full = _with_reader(base)
    features = dict.fromkeys(FEATURES, 0.2)
    assert full.reads and not base.reads
    assert full.predict(features) == base.predict(features)  # no reader features: the base
    sure = full.predict({**features, "reader_top": 3.0, "reader_doc_margin": 2.0})
    unsure = full.predict({**features, "reader_top": -3.0, "reader_doc_margin": -2.0})
    assert unsure < base.predict(features) < sure
    again = Calibration.model_validate_json(full.model_dump_json())
    assert again == full and again.base == base


def _rows(reader: bool) -> list[tuple[SyntheticQuery, dict[str, float], bool]]:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(120):
        kind = ("positive", "nearmiss", "offtopic")[i % 3]
        right = kind == "positive" and i % 2 == 0
        features = {name: float(rng.normal(1.0 if right else 0.0)) for name in FEATURES}
        if reader:
            features["reader_top"] = float(rng.normal(3.0 if right else -2.0))
            features["reader_doc_margin"] = float(rng.normal(1.0 if right else -1.0))
        rows.append(
            (SyntheticQuery(f"q{i}", kind, "d" if kind == "positive" else None), features, right)
        )
    return rows


def test_a_coefficient_can_be_held_to_its_prior_while_another_is_learnt() -> None:
    from pinakes_core.search.confidence import fit_logistic

    rng = np.random.default_rng(1)
    z = rng.normal(size=(400, 2))
    y = (z[:, 0] + z[:, 1] + rng.normal(scale=0.3, size=400) > 0).astype(np.float64)
    coef, _ = fit_logistic(
        z, y, names=["dense_top", "reader_top"], center=[0.5, 0.0], l2=[1e6, 1.0]
    )
    assert coef[0] == pytest.approx(0.5, abs=0.01)  # held where the prior put it
    assert coef[1] > 1.0  # learnt from the rows


def test_self_calibration_reads_the_reader_when_its_queries_were_read() -> None:
    fitted = fit_self(_rows(reader=True), None, "m")
    assert fitted.features == [*FEATURES, *READER_FEATURES]
    assert fitted.base is not None and fitted.base.features == list(FEATURES)
    # the reader separates these rows best: its coefficient is the one that carries weight
    assert fitted.coef[len(FEATURES)] > 0
    plain = fit_self(_rows(reader=False), None, "m")
    assert plain.features == list(FEATURES) and plain.base is None
    # A prior fitted before the reader keeps its lessons for the other features.
    prior = make_calibration(kind="prior", model_id="m")
    held = fit_self(_rows(reader=True), prior, "m")
    assert held.base is not None and held.features == [*FEATURES, *READER_FEATURES]


# -- in the pipeline -------------------------------------------------------------------------------


@pytest.mark.model
def test_a_search_with_the_reader_rereads_the_head_and_reports_it(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        query = "who owns service3 and when do I escalate?"
        plain = kb.search(query, k=12, reader=False, explain=True, group_by="chunk")
        read = kb.search(query, k=12, reader=True, explain=True, group_by="chunk")
    assert all(hit.reader is None for hit in plain.hits) and "reader" not in plain.timings_ms
    assert "reader" in read.timings_ms and read.ranking is not None
    assert read.ranking.stages["reader"].startswith("ran: read 10 passages")
    probabilities = [hit.reader for hit in read.hits if hit.reader is not None]
    assert len(probabilities) == 10 and all(0.0 <= p <= 1.0 for p in probabilities)
    scores = [hit.score for hit in read.hits]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    # the reread head comes first: every passage the reader read outranks every other
    first_unread = next(i for i, hit in enumerate(read.hits) if hit.reader is None)
    assert all(hit.reader is None for hit in read.hits[first_unread:])
    # the same candidates, reordered
    assert {h.path for h in read.hits} == {h.path for h in plain.hits}
    assert read.features is not None and "reader_top" in read.features


@pytest.mark.model
def test_the_kb_setting_turns_the_reader_on_and_its_calibration_refits(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        fitted = selfcal.stored(kb.store())
        assert fitted is not None and not fitted.reads
        assert kb.search("service3 port").hits[0].reader is None
    set_config(root, "retrieval", "reader = true\nreader_top_n = 4")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert selfcal.stale(
            kb.store(), reader=selfcal.reader_key(kb.config.retrieval)
        )  # fitted without the reader
        kb.sync()
        refitted = selfcal.stored(kb.store())
        assert refitted is not None and refitted.reads and refitted.base is not None
        assert not selfcal.stale(kb.store(), reader=selfcal.reader_key(kb.config.retrieval))
        # another weight reranks otherwise: the labels it was fitted on no longer hold
        other = kb.config.retrieval.model_copy(update={"reader_weight": 0.0})
        assert selfcal.stale(kb.store(), reader=selfcal.reader_key(other))
        result = kb.search("service3 port", k=8, group_by="chunk")
        assert sum(hit.reader is not None for hit in result.hits) == 4
        assert result.confidence is not None
        # --no-reader: the same calibration judges it by its base
        assert kb.search("service3 port", k=8, reader=False).confidence is not None


@pytest.mark.model
def test_a_fleet_merges_the_reread_scores(tmp_path: Path) -> None:
    from pinakes_core.manage.fleet import Fleet, FleetRegistry

    registry = FleetRegistry.load()
    garden = {"garden/roses.md": "# Roses\n\nPrune roses in late winter, above an outward bud.\n"}
    for name, files in (("notes", NOTES), ("garden", garden)):
        root = make_kb(tmp_path / name, files, name=name)
        set_config(root, "retrieval", "reader = true")
        registry.add(root)
    registry.save()
    with Fleet.open(embedder=FakeHashEmbedder()) as fleet:
        fleet.sync()
        result = fleet.search("when do I prune the roses?", k=6)
        plain = fleet.search("when do I prune the roses?", k=6, reader=False)
    assert {h.kb for h in result.hits} == {"notes", "garden"}
    assert all(h.reader is not None for h in result.hits)  # both KBs reread their heads
    scores = [h.score for h in result.hits]
    assert scores == sorted(scores, reverse=True)  # merged on the reread scores
    assert all(h.reader is None for h in plain.hits)


@pytest.mark.model
def test_a_reader_weight_of_zero_only_judges(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", NOTES)
    set_config(root, "retrieval", "reader_weight = 0.0")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        query = "who owns service3 and when do I escalate?"
        plain = kb.search(query, k=12, reader=False, explain=True, group_by="chunk")
        judged = kb.search(query, k=12, reader=True, explain=True, group_by="chunk")
    # the same ranking and scores, the reader's probabilities on the head, its features there
    assert [(h.path, h.chunk, h.score) for h in judged.hits] == [
        (h.path, h.chunk, h.score) for h in plain.hits
    ]
    assert sum(h.reader is not None for h in judged.hits) == 10
    assert judged.features is not None and "reader_top" in judged.features
