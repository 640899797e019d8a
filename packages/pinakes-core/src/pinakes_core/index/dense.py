"""Dense vectors at any size (issue 14): a memory-mapped snapshot, and an ANN index at scale.

**Snapshot.** The chunk vectors live in the store as one BLOB per distinct text. A query needs
them as one float32 matrix ordered by chunk id; building it means reading every BLOB, which
costs a fresh process (``pnk search``) more than the search itself at a few thousand chunks
and seconds at a million. So the matrix is also written to ``.pinakes/vectors-<store>-<gen>``
(``.ids.npy`` and ``.f32.npy``), named by the store file's identity and its generation, and
later processes map it with ``numpy.load(mmap_mode="r")``: the operating system pages in only
what a query touches. A snapshot is written whole to a temporary name and renamed into place,
so a reader sees a complete one or none; with none it reads the store as before. Older
snapshots are deleted by the next writer. The vectors are the same bytes either way.

**ANN index.** From ``[scale] ann_min_chunks`` chunks on, the dense channel asks an HNSW index
(usearch, ``.pinakes/ann.usearch``) for candidates instead of scanning every row, then scores
those candidates exactly against the snapshot (so a hit's dense score is still its cosine).
Sync keeps the index current incrementally: it removes the chunks that went away or changed
text and adds the new ones, keyed by chunk id; an index whose ``sync_serial`` is not the
store's is stale and not used (search falls back to the exact scan). Below the threshold the
index is deleted and search stays exact. Filtered searches stay exact too: a filter can leave
any subset of rows, which a graph search cannot promise to find.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pinakes_core.derived import store_dir
from pinakes_core.index.store import (
    Store,
    VectorMatrix,
    chunk_count,
    read_stamp,
    write_stamp,
)

if TYPE_CHECKING:
    from pinakes_core.config import ScaleConfig

__all__ = ["AnnIndex", "load_ann", "load_vectors", "read_rows", "update_ann"]

log = logging.getLogger(__name__)

_ANN_FILE = "ann.usearch"
_ANN_META = "ann.json"
_ANN_KEYS = "ann-keys.npy"
_SNAPSHOT_PREFIX = "vectors-"


# -- the memory-mapped snapshot ----------------------------------------------------------------


def _snapshot_paths(root: Path, token: str, generation: int) -> tuple[Path, Path]:
    base = store_dir(root) / f"{_SNAPSHOT_PREFIX}{token}-{generation}"
    return Path(f"{base}.ids.npy"), Path(f"{base}.f32.npy")


def _save_npy(path: Path, array: npt.NDArray[Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as handle:
            np.save(handle, array)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_snapshot(root: Path, store: Store, dim: int) -> int | None:
    """Stream the store's vectors into a new snapshot; return its generation.

    Rows are copied in batches straight into the mapped file, so memory stays flat at any
    size. The generation and the rows are read in one transaction, so they agree. Returns
    ``None`` when the store holds no vectors.
    """
    token = store.file_token()
    if token is None:
        return None
    conn = store.conn
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        generation = store.generation()
        count = int(
            conn.execute(
                "SELECT COUNT(*) FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash"
            ).fetchone()[0]
        )
        if count == 0:
            return None
        ids_path, matrix_path = _snapshot_paths(root, token, generation)
        tmp_ids = ids_path.with_name(f".{ids_path.name}.{os.getpid()}.tmp")
        tmp_matrix = matrix_path.with_name(f".{matrix_path.name}.{os.getpid()}.tmp")
        try:
            ids = np.lib.format.open_memmap(tmp_ids, mode="w+", dtype=np.int64, shape=(count,))
            matrix = np.lib.format.open_memmap(
                tmp_matrix, mode="w+", dtype=np.float32, shape=(count, dim)
            )
            cursor = conn.execute(
                "SELECT c.chunk_id, v.vector FROM chunks c "
                "JOIN vectors v ON v.embed_hash = c.embed_hash ORDER BY c.chunk_id"
            )
            done = 0
            while batch := cursor.fetchmany(8192):
                end = done + len(batch)
                ids[done:end] = [r[0] for r in batch]
                matrix[done:end] = np.frombuffer(b"".join(r[1] for r in batch), np.float32).reshape(
                    -1, dim
                )
                done = end
            matrix.flush()
            ids.flush()
            del matrix, ids
            # The matrix first: a reader needs both, and looks for the ids.
            os.replace(tmp_matrix, matrix_path)
            os.replace(tmp_ids, ids_path)
        finally:
            tmp_ids.unlink(missing_ok=True)
            tmp_matrix.unlink(missing_ok=True)
    finally:
        if own:
            conn.execute("COMMIT")
    keep = {ids_path.name, matrix_path.name}
    for old in store_dir(root).glob(f"{_SNAPSHOT_PREFIX}*.npy"):
        if old.name not in keep:
            # A process still mapping it keeps its pages (POSIX); elsewhere the next writer retries.
            with contextlib.suppress(OSError):
                old.unlink()
    return generation


def _map_snapshot(root: Path, store: Store, generation: int, dim: int) -> VectorMatrix | None:
    token = store.file_token()
    if token is None:
        return None
    ids_path, matrix_path = _snapshot_paths(root, token, generation)
    if not ids_path.exists():
        return None
    try:
        ids = np.load(ids_path, mmap_mode="r")
        matrix = np.load(matrix_path, mmap_mode="r")
    except (OSError, ValueError):  # half-deleted or damaged: the caller rebuilds it
        return None
    if matrix.shape != (ids.shape[0], dim):
        return None
    return VectorMatrix(np.asarray(ids), matrix)


def load_vectors(root: Path, store: Store, dim: int) -> tuple[int, VectorMatrix]:
    """Return the store's generation and its chunk vectors, memory-mapped when possible.

    The snapshot of this store and generation is mapped if it exists; otherwise one is written
    (streamed from the store) and mapped. Where ``.pinakes/`` is not writable the vectors are
    read into memory as before.
    """
    generation = store.generation()
    mapped = _map_snapshot(root, store, generation, dim)
    if mapped is not None:
        return generation, mapped
    try:
        written = _write_snapshot(root, store, dim)
    except OSError as exc:
        log.debug("Pinakes: vector snapshot not written (%s).", exc)
        written = None
    if written is not None:
        mapped = _map_snapshot(root, store, written, dim)
        if mapped is not None:
            return written, mapped
    return generation, store.load_vectors(dim)


# -- the ANN index ---------------------------------------------------------------------------


class AnnIndex:
    """A loaded (memory-mapped) HNSW index over chunk vectors, keyed by chunk id."""

    def __init__(self, index: Any, expansion: int) -> None:
        self._index = index
        self._expansion = expansion

    def __len__(self) -> int:
        return len(self._index)

    def search(self, vector: npt.NDArray[np.float32], count: int) -> npt.NDArray[np.int64]:
        """Chunk ids of (about) the ``count`` nearest rows to ``vector``, best first."""
        count = min(count, len(self._index))
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        # ef below twice the count asked for loses neighbours (measured: docs/scaling.md).
        self._index.expansion_search = max(self._expansion, 2 * count)
        matches = self._index.search(vector, count)
        return np.asarray(matches.keys, dtype=np.int64)


def _hash_keys(hashes: list[str]) -> npt.NDArray[np.uint64]:
    """A 64-bit fingerprint of each chunk's embed hash (hex), to notice a changed text."""
    return np.fromiter(
        (int(h[:16], 16) ^ int(h[16:32] or "0", 16) for h in hashes),
        dtype=np.uint64,
        count=len(hashes),
    )


