"""Issue 36: the reader model pinakes-core ships as package data keeps its contract.

The files are made by benchmarks/train_reader.py (docs/reader-training.md). These tests read the
real shipped files: the ONNX graph's inputs and output, the tokenizer's pair encoding, and the
provenance record (trained weights, sources with licences and hashes, held-in metrics).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from tokenizers import Tokenizer

READER = Path(str(resources.files("pinakes_core").joinpath("data/reader")))


@pytest.fixture(scope="module")
def provenance() -> dict[str, object]:
    data: dict[str, object] = json.loads((READER / "provenance.json").read_text("utf-8"))
    return data


def test_the_shipped_files_are_there_and_small() -> None:
    for name in ("reader.onnx", "tokenizer.json", "provenance.json"):
        assert (READER / name).is_file(), name
    assert (READER / "reader.onnx").stat().st_size <= 25 * 1024 * 1024


def test_provenance_records_a_trained_model_and_its_sources(provenance: dict[str, object]) -> None:
    assert provenance["trained"] is True
    digest = hashlib.sha256((READER / "reader.onnx").read_bytes()).hexdigest()
    assert provenance["reader_onnx_sha256"] == digest
    sources = provenance["data_sources"]
    assert isinstance(sources, list) and len(sources) >= 3
    for source in sources:
        assert source["licence"] and len(source["sha256"]) == 64, source
    params = provenance["hyper_parameters"]
    assert isinstance(params, dict)
    assert params["layers"] >= 1 and params["max_length"] >= 64
    metrics = provenance["held_in_metrics"]
    assert isinstance(metrics, dict)
    assert 0.5 < metrics["onnx_int8"]["auroc"] <= 1.0


def test_onnx_interface_and_pair_encoding(provenance: dict[str, object]) -> None:
    session = ort.InferenceSession(str(READER / "reader.onnx"), providers=["CPUExecutionProvider"])
    inputs = {i.name: i.type for i in session.get_inputs()}
    assert inputs == {
        "input_ids": "tensor(int64)",
        "attention_mask": "tensor(int64)",
        "token_type_ids": "tensor(int64)",
    }
    assert [o.name for o in session.get_outputs()] == ["logits"]

    tok = Tokenizer.from_file(str(READER / "tokenizer.json"))
    query = "how do I configure the cache size"
    passage = "The cache holds parsed notes. " * 200  # far past max_length: truncated
    short = "Set cache.size in the config file to change how many notes are kept."
    encs = tok.encode_batch([(query, passage), (query, short)])
    params = provenance["hyper_parameters"]
    assert isinstance(params, dict)
    assert len(encs[0].ids) == params["max_length"]
    assert len(encs[1].ids) == len(encs[0].ids)  # padded to the batch's longest
    # The query comes first, whole, as segment 0; the passage is segment 1.
    first_sep = encs[1].tokens.index("[SEP]")
    assert tok.decode(encs[1].ids[1:first_sep]) == query.lower()  # an uncased vocabulary
    assert set(encs[1].type_ids[first_sep + 1 : sum(encs[1].attention_mask)]) == {1}

    feed = {
        "input_ids": np.array([e.ids for e in encs], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64),
    }
    (logits,) = session.run(["logits"], feed)
    assert logits.shape == (2, 1) and logits.dtype == np.float32
    assert np.isfinite(logits).all()
