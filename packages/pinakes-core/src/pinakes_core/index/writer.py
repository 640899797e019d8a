"""Writing a sync's prepared documents into the store, embedding only new chunk texts (DESIGN §4).

:class:`Writer` embeds the chunk texts whose hash has no vector yet, in groups of about
:data:`GROUP_CHUNKS` new chunks, and writes each document in its own transaction through the
store contract (:mod:`pinakes_core.index.backend`; vectors through ``Store.put_vectors``,
which the PostgreSQL store has too), so a sync killed at any instant leaves every
document either fully old or fully new. It also removes gone documents and fills in vectors a
model change or an interrupted sync left missing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pinakes_core.index.backend import ChunkRecord, DocumentRecord, LinkRecord, content_of
from pinakes_core.index.preparation import Plan, Prepared, drop_skeleton
from pinakes_core.index.query import split_cjk
from pinakes_core.index.store import Store
from pinakes_core.read import meta

__all__ = ["GROUP_CHUNKS", "DocumentEmbedder", "Writer", "stored_embed_text"]

#: Documents are embedded and written in groups of about this many new chunks: large enough
#: for length-sorted batching to pay off, small enough that a crash loses little work.
GROUP_CHUNKS = 512


class DocumentEmbedder(Protocol):
    """What a sync embeds with: :class:`~pinakes_core.index.embedding.Embedder` or a test's fake."""

    model_id: str
    dim: int

    def embed_documents(
        self, texts: list[str], progress: Callable[[int], None] | None = None
    ) -> Any:
        """One vector per text."""
        ...


def _record(p: Prepared) -> DocumentRecord:
    """A prepared document as the store contract takes it."""
    return DocumentRecord(
        doc_id=p.doc_id,
        path=p.entry.rel,
        title=p.title,
        content_hash=p.content_hash,
        mtime_ns=p.entry.mtime_ns,
        size=p.entry.size,
        tags=tuple(p.tags),
        aliases=tuple(p.aliases),
        source_type=p.source_type,
        meta=meta.summary(p.fields),
        fields=tuple(meta.flatten(p.fields)),
        chunks=tuple(
            ChunkRecord(
                ordinal=chunk.ordinal,
                heading_path=tuple(chunk.heading_path),
                text=chunk.text,
                embed_hash=h,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                tokens=chunk.tokens,
                idents=idents,
                page_start=chunk.page_start,
                page_end=chunk.page_end,
            )
            for chunk, h, idents in zip(p.chunks, p.embed_hashes, _idents(p), strict=True)
        ),
        links=tuple(LinkRecord(*row) for row in p.links),
        sidecar_hash=p.sidecar_hash,
        sidecar_mtime_ns=p.entry.sidecar_mtime_ns,
        sidecar_size=p.entry.sidecar_size,
        pages=tuple(p.pdf.page_lines) if p.pdf is not None else None,
        line_count=p.pdf.text.count("\n") + 1 if p.pdf is not None else None,
        file_named=p.file_named,
    )


def _idents(p: Prepared) -> list[str]:
    """Each chunk's identifier words; a title that is only a file name joins the first's."""
    idents = list(p.idents)
    if p.file_named and idents:
        idents[0] = f"{idents[0]}\n{split_cjk(p.title)}".strip()
    return idents