def _ann_paths(root: Path) -> tuple[Path, Path, Path]:
    folder = store_dir(root)
    return folder / _ANN_FILE, folder / _ANN_META, folder / _ANN_KEYS


def drop_ann(root: Path) -> None:
    """Delete the ANN index files (the KB shrank below the threshold, or a rebuild)."""
    for path in _ann_paths(root):
        path.unlink(missing_ok=True)


def _usearch() -> Any:
    """Usearch's ``Index`` class, with onnxruntime loaded first.

    Loading usearch before onnxruntime crashes the process when onnxruntime loads (a clash of
    their native libraries, seen with usearch 2.26 and onnxruntime 1.32 on Linux x86-64); the
    other order is fine. So every use of usearch goes through here.
    """
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401

    from usearch.index import Index

    return Index


def new_index(dim: int, config: ScaleConfig) -> Any:
    Index = _usearch()

    return Index(
        ndim=dim,
        metric="cos",
        dtype=config.ann_dtype,
        connectivity=config.ann_connectivity,
        expansion_add=config.ann_expansion_add,
    )


def _settings(store: Store, config: ScaleConfig) -> dict[str, Any]:
    """What an index was built with; any difference means rebuilding it."""
    return {
        "model_id": store.get_meta("model_id"),
        "dim": int(store.get_meta("dim") or 0),
        "dtype": config.ann_dtype,
        "connectivity": config.ann_connectivity,
    }


