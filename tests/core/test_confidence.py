"""Confidence: the features' invariants, the constrained fit, the calibration model, and
self-calibration at sync (unit tests with a fake embedder; one end-to-end test with the real
model on a KB that was never labelled)."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import FakeHashEmbedder, make_calibration, make_kb, set_config
from pinakes_core import KB
from pinakes_core.index.bm25 import Fts5Text
from pinakes_core.index.query import query_terms
from pinakes_core.search import calibration as selfcal
from pinakes_core.search import synthetic
from pinakes_core.search.confidence import (
    FEATURES,
    SIGNS,
    TOPIC,
    Evidence,
    Ranking,
    extract_features,
    fit_logistic,
    identifiers,
    prior_calibration,
)

ROOT = Path(__file__).resolve().parents[2]
_WORD = re.compile(r"\w+")


# -- features ----------------------------------------------------------------------------------

_scores = st.lists(st.tuples(st.integers(1, 30), st.floats(0.0, 1.0, allow_nan=False)), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    bm25=_scores,
    dense=_scores,
    docs=st.dictionaries(st.integers(1, 30), st.sampled_from("abcde"), min_size=30, max_size=30),
    query=st.text(max_size=60),
    text=st.text(max_size=200),
    evidence=st.lists(
        st.tuples(st.floats(0.0, 12.0, allow_nan=False), st.booleans(), st.booleans()), max_size=8
    ),
    offtopic=st.none() | st.floats(-1.0, 1.0, allow_nan=False),
)
def test_features_are_finite_and_bounded(
    bm25, dense, docs, query, text, evidence, offtopic
) -> None:
    bm25 = sorted(bm25, key=lambda t: -t[1])
    dense = sorted(dense, key=lambda t: -t[1])
    ranking = Ranking(
        bm25=bm25,
        dense=dense,
        doc_of=docs,
        top_chunk=1,
        top_doc=docs[1],
        top_head="Title heading",
        top_text=text,
        offtopic_best=offtopic,
    )
    rows = [
        Evidence(f"w{i}", idf, inside and known, known)
        for i, (idf, inside, known) in enumerate(evidence)
    ]
    features = extract_features(query, ranking, rows)
    assert set(FEATURES) <= set(features)
    assert (TOPIC in features) == (offtopic is not None)
    assert all(math.isfinite(v) for v in features.values())
    for name in ("doc_rr_bm25", "doc_rr_dense", "idf_coverage", "entity_miss", "unknown_share"):
        assert 0.0 <= features[name] <= 1.0, name
    assert 0.0 <= features["sentence_coverage"] <= 1.0 + 1e-9
    # the top document's own best cosine can only lead the others by what it has
    assert features["dense_doc_margin"] <= features["dense_top"] + 1e-12


def _ranking(text: str, **extra: object) -> Ranking:
    values: dict[str, object] = {
        "bm25": [(1, 5.0), (2, 1.0)],
        "dense": [(1, 0.6), (2, 0.3)],
        "doc_of": {1: "a", 2: "b"},
        "top_chunk": 1,
        "top_doc": "a",
        "top_head": "Ledger",
        "top_text": text,
        "offtopic_best": 0.2,
    }
    values.update(extra)
    return Ranking(**values)  # type: ignore[arg-type]


def test_reading_features_see_what_the_passage_holds() -> None:
    ev = [Evidence("port", 2.0, True, True), Evidence("ledger", 3.0, True, True)]
    together = extract_features(
        "what port does the Ledger use?",
        _ranking("The ledger listens on port 7300. Other things happen."),
        ev,
    )
    apart = extract_features(
        "what port does the Ledger use?",
        _ranking("It listens on a port. Unrelated words here."),
        [Evidence("port", 2.0, True, True), Evidence("ledger", 3.0, False, True)],
    )
    assert together["sentence_coverage"] == pytest.approx(1.0)
    assert apart["idf_coverage"] < together["idf_coverage"]
    # "Ledger" is an entity of the query: missing from the passage it counts as a miss
    assert apart["entity_miss"] == 0.0  # the heading "Ledger" still holds it
    missing = extract_features("what port does Kestrel use?", _ranking("port 7300"), ev)
    assert missing["entity_miss"] == 1.0
    unknown = extract_features("what port", _ranking("x"), [Evidence("port", 2.0, False, False)])
    assert unknown["unknown_share"] == 1.0
    # agreement: the top document first in both channels; margins positive
    assert together["doc_rr_bm25"] == together["doc_rr_dense"] == 1.0
    assert together["dense_doc_margin"] == pytest.approx(0.3)
    assert together[TOPIC] == pytest.approx(0.6 - 0.2)


# -- the fit and the model ---------------------------------------------------------------------


def test_fit_keeps_every_coefficient_on_its_allowed_side() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, len(FEATURES)))
    # The label rises with dense_top and falls with bm25_top (whose sign must be >= 0).
    logits = 2.0 * x[:, FEATURES.index("dense_top")] - 1.5 * x[:, FEATURES.index("bm25_top")]
    y = (rng.random(500) < 1 / (1 + np.exp(-logits))).astype(float)
    coef, _ = fit_logistic(x, y)
    for name, value in zip(FEATURES, coef, strict=True):
        assert value * SIGNS[name] >= 0.0, name
    assert coef[FEATURES.index("dense_top")] > 1.0
    assert coef[FEATURES.index("bm25_top")] == 0.0


def test_fit_is_pulled_toward_its_center() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(200, len(FEATURES)))
    y = (rng.random(200) < 0.5).astype(float)  # pure noise: no feature matters
    center = [0.5 * SIGNS[f] for f in FEATURES]
    loose, _ = fit_logistic(x, y, center=center, l2=0.01)
    tight, _ = fit_logistic(x, y, center=center, l2=1e5)
    assert np.allclose(tight, center, atol=1e-2)
    assert np.abs(loose - center).max() > np.abs(tight - center).max()


def test_sample_weights_move_the_intercept() -> None:
    x = np.zeros((100, len(FEATURES)))
    y = np.r_[np.ones(50), np.zeros(50)]
    _, even = fit_logistic(x, y)
    _, tilted = fit_logistic(x, y, weights=np.r_[np.full(50, 3.0), np.ones(50)])
    assert even == pytest.approx(0.0, abs=1e-6)
    assert tilted == pytest.approx(math.log(3.0), abs=1e-3)


def test_predict_is_a_probability_monotone_in_each_signed_feature() -> None:
    calibration = make_calibration()
    base = dict.fromkeys(FEATURES, 0.5)
    for name in FEATURES:
        low = calibration.predict({**base, name: 0.0})
        high = calibration.predict({**base, name: 1.0})
        assert (high > low) if SIGNS[name] > 0 else (high < low), name
    assert 0.0 <= calibration.predict(dict.fromkeys(FEATURES, -1e9)) <= 1.0
    assert 0.0 <= calibration.predict(dict.fromkeys(FEATURES, 1e9)) <= 1.0


def test_positions_are_clipped_and_a_missing_feature_is_neutral() -> None:
    calibration = make_calibration()
    z = calibration.positions(dict.fromkeys(FEATURES, 1e6))
    assert z.max() <= 4.0
    partial = calibration.positions({})
    assert np.allclose(partial, 0.5)


def test_the_offtopic_gate_only_ever_lowers_confidence() -> None:
    gated = make_calibration(gate=[10.0, -2.0])
    plain = make_calibration()
    features = {**dict.fromkeys(FEATURES, 1.0)}
    assert gated.predict({**features, TOPIC: 1.0}) == pytest.approx(
        plain.predict(features) * (1 / (1 + math.exp(-8.0)))
    )
    assert gated.predict({**features, TOPIC: -0.5}) < 0.01
    # no off-topic reference loaded: the gate abstains from judging
    assert gated.predict(features) == plain.predict(features)


def test_shipped_prior_matches_the_features_and_their_signs() -> None:
    prior = prior_calibration()
    assert prior is not None and prior.kind == "prior"
    assert prior.features == list(FEATURES)
    assert all(c * SIGNS[f] >= 0 for f, c in zip(prior.features, prior.coef, strict=True))
    assert all(s > 0 for s in prior.scale)
    # the strongest retrieval evidence is used, not clamped away
    assert prior.coef[FEATURES.index("dense_doc_margin")] > 0


# -- the bundled off-topic queries -----------------------------------------------------------


def test_offtopic_bundle_is_varied_and_never_repeats_a_golden_question() -> None:
    bundle = selfcal.offtopic_queries()
    assert len(bundle) >= 250
    assert len({q.lower() for q in bundle}) == len(bundle)
    golden = [
        json.loads(line)["query"]
        for path in sorted((ROOT / "golden").glob("**/questions.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    assert golden

    for item in bundle:
        mine = set(query_terms(item))
        for question in golden:
            theirs = set(query_terms(question))
            shared = mine & theirs
            # near-duplicate: two or more content words shared and half of them in common
            assert len(shared) < 2 or len(shared) / len(mine | theirs) < 0.4, (item, question)


# -- self-calibration at sync (fake embedder: semantics do not matter here) ------------------

FILES = {
    f"notes/topic{i}.md": (
        f"# Topic {i}\n\nThe service{i} component listens on port {7000 + i} and stores "
        f"journal entries for team{i}.\n\n## Owners\n\nTeam{i} owns service{i}; escalate to "
        f"lead{i} when the queue{i} backs up beyond {i + 3} minutes.\n"
    )
    for i in range(12)
}


def test_synthetic_queries_are_deterministic_and_near_misses_leave_the_kb(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    set_config(root, "confidence", "self_calibrate = false")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        conn = kb.store().conn
        first = selfcal.synthetic_queries(conn, kb.config.kb.id)
        assert first == selfcal.synthetic_queries(conn, kb.config.kb.id)
        kinds = {q.kind for q in first}
        assert kinds == {"positive", "nearmiss"}
        docs = {r[0] for r in conn.execute("SELECT doc_id FROM documents")}
        assert all(q.source_doc in docs for q in first if q.kind == "positive")
        for query in (q for q in first if q.kind == "nearmiss"):
            # each near-miss holds a word (or identifier) that no chunk contains
            assert any(
                synthetic._df(Fts5Text(conn), w.lower()) == 0 for w in _WORD.findall(query.text)
            ), query.text
        # another model than the prior's, and no self-calibration: no confidence is invented
        assert kb.calibration() is None
        assert kb.search("which team owns service3?").confidence is None


def test_sync_self_calibrates_once_and_refits_only_after_material_change(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    fake = FakeHashEmbedder()
    with KB.open(root, embedder=fake) as kb:
        kb.sync()
        first = kb.calibration()
        assert first is not None and first.kind == "self"
        assert first.gate and first.signature["documents"] == len(FILES)
        assert kb.searcher.offtopic_vectors() is not None
        assert kb.searcher.offtopic_vectors().shape == (len(selfcal.offtopic_queries()), fake.dim)
        result = kb.search("which team owns service3?")
        assert result.confidence is not None and result.abstain is not None
        # nothing changed: no refit, and the model is not even asked for a query
        calls = fake.query_calls
        kb.sync()
        assert kb.calibration() == first and fake.query_calls == calls
        # one document of twelve changed: below the drift threshold
        (root / "notes/topic0.md").write_text("# Topic 0\n\nRewritten text about queues.\n")
        kb.sync()
        assert kb.calibration() == first
        # a third of the KB is new: refit
        for i in range(6):
            (root / f"more/new{i}.md").parent.mkdir(exist_ok=True)
            (root / f"more/new{i}.md").write_text(f"# New {i}\n\nFresh words{i} about billing.\n")
        kb.sync()
        again = kb.calibration()
        assert again is not None and again.kind == "self" and again != first
        assert again.signature["documents"] == len(FILES) + 6


def test_a_kb_too_small_to_self_calibrate_is_not_retried_until_it_changes(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# Hi\n\nok\n"})
    fake = FakeHashEmbedder()
    with KB.open(root, embedder=fake) as kb:
        kb.sync()
        assert selfcal.stored(kb.store()) is None
        assert fake.query_calls > 0  # it tried once: the off-topic bank was embedded
        calls = fake.query_calls
        kb.sync()
        kb.sync()
        assert fake.query_calls == calls  # a no-change sync does not try again
        (root / "b.md").write_text("# B\n\nA longer note about queues and their retries.\n")
        kb.sync()
        assert fake.query_calls > calls  # a changed KB is worth another try


def test_a_kb_without_self_calibration_falls_back_to_the_prior(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    set_config(root, "confidence", "self_calibrate = false")
    with KB.open(root, embedder=FakeHashEmbedder(model_id=prior_model_id())) as kb:
        kb.sync()
        assert kb.calibration() == prior_calibration()
        assert kb.searcher.offtopic_vectors() is None
        result = kb.search("which team owns service3?", explain=True)
        assert result.confidence is not None
        assert result.features is not None and TOPIC not in result.features


def prior_model_id() -> str:
    prior = prior_calibration()
    assert prior is not None
    return prior.model_id


# -- the real model on a KB nobody labelled ---------------------------------------------------


@pytest.mark.model
@pytest.mark.slow
def test_pnk_sync_alone_gives_a_working_calibration(tmp_path: Path) -> None:
    from pinakes_cli.main import cli

    root = tmp_path / "kb"
    shutil.copytree(
        ROOT / "examples" / "distsys-notes", root, ignore=shutil.ignore_patterns(".pinakes")
    )
    result = CliRunner().invoke(cli, ["sync", "--kb", str(root)])
    assert result.exit_code == 0, result.output
    with KB.open(root) as kb:
        calibration = kb.calibration()
        assert calibration is not None and calibration.kind == "self"
        offtopic = kb.search("What is the capital city of Australia?")
        assert offtopic.confidence is not None and offtopic.abstain is True
        recipe = kb.search("how long should I knead bread dough")
        assert recipe.abstain is True
        answerable = kb.search("how does Raft elect a leader?")
        assert answerable.hits[0].path.startswith("consensus/")
        assert answerable.abstain is False
        assert answerable.confidence > offtopic.confidence


def test_a_pseudo_question_another_passage_answers_word_for_word_is_left_out() -> None:
    from pinakes_core.models import Hit

    query = selfcal.SyntheticQuery(
        "how is Toggle Preview", "positive", "doc-a", ("Toggle", "Preview")
    )
    parent = Hit.model_construct(
        title="Preview commands", heading_path=["Toggle preview"], text="Opens the pane."
    )
    other = Hit.model_construct(title="Publish", heading_path=[], text="Toggle the site.")
    assert selfcal._ambiguous(query, parent)  # every source word is there: no label
    assert not selfcal._ambiguous(query, other)  # "preview" is missing: a wrong top hit
    nearmiss = selfcal.SyntheticQuery("how is Toggle Zebra", "nearmiss")
    assert not selfcal._ambiguous(nearmiss, parent)


def test_synthetic_positives_record_the_words_taken_from_their_source(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        conn = kb.store().conn
        positives = [
            q for q in selfcal.synthetic_queries(conn, kb.config.kb.id) if q.kind == "positive"
        ]
        assert positives
        for query in positives:
            assert query.words, query
            text = " ".join(
                str(r[0]) + " " + str(r[1]) + " " + str(r[2])
                for r in conn.execute(
                    "SELECT d.title, c.heading_path, c.text FROM chunks c "
                    "JOIN documents d USING (doc_id) WHERE doc_id = ?",
                    (query.source_doc,),
                )
            ).lower()
            # every recorded word comes from the document, none is the recipe's opener
            assert all(w.lower() in text for w in query.words), query
            assert query.words[0].lower() not in {"what", "how", "which", "why", "where"}


def test_a_calibration_of_an_earlier_recipe_serves_until_the_next_sync_refits_it(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb", FILES)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        store = kb.store()
        fitted = selfcal.stored(store)
        assert fitted is not None and not selfcal.stale(store)
        older = fitted.model_copy(
            update={
                "signature": {**fitted.signature, "version": selfcal.CALIBRATION_VERSION - 1},
                "intercept": fitted.intercept - 1.0,
            }
        )
        with store.transaction() as conn:
            store.set_meta(conn, selfcal.META_SELF, older.model_dump_json())
        # still used, off-topic gate and all, rather than the gateless prior ...
        assert selfcal.stored(store) == older and older.gate
        # ... and refitted by the next sync
        assert selfcal.stale(store)
        kb.sync()
        refitted = selfcal.stored(kb.store())
        assert refitted is not None and refitted.signature["version"] == selfcal.CALIBRATION_VERSION
        assert not selfcal.stale(kb.store())


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab1_-./: é9Z\n", max_size=30))
def test_identifiers_are_found_as_by_the_unanchored_pattern(query: str) -> None:
    # The pattern is anchored at word starts so a long word is not rescanned from each of its
    # characters; what it finds must be what the plain pattern finds.
    plain = re.compile(r"\w+(?:[-._/:]\w+)+|\w*\d\w*", re.UNICODE)
    assert identifiers(query) == [m for m in plain.findall(query) if len(m) > 1]