class Writer:
    """Embeds and writes one sync's documents; counts what it embedded and reused.

    Args:
        root: the KB root (a gone document's skeleton sidecar is removed there).
        store: the store being synced.
        embedder_factory: returns the embedder; called only if something needs embedding.
        progress: ``progress(stage, done, total)``; the ``"embed"`` stage.
    """

    def __init__(
        self,
        root: Path,
        store: Store,
        embedder_factory: Callable[[], DocumentEmbedder],
        progress: Callable[[str, int, int], None],
    ) -> None:
        self.root = root
        self.store = store
        #: the store contract (pinakes_core.index.backend) that documents are written through.
        self.backend = content_of(store)
        self.embedder_factory = embedder_factory
        self._embedder: DocumentEmbedder | None = None
        self.progress = progress
        self.embedded = 0
        self.reused = 0
        self.embed_seconds = 0.0
        #: Ids of documents a written document replaced at its path (it took another id).
        self.displaced: list[str] = []

    @property
    def embedder(self) -> DocumentEmbedder:
        """The embedder, made on first use."""
        if self._embedder is None:
            self._embedder = self.embedder_factory()
        return self._embedder

    def _known_hashes(self, hashes: set[str]) -> set[str]:
        known: set[str] = set()
        items = list(hashes)
        for i in range(0, len(items), 500):
            part = items[i : i + 500]
            marks = ",".join("?" * len(part))
            known.update(
                r[0]
                for r in self.store.conn.execute(
                    f"SELECT embed_hash FROM vectors WHERE embed_hash IN ({marks})", part
                )
            )
        return known

    def _embed(self, texts: dict[str, str], total: int) -> dict[str, bytes]:
        if not texts:
            return {}
        hashes = list(texts)
        embedder = self.embedder  # load the model outside the timed section
        start = time.perf_counter()
        done = self.embedded

        def tick(n: int) -> None:
            nonlocal done
            done += n
            self.progress("embed", done, total)

        vectors = embedder.embed_documents([texts[h] for h in hashes], progress=tick)
        self.embed_seconds += time.perf_counter() - start
        self.embedded += len(hashes)
        return {h: np.asarray(vectors[i], dtype=np.float32).tobytes() for i, h in enumerate(hashes)}

    def write(self, plan: Plan) -> None:
        """Write every prepared document: the changed ones in groups, the touched ones' stat."""
        pending = [p for p in plan.prepared if p.kind != "touched"]
        all_hashes = {h for p in pending for h in p.embed_hashes}
        known = self._known_hashes(all_hashes)
        total_new = len(all_hashes - known)
        self.reused = sum(1 for p in pending for h in p.embed_hashes if h in known)
        group: list[Prepared] = []
        size = 0
        for prepared in plan.prepared:
            if prepared.kind == "touched":
                self._touch(prepared)
                continue
            group.append(prepared)
            size += sum(1 for h in prepared.embed_hashes if h not in known)
            if size >= GROUP_CHUNKS:
                self._write_group(group, known, total_new)
                group, size = [], 0
        if group:
            self._write_group(group, known, total_new)

    def _touch(self, p: Prepared) -> None:
        row = self.store.conn.execute(
            "SELECT mtime_ns, size, sidecar_mtime_ns, sidecar_size FROM documents WHERE doc_id = ?",
            (p.doc_id,),
        ).fetchone()
        if row is not None and tuple(row) == p.entry.stamp:
            return  # racily clean and unchanged: nothing to write, no generation to bump
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE documents SET mtime_ns = ?, size = ?, sidecar_mtime_ns = ?, sidecar_size = ? WHERE doc_id = ?",
                (
                    p.entry.mtime_ns,
                    p.entry.size,
                    p.entry.sidecar_mtime_ns,
                    p.entry.sidecar_size,
                    p.doc_id,
                ),
            )

    def _write_group(self, group: list[Prepared], known: set[str], total_new: int) -> None:
        todo: dict[str, str] = {}
        for p in group:
            for h, t in zip(p.embed_hashes, p.embed_texts, strict=True):
                if h not in known:
                    todo.setdefault(h, t)
        fresh = self._embed(todo, total_new)
        known.update(fresh)
        for p in group:
            self._write_document(p, fresh)

    def _write_document(self, p: Prepared, fresh: dict[str, bytes]) -> None:
        with self.store.transaction() as conn:
            # The document's old row (by id or by path) goes, with its chunks, tags and links.
            # An old row of another id at this path is a removed document for the after-write
            # consumers (the BM25 index, plugins): nothing else names its id any more.
            self.displaced.extend(
                r[0]
                for r in conn.execute(
                    "SELECT doc_id FROM documents WHERE path = ? AND doc_id != ?",
                    (p.entry.rel, p.doc_id),
                )
            )
            self.backend.put_document(conn, _record(p))
            self.store.put_vectors(
                conn,
                {
                    h: np.frombuffer(fresh[h], dtype=np.float32)
                    for h in dict.fromkeys(p.embed_hashes)
                    if h in fresh
                },
            )
            # Targets are resolved for the whole KB at the end of the sync (resolve_all). The
            # mark that a resolution is due commits with the document, so a sync killed before
            # resolving leaves it for the next one (which may find nothing else changed).
            self.store.set_meta(conn, "links_resolved", "0")
            if fresh:
                self.store.set_meta(conn, "dim", str(self.embedder.dim))

    def remove(self, missing: dict[str, Any]) -> list[tuple[str, str]]:
        """Delete documents whose files are gone; returns ``(path, doc_id)`` pairs."""
        removed = []
        for path, row in sorted(missing.items()):
            with self.store.transaction() as conn:
                self.backend.delete_document(conn, row["doc_id"])
                self.store.set_meta(conn, "links_resolved", "0")
            drop_skeleton(self.root, path, row["doc_id"])
            removed.append((path, row["doc_id"]))
        return removed

    def fill_missing_vectors(self) -> None:
        """Embed chunks that have no vector (after a model change or an interrupted sync)."""
        rows = self.store.conn.execute(
            "SELECT DISTINCT c.embed_hash, d.title, c.heading_path, c.text, c.ordinal, c.start_line, "
            "c.end_line, c.tokens FROM chunks c JOIN documents d USING (doc_id) "
            "LEFT JOIN vectors v ON v.embed_hash = c.embed_hash WHERE v.embed_hash IS NULL"
        ).fetchall()
        todo: dict[str, str] = {}
        for r in rows:
            todo.setdefault(r["embed_hash"], stored_embed_text(r))
        items = list(todo.items())
        for i in range(0, len(items), GROUP_CHUNKS * 4):
            part = dict(items[i : i + GROUP_CHUNKS * 4])
            fresh = self._embed(part, len(items))
            with self.store.transaction() as conn:
                self.store.put_vectors(
                    conn, {h: np.frombuffer(v, dtype=np.float32) for h, v in fresh.items()}
                )
                self.store.set_meta(conn, "dim", str(self.embedder.dim))


def stored_embed_text(row: Mapping[str, Any]) -> str:
    """Return the embedded text of a stored chunk row, exactly as sync embedded it.

    The row needs ``title``, ``heading_path``, ``text``, ``ordinal``, ``start_line``,
    ``end_line`` and ``tokens``.
    """
    from pinakes_core.index.chunking import embed_text
    from pinakes_core.index.packer import Chunk

    chunk = Chunk(
        row["ordinal"],
        tuple(json.loads(row["heading_path"])),
        row["text"],
        row["start_line"],
        row["end_line"],
        row["tokens"],
    )
    return embed_text(row["title"], chunk)