def update_ann(
    root: Path, store: Store, config: ScaleConfig, *, changed: bool = True
) -> dict[str, int] | None:
    """Bring the ANN index in line with the store's chunks (called by sync, under its lock).

    Args:
        root: the KB root.
        store: the open store, after the sync wrote every document.
        config: the ``[scale]`` settings.
        changed: whether this sync added, changed or removed any document. When it did not,
            and the index is current as of the previous sync, only its stamp moves on.

    Returns ``{"removed": n, "added": n, "size": n}``, or ``None`` when the KB is below the
    threshold (the index is then deleted).
    """
    conn = store.conn
    index_path, meta_path, keys_path = _ann_paths(root)
    serial = store.get_meta("sync_serial")
    settings = _settings(store, config)
    meta = read_stamp(meta_path)
    fits = (
        meta is not None
        and all(meta.get(key) == value for key, value in settings.items())
        and index_path.exists()
        and keys_path.exists()
    )
    if (
        not changed
        and fits
        and meta is not None
        and serial is not None
        and str(meta.get("sync_serial")) == str(int(serial) - 1)
        and config.ann_min_chunks > 0
        and int(meta.get("size", 0)) >= config.ann_min_chunks
    ):
        write_stamp(meta_path, {**meta, "sync_serial": serial})
        return {"removed": 0, "added": 0, "size": int(meta.get("size", 0))}
    if config.ann_min_chunks <= 0 or chunk_count(conn) < config.ann_min_chunks:
        # Chunks with a vector are at most all chunks: below the threshold without counting
        # the join (a second at 1M chunks, in every no-change sync of such a KB).
        drop_ann(root)
        return None
    rows = conn.execute(
        "SELECT c.chunk_id, c.embed_hash FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash "
        "ORDER BY c.chunk_id"
    ).fetchall()
    if len(rows) < config.ann_min_chunks:
        drop_ann(root)
        return None
    dim = int(settings["dim"])
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    fingerprints = _hash_keys([r[1] for r in rows])
    index = None
    if fits:
        try:
            index = _usearch().restore(str(index_path))
            old = np.load(keys_path)
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("Pinakes: ANN index unreadable (%s); rebuilding it.", exc)
            index = None
    if index is None:
        index = new_index(dim, config)
        old = np.zeros((0, 2), dtype=np.uint64)
    old_ids = old[:, 0].astype(np.int64)
    old_prints = old[:, 1]
    # Keys whose chunk is gone or whose text changed go; new or changed ones are added.
    current = dict(zip(ids.tolist(), fingerprints.tolist(), strict=True))
    stale = [
        int(key)
        for key, fp in zip(old_ids.tolist(), old_prints.tolist(), strict=True)
        if current.get(key) != fp
    ]
    kept = set(old_ids.tolist()) - set(stale)
    fresh = np.asarray([key for key in ids.tolist() if key not in kept], dtype=np.int64)
    if stale:
        index.remove(np.asarray(stale, dtype=np.uint64))
    for start in range(0, fresh.size, 65536):
        batch = fresh[start : start + 65536]
        marks = ",".join("?" * batch.size)
        blobs = conn.execute(
            f"SELECT c.chunk_id, v.vector FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash "
            f"WHERE c.chunk_id IN ({marks}) ORDER BY c.chunk_id",
            batch.tolist(),
        ).fetchall()
        keys = np.fromiter((r[0] for r in blobs), dtype=np.uint64, count=len(blobs))
        matrix = np.frombuffer(b"".join(r[1] for r in blobs), dtype=np.float32).reshape(-1, dim)
        index.add(keys, matrix)
    # Without its stamp the index is never used and the next sync rebuilds it whole: a crash
    # between the three writes below cannot leave an index and a key list that disagree.
    meta_path.unlink(missing_ok=True)
    tmp = index_path.with_name(f".{index_path.name}.{os.getpid()}.tmp")
    try:
        index.save(str(tmp))
        os.replace(tmp, index_path)
    finally:
        tmp.unlink(missing_ok=True)
    _save_npy(keys_path, np.stack([ids.astype(np.uint64), fingerprints], axis=1))
    write_stamp(meta_path, {**settings, "sync_serial": serial, "size": int(ids.size)})
    return {"removed": len(stale), "added": int(fresh.size), "size": int(ids.size)}


def read_rows(vectors: VectorMatrix, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """The given rows of the matrix, read from the snapshot file without mapping them.

    ANN rescoring reads a few hundred scattered rows per query. Through the mapping, each one
    also maps the cached pages around it (the kernel's fault-around), so a long-running server's
    resident memory would grow toward the whole snapshot; ``pread`` leaves them in the page
    cache, shared and reclaimable, and costs ~1 ms per query.
    """
    matrix = vectors.matrix
    filename = getattr(matrix, "filename", None)
    if not isinstance(matrix, np.memmap) or filename is None:
        return np.asarray(matrix[rows], dtype=np.float32)
    width = matrix.shape[1] * 4
    out = np.empty((rows.size, matrix.shape[1]), dtype=np.float32)
    try:
        fd = os.open(filename, os.O_RDONLY)
    except OSError:  # replaced by a newer snapshot and deleted: the mapping still has it
        return np.asarray(matrix[rows], dtype=np.float32)
    try:
        for i, row in enumerate(rows.tolist()):
            out[i] = np.frombuffer(os.pread(fd, width, matrix.offset + row * width), np.float32)
    finally:
        os.close(fd)
    return out


def load_ann(root: Path, store: Store, config: ScaleConfig) -> AnnIndex | None:
    """The KB's ANN index, memory-mapped, if it exists and is current; else ``None``."""
    index_path, meta_path, _ = _ann_paths(root)
    if config.ann_min_chunks <= 0 or not index_path.exists():
        return None
    meta = read_stamp(meta_path)
    if meta is None or meta.get("sync_serial") != store.get_meta("sync_serial"):
        return None
    try:
        index = _usearch().restore(str(index_path), view=True)
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("Pinakes: ANN index unreadable (%s); searching exactly.", exc)
        return None
    if index is None:
        return None
    return AnnIndex(index, config.ann_expansion_search)
