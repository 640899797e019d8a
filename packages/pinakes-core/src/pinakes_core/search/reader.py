"""The reader: a small cross-encoder that reads a query and a passage together (issue 36).

Retrieval scores say how much a passage shares the query's words and topic; the reader says
whether it *answers* the query. It is a MiniLM-based cross-encoder trained for this project
(``benchmarks/train_reader.py``), exported to int8 ONNX and shipped as package data in
``pinakes_core/data/reader/``:

- ``reader.onnx``: inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64,
  ``[batch, seq]``), output ``logits`` (float32, ``[batch, 1]``): the "answers" logit;
- ``tokenizer.json``: the Hugging Face ``tokenizers`` file; a pair is the query first, the
  passage second, truncated ``longest_first`` (the passage is cut; the query is also cut to
  :data:`QUERY_TOKENS` first) and padded to the batch's longest;
- ``provenance.json``: base weights, training data with licences and hashes, hyper-parameters
  (``hyper_parameters.max_length``: tokens of a pair), held-in metrics.

Nothing is downloaded. The model is loaded once per process, on the first passage it reads
(:func:`default_reader`); importing this module loads neither onnxruntime nor tokenizers, and
nothing imports it unless the reader runs (:mod:`pinakes_core.search.reading`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.errors import ReaderError

__all__ = [
    "FILES",
    "Reader",
    "default_reader",
    "reader_folder",
    "reader_signature",
    "sigmoid",
]

#: The files of a reader folder.
MODEL_FILE = "reader.onnx"
TOKENIZER_FILE = "tokenizer.json"
PROVENANCE_FILE = "provenance.json"
FILES = (MODEL_FILE, TOKENIZER_FILE, PROVENANCE_FILE)
#: Most intra-op threads the reader's session uses. A rerank is one batch of 10-20 short pairs:
#: past a few threads onnxruntime's work split costs more than it saves, and on a shared machine
#: more threads only contend.
MAX_THREADS = 4
#: A query longer than this many tokens is cut before pairing: the passage must keep most of
#: ``max_length`` (a pasted paragraph is not a question).
QUERY_TOKENS = 64
#: ``max_length`` when provenance.json does not say (the training default).
DEFAULT_MAX_LENGTH = 256
#: Tokens of a pair the reader reads at most (or the model's ``max_length`` if smaller): the
#: cost of a read grows with them, and a query with a window of its passage fits
#: (:data:`pinakes_core.search.reading.WINDOW_CHARS`).
PAIR_TOKENS = 128
_REINSTALL = "Reinstall pinakes-core (uv pip install --reinstall pinakes-core), or set [retrieval] reader = false in pinakes.toml."


def reader_folder() -> Path:
    """The folder of the bundled reader model (it may lack the files: see :class:`Reader`)."""
    return Path(str(resources.files("pinakes_core").joinpath("data/reader")))


def sigmoid(logits: npt.NDArray[np.float32] | float) -> Any:
    """The "answers" probability of reader logits (elementwise, overflow-safe)."""
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -40.0, 40.0)))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Reader:
    """A loaded reader: scores (query, passage) pairs with the "answers" logit.

    Thread-safe: onnxruntime sessions may run from several threads, and the tokenizer is only
    read.

    Raises:
        ReaderError: (from the constructor) if a file of ``folder`` is missing, unreadable or
            not a model / tokenizer; the message names the file.
    """

    def __init__(
        self, folder: Path, *, threads: int | None = None, pair_tokens: int = PAIR_TOKENS
    ) -> None:
        self.folder = folder
        missing = [name for name in FILES if not (folder / name).is_file()]
        if missing:
            raise ReaderError(
                f"The reader model is incomplete: {folder} has no {', '.join(missing)}.",
                _REINSTALL,
            )
        self.provenance = _read_provenance(folder / PROVENANCE_FILE)
        self.max_length = _max_length(self.provenance, folder / PROVENANCE_FILE)
        self._pairs, self._plain = _tokenizers(
            folder / TOKENIZER_FILE, min(self.max_length, pair_tokens)
        )
        self._session, self._inputs = _session(
            folder / MODEL_FILE, threads or min(MAX_THREADS, _cores())
        )

    def _query(self, query: str) -> str:
        """The query, cut to :data:`QUERY_TOKENS` tokens (at a token boundary)."""
        encoding = self._plain.encode(query, add_special_tokens=False)
        if len(encoding.ids) <= QUERY_TOKENS:
            return query
        return query[: encoding.offsets[QUERY_TOKENS - 1][1]]

    def logits(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """The "answers" logit of each passage for ``query``, in the order given (one batch).

        Every value is finite; an empty ``passages`` gives an empty array.
        """
        if not passages:
            return np.zeros(0, dtype=np.float32)
        query = self._query(query)
        encoded = self._pairs.encode_batch([(query, p) for p in passages])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
        output = self._session.run(["logits"], feed)[0]
        scores = np.asarray(output, dtype=np.float32).reshape(len(passages), -1)[:, 0]
        return np.nan_to_num(scores, nan=0.0, posinf=40.0, neginf=-40.0)


def _read_provenance(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReaderError(f"Cannot read the reader's {path}: {exc}.", _REINSTALL) from None
    if not isinstance(data, dict):
        raise ReaderError(f"The reader's {path} is not a JSON object.", _REINSTALL)
    return data


def _max_length(provenance: dict[str, Any], path: Path) -> int:
    """Tokens of a pair: ``hyper_parameters.max_length`` (or a top-level ``max_length``)."""
    params = provenance.get("hyper_parameters")
    length = provenance.get("max_length", DEFAULT_MAX_LENGTH)
    if isinstance(params, dict) and "max_length" in params:
        length = params["max_length"]
    if not isinstance(length, int) or isinstance(length, bool) or not 16 <= length <= 4096:
        raise ReaderError(
            f"The reader's {path} has max_length {length!r}, not a number of tokens in 16-4096.",
            _REINSTALL,
        )
    return length


def _tokenizers(path: Path, max_length: int) -> tuple[Any, Any]:
    """The pair tokenizer (passage truncated, batch padded) and a plain one for queries."""
    from tokenizers import Tokenizer

    try:
        pairs = Tokenizer.from_file(str(path))
        plain = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own untyped errors on a bad file
        raise ReaderError(
            f"Cannot load the reader's tokenizer {path}: {exc}.", _REINSTALL
        ) from None
    plain.no_truncation()
    plain.no_padding()
    # longest_first: with the query cut to QUERY_TOKENS first, only the passage is cut.
    pairs.enable_truncation(max_length=max_length, strategy="longest_first")
    padding = pairs.padding or {}
    pad_token = padding.get("pad_token", "[PAD]")
    pad_id = padding.get("pad_id", pairs.token_to_id(pad_token) or 0)
    pairs.enable_padding(pad_id=pad_id, pad_token=pad_token, pad_type_id=0)
    return pairs, plain


def _session(path: Path, threads: int) -> tuple[Any, set[str]]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # No spin-waiting between operators: on a busy machine it takes a core and holds nothing.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        session = ort.InferenceSession(
            str(path), providers=["CPUExecutionProvider"], sess_options=options
        )
    except Exception as exc:  # onnxruntime raises its own untyped errors on a bad file
        raise ReaderError(f"Cannot load the reader model {path}: {exc}.", _REINSTALL) from None
    inputs = {node.name for node in session.get_inputs()}
    outputs = {node.name for node in session.get_outputs()}
    if "input_ids" not in inputs or "logits" not in outputs:
        raise ReaderError(
            f"The reader model {path} has inputs {sorted(inputs)} and outputs {sorted(outputs)}; "
            "it needs input_ids and logits.",
            _REINSTALL,
        )
    return session, inputs


_lock = threading.Lock()


@functools.cache
def _load(folder: Path) -> Reader:
    return Reader(folder)


def default_reader() -> Reader:
    """The bundled reader, loaded on first use and kept for the process.

    Raises:
        ReaderError: if its files are missing or cannot be loaded.
    """
    with _lock:  # two searches' first reads must not load it twice
        return _load(reader_folder())


def reader_signature() -> int:
    """A number that changes when the bundled reader does (0 when it is absent).

    Read from the provenance file and the model's size, not the model's bytes: a sync asks at
    every run whether its calibration is stale.
    """
    folder = reader_folder()
    try:
        head = (folder / PROVENANCE_FILE).read_bytes()
        size = (folder / MODEL_FILE).stat().st_size
    except OSError:
        return 0
    digest = hashlib.blake2b(head + str(size).encode(), digest_size=4).hexdigest()
    return int(digest, 16)
