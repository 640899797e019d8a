"""Incremental, hash-diffed, crash-safe sync of a KB folder into its store (DESIGN §4, §13).

A file whose stat (and its sidecar's) is unchanged costs one ``stat`` and no read. A changed
file is re-read and, if its bytes really changed, re-chunked; only chunk texts whose hash has no
vector yet are embedded. Each document is written in its own transaction, so a sync killed at
any instant leaves every document either fully old or fully new, and the next sync finishes the
job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from pinakes_core.config import Config
from pinakes_core.derived import store_dir
from pinakes_core.errors import PinakesError, SidecarError, UnsafeFileError
from pinakes_core.index.backend import ChunkRecord, DocumentRecord, LinkRecord, SqliteBackend
from pinakes_core.index.lock import sync_lock
from pinakes_core.index.query import split_cjk, symbol_words
from pinakes_core.index.store import Store
from pinakes_core.index.tokens import TokenCounter, token_counter
from pinakes_core.intake import MAX_YAML_BYTES, clip, normal_tag, read_limited
from pinakes_core.models import RenamedPath, RepeatedId, SkippedFile, SyncReport
from pinakes_core.read import meta
from pinakes_core.read.code import Section, code_sections, identifier_terms
from pinakes_core.read.documents import (
    FileEntry,
    Frontmatter,
    Skip,
    decode,
    name_title,
    not_included_hint,
    parse_frontmatter,
    scan,
)
from pinakes_core.read.extraction import (
    CACHE_DIR,
    Extraction,
    ExtractionError,
    Extractor,
    PdfLimits,
)
from pinakes_core.read.forge import repository_pages
from pinakes_core.read.identity import (
    fresh_id,
    holds_only_id,
    needs_sidecar,
    repeated_ids_warning,
    stand_in_id,
)
from pinakes_core.read.markup import is_placeholder
from pinakes_core.read.mdx import is_mdx, markdown_of
from pinakes_core.read.sidecar import (
    SIDECAR_SUFFIX,
    LinkSpec,
    Sidecar,
    read_sidecar,
    remove_leftover,
    sidecar_path,
    write_skeleton,
)
from pinakes_core.read.sources import PdfText, pdf_text
from pinakes_core.uri import new_ulid

if TYPE_CHECKING:
    from pinakes_core.index.chunking import Chunk


# Chunking and link extraction (markdown-it) load only when a document changed (issue 14).

__all__ = ["ProgressFn", "model_id_for", "run_sync", "stored_embed_text"]

log = logging.getLogger(__name__)

#: ``progress(stage, done, total)``; core's stages are "read", "embed" and "links", plugins add
#: their own through the ``after_sync`` hook (the graph plugin: "graph", "graph links",
#: "labels"). ``total`` 0 means the length is unknown.
ProgressFn = Callable[[str, int, int], None]

#: Longest title stored (longer ones are cut with "…"); titles are shown in every hit.
MAX_TITLE_CHARS = 300
#: Most tags, and most aliases, kept per document, and the longest of each.
MAX_ITEMS = 256
MAX_ITEM_CHARS = 200
#: Most links (authored and found in the text) kept per document.
MAX_LINKS = 5_000
MAX_TARGET_CHARS = 2_000
#: Bump whenever what sync reads from a document changes — what a chunk's full-text row holds,
#: what counts as a tag: a store read by another version re-reads every document at the next
#: sync, reusing every vector (:func:`reading_id`). 2: the title column holds the document's
#: aliases too (issue 9), so ``aliases: [INC-2025-036]`` finds the note. 3: ``#tags`` in the
#: text are tags. 4: runs of Chinese, Japanese and Korean characters are indexed as bigrams
#: (:func:`~pinakes_core.index.query.split_cjk`), and ``.mdx`` files are read as MDX (a KB that
#: included them read them as plain text). 5: a frontmatter description is a chunk of its own
#: (:func:`~pinakes_core.index.chunking.with_description`); a folder page with no title of its own
#: (``_index.md``, ``README.md``) is named by its folder; TOML frontmatter may follow blank
#: lines (its ``title =`` lines were body text). 6: site-generator markup holds no tags
#: (``{: #v4-4-1}``), a hex colour after a colour property or in quotes is no tag, a folder
#: page's title drops the folder's leading underscores, and a ``.md`` file that imports a
#: module is read as MDX. 7: a wikilink to a picture, recording or archive (``[[shot.png]]``)
#: and a templated wikilink (``[[<% tp.date.now() %>]]``, ``[[{{date}}]]``) are no document
#: links, as for Markdown links (the re-read replaces each document's stored links). 8: a title
#: or first heading that is only a template placeholder (``# {{title}}``, ``<% tp.file.title %>``)
#: names nothing: a template note is named by the next source, its file name at the latest.
#: 9: operators standing alone (``=~``, ``&&``) are index words in the ``idents`` column
#: (:func:`~pinakes_core.index.query.symbol_words`). 10: a MyST ``{doc}`` role
#: (``{doc}`intro/setup```) is a link to that document. 11: a PDF's or text file's title that
#: is only its file name is running text of its first chunk, not every chunk's title
#: (:data:`FILE_NAMED_TYPES`).
FTS_ROWS = "11"
#: Source types whose title, when only their file name gives one, is indexed as running text of
#: the first chunk instead of the title of every chunk (issue 35): ``latency-budget.pdf``'s 40
#: pages each held "budget" at title weight, outranking notes whose text uses the word, and made
#: it so common that its IDF, and every note's evidence for it, fell to nothing. A Markdown
#: note's file name is its name (Obsidian shows it as the title), and a code file's names its
#: module: both stay titles. The document keeps the title everywhere else (hits, names).
FILE_NAMED_TYPES = frozenset({"pdf", "text"})


def reading_id(config: Config, pages: tuple[tuple[str, str], ...] = ()) -> str:
    """The store's record of how documents were read: :data:`FTS_ROWS` and ``[frontmatter]``.

    A change of either (``inline_tags = false``, a ``tags`` key added) re-reads every document
    at the next sync, as a new chunker does, instead of only the documents that change later.
    So does a change of the KB's own forge addresses (``pages``, :func:`repository_pages`: a
    remote added), which decide which links in the text are links to its documents.
    """
    settings = json.dumps(config.frontmatter.model_dump(), sort_keys=True)
    if pages:
        settings += json.dumps(pages)
    return f"{FTS_ROWS}:{_hash(settings.encode('utf-8'))[:12]}"


# Documents are embedded and written in groups of about this many new chunks: large enough
# for length-sorted batching to pay off, small enough that a crash loses little work.
_GROUP_CHUNKS = 512
#: A sidecar's top-level ``id:`` line, read without YAML to find disputed ids before the
#: sidecars are parsed (an id written another way is simply not seen here).
_SIDECAR_ID = re.compile(rb"(?m)^id:[ \t]*[\"']?([0-9A-Za-z]{26})[\"']?[ \t]*(?:#.*)?\r?$")


class _Embedder(Protocol):
    model_id: str
    dim: int

    def embed_documents(
        self, texts: list[str], progress: Callable[[int], None] | None = None
    ) -> Any: ...


@dataclass
class _Prepared:
    entry: FileEntry
    doc_id: str
    title: str
    tags: list[str]
    aliases: list[str]
    links: list[tuple[str, str, str, str]]  # (target, kind, rel, origin)
    content_hash: str
    sidecar_hash: str | None
    chunks: list[Chunk]
    embed_texts: list[str]
    embed_hashes: list[str]
    kind: str  # "added", "changed", "renamed", "touched"
    old_path: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # frontmatter, for doc_meta
    source_type: str = "markdown"
    idents: list[str] = field(default_factory=list)  # per chunk: operators, code identifiers
    pdf: PdfText | None = None
    file_named: bool = False  # the title is only the file name (FILE_NAMED_TYPES)


@dataclass
class _Plan:
    prepared: list[_Prepared] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Documents whose frontmatter id another holds: one warning for all (repeated_ids_warning).
    repeated_ids: list[RepeatedId] = field(default_factory=list)


def _record(p: _Prepared) -> DocumentRecord:
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


def _idents(p: _Prepared) -> list[str]:
    """Each chunk's identifier words; a title that is only a file name joins the first's."""
    idents = list(p.idents)
    if p.file_named and idents:
        idents[0] = f"{idents[0]}\n{split_cjk(p.title)}".strip()
    return idents


def _hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def model_id_for(config: Config) -> str:
    """Return the model id a sync with ``config`` records, without loading the model."""
    from pinakes_core.config import DEFAULT_MODEL
    from pinakes_core.index.embedding import assemble_default_model

    if config.embedding.model == DEFAULT_MODEL:
        return assemble_default_model()[1]
    return config.embedding.model


def _norm_tags(*groups: tuple[str, ...]) -> list[str]:
    seen: dict[str, None] = {}
    for group in groups:
        for tag in group:
            clean = normal_tag(tag)
            if clean:
                seen.setdefault(clean, None)
    return list(seen)


def _unique(*groups: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(v for g in groups for v in g if v))


def _clip_title(title: str) -> str:
    return clip(" ".join(title.split()), MAX_TITLE_CHARS)


def _named(title: str | None) -> str | None:
    """``title``, or None when it is only a template placeholder (``# {{title}}``).

    A template names nothing: a note is named when it is made from it (Obsidian's Templates
    plugin, Templater's ``<% tp.file.title %>``).
    """
    return None if title is None or is_placeholder(title) else title


_T = TypeVar("_T")


def _bounded(items: list[_T], what: str, rel: str, plan: _Plan) -> list[_T]:
    """Keep at most :data:`MAX_ITEMS` of a document's tags, aliases or links (with a warning)."""
    limit = MAX_LINKS if what == "links" else MAX_ITEMS
    if len(items) > limit:
        plan.warnings.append(
            f"{rel}: only the first {limit} of its {len(items)} {what} are indexed"
        )
        items = items[:limit]
    if what == "links":
        # A link target longer than this is not a reference anyone wrote (a pasted blob).
        kept = [row for row in items if len(str(row[0])) <= MAX_TARGET_CHARS]  # type: ignore[index]
        if len(kept) < len(items):
            plan.warnings.append(
                f"{rel}: {len(items) - len(kept)} link target(s) over {MAX_TARGET_CHARS} characters were left out"
            )
        return kept
    return [clip(str(item), MAX_ITEM_CHARS) for item in items]  # type: ignore[misc]


class _Syncer:
    def __init__(
        self,
        root: Path,
        config: Config,
        store: Store,
        embedder_factory: Callable[[], _Embedder],
        progress: ProgressFn | None,
        history: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.real_root = root.resolve()
        #: doc id -> path in the generation a rebuild replaces: who held an id first.
        self.history = history or {}
        self.pages = repository_pages(root)  # the KB's own files' forge addresses
        self.max_bytes = int(config.sync.max_file_mb * 1024 * 1024)
        self.config = config
        self.store = store
        #: the store contract (pinakes_core.index.backend) that documents are written through.
        self.backend = SqliteBackend(store)
        self.embedder_factory = embedder_factory
        self._embedder: _Embedder | None = None
        self.progress = progress or (lambda stage, done, total: None)
        # Chunked by another chunker version or budget, or read by other rules (FTS_ROWS,
        # [frontmatter]): every document is re-chunked and re-indexed (vectors of unchanged chunk
        # texts are reused by hash).
        from pinakes_core.index.chunking import chunking_id

        self.chunking = chunking_id(config.sync.chunk_tokens)
        self.reading = reading_id(config, self.pages)
        self.rechunk = (
            store.get_meta("chunking") != self.chunking
            or store.get_meta("fts_rows") != self.reading
        )
        self.embedded = 0
        self.reused = 0
        self.embed_seconds = 0.0
        #: Ids of documents a written document replaced at its path (it took another id).
        self.displaced: list[str] = []
        self._extractor: Extractor | None = None

    @property
    def count(self) -> TokenCounter:
        """The chunker's token counter (its tokenizer loads at the first changed document)."""
        return token_counter()

    @property
    def extractor(self) -> Extractor:
        """The PDF extractor (cache + worker process), made on first use."""
        if self._extractor is None:
            pdf = self.config.pdf
            self._extractor = Extractor(
                store_dir(self.root),
                PdfLimits(pdf.max_pages, pdf.max_seconds, pdf.max_memory_mb),
            )
        return self._extractor

    def close(self) -> None:
        """End the PDF worker process, if one was started."""
        if self._extractor is not None:
            self._extractor.close()

    def collect_cache(self) -> None:
        """Drop extraction-cache entries of PDFs that are neither indexed nor seen this sync."""
        if not (store_dir(self.root) / CACHE_DIR).is_dir():
            return
        keep = {
            str(r[0])
            for r in self.store.conn.execute(
                "SELECT content_hash FROM documents WHERE source_type = 'pdf'"
            )
        }
        removed = self.extractor.collect(keep | self.extractor.seen)
        if removed:
            log.info("Pinakes: removed %d stale extraction-cache entries.", removed)

    @property
    def embedder(self) -> _Embedder:
        if self._embedder is None:
            self._embedder = self.embedder_factory()
        return self._embedder

    # -- planning -------------------------------------------------------------------------

    def _read(
        self, entry: FileEntry, plan: _Plan
    ) -> tuple[str, bytes, Sidecar | None, bytes | None] | None:
        try:
            data = read_limited(
                entry.path, limit=self.max_bytes, root=self.real_root, name=entry.rel
            )
        except UnsafeFileError as exc:
            plan.skips.append(Skip(entry.rel, exc.message))
            return None
        except OSError as exc:
            plan.skips.append(Skip(entry.rel, f"file cannot be read ({exc.strerror})"))
            return None
        text = ""
        if entry.source_type != "pdf":  # a PDF is binary; its text comes from the extractor
            if b"\x00" in data:
                # Windows Notepad's "Unicode" is UTF-16: text, but not what Pinakes reads.
                utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
                plan.skips.append(
                    Skip(
                        entry.rel,
                        "file is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                        "save it as UTF-8 to index it"
                        if utf16
                        else "file looks binary (it contains NUL bytes)",
                    )
                )
                return None
            text, lossy = decode(data)
            if lossy:
                plan.warnings.append(f"{entry.rel}: invalid UTF-8 was replaced with U+FFFD")
        sidecar: Sidecar | None = None
        side_bytes: bytes | None = None
        if entry.sidecar_mtime_ns is not None:
            try:
                side_bytes = self._sidecar_bytes(entry)
                sidecar = read_sidecar(entry.sidecar, side_bytes)
            except (SidecarError, UnsafeFileError) as exc:
                plan.skips.append(Skip(entry.rel, str(exc)))
                return None
            except OSError as exc:
                plan.skips.append(Skip(entry.rel, f"sidecar cannot be read ({exc.strerror})"))
                return None
        return text, data, sidecar, side_bytes

    def _sidecar_bytes(self, entry: FileEntry) -> bytes:
        """The sidecar's bytes, read as untrusted input: inside the KB, regular, at most 256 KB."""
        return read_limited(
            entry.sidecar,
            limit=MAX_YAML_BYTES,
            root=self.real_root,
            name=f"sidecar {entry.rel}{SIDECAR_SUFFIX}",
        )

    def plan(
        self, entries: list[FileEntry], racy: int | None = None
    ) -> tuple[_Plan, dict[str, Any], int]:
        """Read what changed; a file whose stat is unchanged is skipped unless it is racy.

        ``racy`` (:func:`racy_cutoff`): a file or sidecar modified at or after it is read and
        hashed even when its mtime and size are as stored.
        """
        conn = self.store.conn
        # The stat columns alone first: with nothing changed and nothing gone, no more is read
        # (every row's every column cost ~1 s at 135k documents; issue 14).
        cursor = conn.cursor()
        cursor.row_factory = None  # plain tuples: a Row per document cost more than the query
        stats = {
            r[0]: (r[1], (r[2], r[3], r[4], r[5]))
            for r in cursor.execute(
                "SELECT path, doc_id, mtime_ns, size, sidecar_mtime_ns, sidecar_size FROM documents"
            )
        }
        plan = _Plan()
        claimed: dict[str, str] = {}  # doc_id -> path, for duplicate detection
        unchanged = 0
        candidates: list[FileEntry] = []
        for entry in entries:
            known = stats.get(entry.rel)
            if (
                known is not None
                and not self.rechunk
                and known[1] == entry.stamp
                and not is_racy(entry, racy)
            ):
                claimed[known[0]] = entry.rel
                unchanged += 1
                continue
            candidates.append(entry)
        if not candidates and unchanged == len(stats):
            return plan, {}, unchanged
        rows = {r["path"]: r for r in conn.execute("SELECT * FROM documents")}
        by_id = {r["doc_id"]: r for r in rows.values()}
        present = {e.rel for e in entries}
        missing = {p: r for p, r in rows.items() if p not in present}
        missing_by_hash = {r["content_hash"]: r for r in missing.values()}
        # Sidecar ids first (a note that moved with its sidecar keeps its id even when a new
        # note took its old path), and of those the files already in the store at their own
        # path, so a copied sidecar is the one reported as the duplicate.
        sidecar_ids = self._sidecar_ids(candidates)

        def holds(entry: FileEntry) -> bool:
            """Whether the entry's sidecar names the id the index gave its own path."""
            sid = sidecar_ids.get(entry.rel)
            row = rows.get(entry.rel)
            return sid is not None and (
                (row is not None and row["doc_id"] == sid) or self.history.get(sid) == entry.rel
            )

        held = set(rows) | set(self.history.values())
        candidates.sort(
            key=lambda e: (e.sidecar_size is None, not holds(e), e.rel not in held, e.rel)
        )
        disputed = self._disputed(sidecar_ids, by_id, claimed, plan)
        for done, entry in enumerate(candidates, 1):
            self.progress("read", done, len(candidates))
            prepared = self._prepare(
                entry, rows, by_id, missing, missing_by_hash, claimed, plan, disputed
            )
            if prepared is not None:
                plan.prepared.append(prepared)
        if plan.repeated_ids:
            plan.warnings.append(repeated_ids_warning(plan.repeated_ids))
        return plan, missing, unchanged

    def _sidecar_ids(self, candidates: list[FileEntry]) -> dict[str, str]:
        """The id each candidate's sidecar names (path -> id), read without YAML.

        Read as sync reads sidecars (never blocking on a FIFO, never through a link out of the
        KB); an id written another way is simply not seen here.
        """
        ids: dict[str, str] = {}
        for entry in candidates:
            if entry.sidecar_size is None:
                continue
            try:
                head = read_limited(entry.sidecar, limit=MAX_YAML_BYTES, root=self.real_root)
            except (OSError, UnsafeFileError):
                continue
            found = _SIDECAR_ID.search(head)
            if found is not None:
                ids[entry.rel] = found[1].decode().upper()
        return ids

    def _disputed(
        self,
        sidecar_ids: dict[str, str],
        by_id: dict[str, Any],
        claimed: dict[str, str],
        plan: _Plan,
    ) -> set[str]:
        """Ids several sidecars claim with nothing to say whose each is (issue 34).

        The store's row decides who holds an id (on a rebuild, the replaced generation's row),
        and its holder is read first; where neither knows it (a fresh clone), path order must
        not: every claimant is indexed under a stand-in id, and a warning asks the user to
        choose.
        """
        seen: defaultdict[str, list[str]] = defaultdict(list)
        for rel, doc_id in sidecar_ids.items():
            seen[doc_id].append(rel)
        disputed = {
            doc_id
            for doc_id, paths in seen.items()
            if len(paths) > 1
            and doc_id not in by_id
            and doc_id not in self.history
            and doc_id not in claimed
        }
        for doc_id in sorted(disputed):
            shown = ", ".join(seen[doc_id][:3])
            plan.warnings.append(
                f"the sidecars of {shown} all claim the id {doc_id}, and no index says which "
                "had it first; each is indexed under a stand-in id until you keep the id in one "
                "sidecar and give the others a new one (`pnk doctor` lists them)"
            )
        return disputed

    def _prepare(
        self,
        entry: FileEntry,
        rows: dict[str, Any],
        by_id: dict[str, Any],
        missing: dict[str, Any],
        missing_by_hash: dict[str, Any],
        claimed: dict[str, str],
        plan: _Plan,
        disputed: set[str],
    ) -> _Prepared | None:
        from pinakes_core.index.chunking import (
            bound_chunks,
            embed_text,
            first_heading,
            with_description,
        )

        read = self._read(entry, plan)
        if read is None:
            return None
        text, data, sidecar, side_bytes = read
        if entry.is_markdown and is_mdx(entry.rel, text):
            text = markdown_of(text)  # the Markdown between the components, line for line
        lines = text.split("\n")
        front = parse_frontmatter(
            entry.rel, lines if entry.is_markdown else [], self.config.frontmatter
        )
        if front.warning:
            plan.warnings.append(front.warning)
        content_hash = _hash(data)
        sidecar_hash = _hash(side_bytes) if side_bytes is not None else None
        row = rows.get(entry.rel)
        extraction: Extraction | None = None
        if entry.source_type == "pdf" and not (
            row is not None
            and row["content_hash"] == content_hash
            and row["sidecar_hash"] == sidecar_hash
        ):
            # Before any sidecar is written: a PDF that yields no text is not a document.
            extraction = self._extract(entry, content_hash, data, row, missing, plan)
            if extraction is None:
                return None
        kind = "changed" if row is not None else "added"
        old_path: str | None = None
        doc_id = sidecar.id if sidecar is not None else None
        if doc_id in disputed:  # nobody's until the user says whose: a stand-in meanwhile
            doc_id = stand_in_id(self.config.kb.id, entry.rel, front.id)
            claimed[doc_id] = entry.rel
        elif doc_id is not None:
            other = claimed.get(doc_id)
            if other is not None and other != entry.rel:
                if row is not None:
                    missing[entry.rel] = row  # the document is left out: drop its old version
                plan.skips.append(
                    Skip(
                        entry.rel,
                        f"{entry.sidecar.name} repeats id {doc_id} already used by {other} "
                        "(a copied sidecar); run `pnk doctor --fix` to give this copy a new id",
                    )
                )
                return None
            owner = by_id.get(doc_id)
            if row is None and owner is not None and owner["path"] in missing:
                kind, old_path = "renamed", owner["path"]
                missing.pop(owner["path"])
            elif row is None and owner is not None and owner["path"] in rows:
                # Moved with its sidecar while a new file took the old path (a daily note
                # rolled over): the id goes with the sidecar, the file at the old path is new.
                kind, old_path = "renamed", owner["path"]
                rows.pop(owner["path"])
            elif row is not None and row["doc_id"] != doc_id:
                kind = "changed"  # the sidecar now names another id: the document takes it
        else:
            doc_id, kind, old_path, entry, sidecar_hash = self._identity(
                entry, row, front, content_hash, by_id, missing, missing_by_hash, claimed, plan
            )
        claimed[doc_id] = entry.rel
        if (
            row is not None
            and not self.rechunk
            and row["content_hash"] == content_hash
            and row["sidecar_hash"] == sidecar_hash
            and row["doc_id"] == doc_id
        ):
            kind = "touched"  # only the stat moved
        if entry.source_type == "pdf" and kind != "touched" and extraction is None:
            extraction = self._extract(entry, content_hash, data, row, missing, plan)
            if extraction is None:
                return None
        pdf = pdf_text(extraction.pages) if extraction is not None else None
        if pdf is not None:
            text = pdf.text
            lines = text.split("\n")
        named = (
            (sidecar.title if sidecar else None)
            or _named(front.title)
            or (
                _named(first_heading("\n".join(lines[front.end_line :])))
                if entry.is_markdown
                else None
            )
            or (extraction.title if extraction is not None else None)
        )
        title = _clip_title(
            named
            or (
                entry.path.name
                if entry.source_type == "code"
                else name_title(entry.path.stem, entry.path.parent.name if "/" in entry.rel else "")
            )
        )
        # Code links come from its sidecar only: brackets in code are not wiki links.
        body = "" if entry.source_type == "code" else "\n".join(lines[front.end_line :])
        chunks: list[Chunk] = []
        if kind != "touched":
            notes: list[str] = []
            chunks = with_description(
                self._chunks(entry, text, front.end_line, pdf, notes),
                front.description,
                front.description_lines,
                title=title,
                budget=self.config.sync.chunk_tokens,
                count=self.count,
            )
            chunks, note = bound_chunks(
                chunks,
                limit=self.config.sync.max_chunks_per_doc,
                budget=self.config.sync.chunk_tokens,
            )
            plan.warnings.extend(f"{entry.rel}: {n}" for n in [*notes, *([note] if note else [])])
        texts = [embed_text(title, c) for c in chunks]
        links, inline_tags = _text_rows(
            front.links, sidecar.links if sidecar else (), body, entry.is_markdown, self.pages
        )
        if not self.config.frontmatter.inline_tags:
            inline_tags = []
        return _Prepared(
            entry=entry,
            doc_id=doc_id,
            title=title,
            tags=_bounded(
                _norm_tags(front.tags, sidecar.tags if sidecar else (), tuple(inline_tags)),
                "tags",
                entry.rel,
                plan,
            ),
            aliases=_bounded(
                _unique(front.aliases, sidecar.aliases if sidecar else ()),
                "aliases",
                entry.rel,
                plan,
            ),
            links=_bounded(links, "links", entry.rel, plan),
            content_hash=content_hash,
            sidecar_hash=sidecar_hash,
            chunks=chunks,
            embed_texts=texts,
            embed_hashes=[_hash(t.encode("utf-8")) for t in texts],
            kind=kind,
            old_path=old_path,
            fields=front.fields,
            source_type=entry.source_type,
            idents=[_index_idents(c.text, code=entry.source_type == "code") for c in chunks],
            pdf=pdf,
            file_named=not named and entry.source_type in FILE_NAMED_TYPES,
        )

    def _chunks(
        self, entry: FileEntry, text: str, skip: int, pdf: PdfText | None, notes: list[str]
    ) -> list[Chunk]:
        """Chunk a document by its source type (Markdown, text, PDF pages, code sections).

        A line is appended to ``notes`` for any text left out to keep the character cap.
        """
        from pinakes_core.index.chunking import (
            chunk_document,
            chunk_sections,
        )

        budget = self.config.sync.chunk_tokens
        if pdf is not None:
            # One section per page: a chunk never spans two pages, so its page is exact.
            pages: list[Section] = [((), start, end) for start, end in pdf.page_spans()]
            chunks = chunk_sections(pdf.text, pages, budget=budget, count=self.count, notes=notes)
            return [
                dataclasses.replace(
                    c, page_start=pdf.page_of(c.start_line), page_end=pdf.page_of(c.end_line)
                )
                for c in chunks
            ]
        if entry.source_type == "code":
            # A class longer than about one chunk's worth of lines is cut at its methods.
            sections = code_sections(text, entry.path.suffix.lower(), large=max(budget // 8, 8))
            return chunk_sections(text, sections, budget=budget, count=self.count, notes=notes)
        return chunk_document(
            text,
            markdown=entry.is_markdown,
            budget=budget,
            count=self.count,
            skip_lines=skip,
            notes=notes,
        )

    def _extract(
        self,
        entry: FileEntry,
        content_hash: str,
        data: bytes,
        row: Any,
        missing: dict[str, Any],
        plan: _Plan,
    ) -> Extraction | None:
        """A PDF's text, or ``None`` with a skip line when it has none (DESIGN §13)."""
        try:
            extraction = self.extractor.extract(content_hash, data)
            reason = _pdf_findings(entry.rel, extraction, plan.warnings)
        except ExtractionError as exc:
            reason = exc.reason
        if reason is not None:
            plan.skips.append(Skip(entry.rel, reason))
            if row is not None:
                missing[entry.rel] = row  # its old version leaves the index with it
            return None
        return extraction

    def _identity(
        self,
        entry: FileEntry,
        row: Any,
        front: Frontmatter,
        content_hash: str,
        by_id: dict[str, Any],
        missing: dict[str, Any],
        missing_by_hash: dict[str, Any],
        claimed: dict[str, str],
        plan: _Plan,
    ) -> tuple[str, str, str | None, FileEntry, str | None]:
        """Identity of a document without a sidecar id, and its sidecar under the policy.

        In order: its frontmatter id, its old id when it moved (same content, old path gone),
        its stored id, a fresh one (see :mod:`pinakes_core.read.identity`). A skeleton sidecar is
        written when ``[sidecars] write`` asks for one. Returns the id, the change kind, the old
        path of a rename, the entry (with the new sidecar's stat) and the sidecar hash.
        """
        kb_id, policy = self.config.kb.id, self.config.sidecar_policy
        kind = "changed" if row is not None else "added"
        old_path: str | None = None
        sidecar_hash: str | None = None
        stand_in = stand_in_id(kb_id, entry.rel, front.id)
        twin = missing_by_hash.get(content_hash) if row is None else None
        other = claimed.get(stand_in)
        if front.id is not None and other is None:
            doc_id = stand_in
        elif twin is not None and twin["path"] in missing:
            # Moved without its sidecar: keep the identity (a sidecar may have to hold it now).
            doc_id = twin["doc_id"]
        elif row is not None and row["doc_id"] not in claimed:
            doc_id = row["doc_id"]
        else:
            doc_id = fresh_id(policy, kb_id, entry.rel) if front.id is None else new_ulid()
        if front.id is not None and other is not None:
            plan.repeated_ids.append(
                RepeatedId(path=entry.rel, frontmatter_id=front.id, also=other, doc_id=doc_id)
            )
        owner = by_id.get(doc_id)
        if owner is not None and owner["path"] != entry.rel and owner["path"] in missing:
            kind, old_path = "renamed", owner["path"]
            missing.pop(owner["path"])
        if needs_sidecar(policy, doc_id, stand_in) and entry.sidecar_size is not None:
            # The user's own sidecar, without an id: Pinakes does not edit it unasked.
            plan.warnings.append(
                f"{entry.rel}: its sidecar has no 'id:', so the id {doc_id} lives only in the "
                f"index and a rebuild gives the document a new one; add 'id: {doc_id}' to "
                f"{entry.rel}{SIDECAR_SUFFIX} to keep it"
            )
        elif needs_sidecar(policy, doc_id, stand_in):
            try:
                write_skeleton(entry.sidecar, doc_id)
                st = entry.sidecar.stat()
                side_bytes = self._sidecar_bytes(entry)
                sidecar_hash = _hash(side_bytes)
                entry = dataclasses.replace(
                    entry, sidecar_mtime_ns=st.st_mtime_ns, sidecar_size=st.st_size
                )
            except (OSError, UnsafeFileError) as exc:
                reason = exc.message if isinstance(exc, UnsafeFileError) else exc.strerror
                plan.warnings.append(
                    f"{entry.rel}: could not write sidecar ({reason or exc}); the id "
                    "lives only in the store until a sidecar can be written"
                )
            else:
                if old_path is not None:
                    _drop_skeleton(self.root, old_path, doc_id)
        return doc_id, kind, old_path, entry, sidecar_hash

    # -- writing --------------------------------------------------------------------------

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

    def write(self, plan: _Plan) -> None:
        pending = [p for p in plan.prepared if p.kind != "touched"]
        all_hashes = {h for p in pending for h in p.embed_hashes}
        known = self._known_hashes(all_hashes)
        total_new = len(all_hashes - known)
        self.reused = sum(1 for p in pending for h in p.embed_hashes if h in known)
        group: list[_Prepared] = []
        size = 0
        for prepared in plan.prepared:
            if prepared.kind == "touched":
                self._touch(prepared)
                continue
            group.append(prepared)
            size += sum(1 for h in prepared.embed_hashes if h not in known)
            if size >= _GROUP_CHUNKS:
                self._write_group(group, known, total_new)
                group, size = [], 0
        if group:
            self._write_group(group, known, total_new)

    def _touch(self, p: _Prepared) -> None:
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

    def _write_group(self, group: list[_Prepared], known: set[str], total_new: int) -> None:
        todo: dict[str, str] = {}
        for p in group:
            for h, t in zip(p.embed_hashes, p.embed_texts, strict=True):
                if h not in known:
                    todo.setdefault(h, t)
        fresh = self._embed(todo, total_new)
        known.update(fresh)
        for p in group:
            self._write_document(p, fresh)

    def _write_document(self, p: _Prepared, fresh: dict[str, bytes]) -> None:
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
            self.backend.put_vectors(
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
            _drop_skeleton(self.root, path, row["doc_id"])
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
        for i in range(0, len(items), _GROUP_CHUNKS * 4):
            part = dict(items[i : i + _GROUP_CHUNKS * 4])
            fresh = self._embed(part, len(items))
            with self.store.transaction() as conn:
                conn.executemany(
                    "INSERT OR IGNORE INTO vectors(embed_hash, vector) VALUES (?, ?)",
                    list(fresh.items()),
                )
                self.store.set_meta(conn, "dim", str(self.embedder.dim))


#: How far before the last sync's start a file's mtime still hides nothing for certain: an
#: edit in the same tick of a coarse clock (FAT keeps 2 s) keeps mtime and size.
RACY_NS = 2_000_000_000


def racy_cutoff(started: str | None) -> int | None:
    """The mtime (ns) from which stat alone cannot tell a file unchanged since the last sync.

    ``started`` is the last sync's ``sync_started`` meta value. A file written in the same
    clock tick as that sync read it can change again without changing its mtime or size
    (git calls such entries "racily clean"); they are re-hashed, as git does.
    """
    return None if started is None else int(float(started) * 1e9) - RACY_NS


def is_racy(entry: FileEntry, cutoff: int | None) -> bool:
    """Whether ``entry`` or its sidecar was modified at or after ``cutoff``."""
    if cutoff is None:
        return False
    return entry.mtime_ns >= cutoff or (entry.sidecar_mtime_ns or 0) >= cutoff


def racy_changed(
    entry: FileEntry, root: Path, limit: int, content_hash: str, sidecar_hash: str | None
) -> bool:
    """Whether a racy ``entry`` differs from the stored hashes (read errors count as changed)."""
    try:
        if _hash(read_limited(entry.path, limit=limit, root=root, name=entry.rel)) != content_hash:
            return True
        if entry.sidecar_mtime_ns is None:
            return sidecar_hash is not None
        side = read_limited(entry.sidecar, limit=MAX_YAML_BYTES, root=root, name=entry.rel)
        return _hash(side) != sidecar_hash
    except (OSError, UnsafeFileError):
        return True


def _keep_unreadable(missing: dict[str, Any], unreadable: list[str]) -> list[str]:
    """Take the documents under folders (or at paths) that could not be read out of ``missing``.

    A folder made unreadable after it was indexed hides its files; they are not known to be
    gone, so they stay indexed as they were (like a file that cannot be read). Returns one
    warning per such folder or file.
    """
    warnings = []
    for place in dict.fromkeys(unreadable):
        kept = [p for p in missing if not place or p == place or p.startswith(f"{place}/")]
        for path in kept:
            del missing[path]
        if kept and kept != [place]:  # a file's own skip line says it already
            some = (
                "its indexed document stays"
                if len(kept) == 1
                else (f"its {len(kept)} indexed documents stay")
            )
            warnings.append(
                f"folder {place or '.'} cannot be read; {some} as indexed until it can be read again"
            )
    return warnings


def _drop_skeleton(root: Path, rel: str, doc_id: str) -> None:
    """Delete the sidecar of the gone document ``rel`` if it holds nothing but ``doc_id``."""
    document = root / rel
    side = sidecar_path(document)
    try:
        os.lstat(document)  # a dangling symlink (an unmounted drive) is not a gone document
        return
    except FileNotFoundError:
        pass
    except OSError:  # the folder cannot be read (any more): leave its files alone
        return
    if holds_only_id(side, doc_id):
        side.unlink(missing_ok=True)
        log.info("Pinakes: removed %s (its document is gone and it held only the id).", side)


def _index_idents(text: str, *, code: bool) -> str:
    """A chunk's ``idents`` column: its operators' index words, and a code file's identifiers."""
    words = " ".join(symbol_words(text))
    return f"{identifier_terms(text)} {words}".strip() if code else words


def stored_embed_text(row: Mapping[str, Any]) -> str:
    """Return the embedded text of a stored chunk row, exactly as sync embedded it.

    The row needs ``title``, ``heading_path``, ``text``, ``ordinal``, ``start_line``,
    ``end_line`` and ``tokens``.
    """
    from pinakes_core.index.chunking import (
        Chunk,
        embed_text,
    )

    chunk = Chunk(
        row["ordinal"],
        tuple(json.loads(row["heading_path"])),
        row["text"],
        row["start_line"],
        row["end_line"],
        row["tokens"],
    )
    return embed_text(row["title"], chunk)


def _pdf_findings(rel: str, extraction: Extraction, warnings: list[str]) -> str | None:
    """Why a PDF yields nothing (the skip reason), else ``None``; partial losses are warnings."""
    read = len(extraction.pages)
    empty = extraction.empty_pages
    if not read:
        return f"no page could be read ({extraction.stop_reason or 'every page failed'})"
    if len(empty) == read:
        return f"no text layer (scanned?); {read} pages skipped"
    if empty:
        warnings.append(
            f"{rel}: no text layer (scanned?) on page(s) {_page_list(empty)}; "
            f"{len(empty)} pages skipped"
        )
    if extraction.failed_pages:
        warnings.append(
            f"{rel}: page(s) {_page_list(extraction.failed_pages)} could not be read and were "
            "skipped"
        )
    if extraction.stopped_at is not None:
        warnings.append(
            f"{rel}: only the first {extraction.stopped_at} of {extraction.page_count} pages "
            f"were indexed ({extraction.stop_reason})"
        )
    return None


def _page_list(pages: list[int], limit: int = 12) -> str:
    """``[3, 4, 5, 9]`` → ``"3-5, 9"`` (at most ``limit`` ranges, then "…")."""
    ranges: list[str] = []
    start = prev = pages[0]
    for page in [*pages[1:], None]:
        if page is not None and page == prev + 1:
            prev = page
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if page is not None:
            start = prev = page
    return ", ".join(ranges[:limit]) + (", …" if len(ranges) > limit else "")


def _text_rows(
    front: tuple[LinkSpec, ...],
    side: tuple[LinkSpec, ...],
    body: str,
    markdown: bool,
    pages: tuple[tuple[str, str], ...] = (),
) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    """One document's link rows and the ``#tags`` in its text, from one parse of the text.

    Authored links come first, then the links written in the text.
    """
    from pinakes_core.read.links import link_kind, read_text

    rows = [(link.to, link_kind(link.to), link.rel, "frontmatter") for link in front]
    rows += [(link.to, link_kind(link.to), link.rel, "sidecar") for link in side]
    seen: set[tuple[str, str]] = set()
    links, tags = read_text(body, markdown=markdown, pages=pages)
    for link in links:
        if (link.target, link.kind) not in seen:
            seen.add((link.target, link.kind))
            rows.append((link.target, link.kind, "links-to", "reverse-scan"))
    return rows, tags


#: The ``links_resolved`` meta value of a store whose links were resolved by today's rules
#: (``"0"``: a resolution is due). Raise it when :mod:`pinakes_core.read.links` resolves a stored
#: target differently, so a store synced before re-resolves at its next sync even if no file
#: changed. 2: same-note wikilinks (``[[#Heading]]``) are no longer dangling, and a dangling
#: ``[[a|b]]`` names both parts. 3: a path that names nothing from the linking folder is tried
#: from the KB root. 4: a folder's ``_index.md`` (Hugo's section page) is its page. 5: Zola's
#: ``@/path.md`` names a page from the KB root or a ``content/`` folder. 6: a file's name
#: (path, stem) wins over another document's title or alias; ``@/`` tries the linking page's
#: own ``content/`` folder first; ``/`` and ``../`` reach the root's folder page. 7: a link to
#: a site address a page declares (Jekyll's ``permalink: /docs/pages/``, Hugo's ``url:``) is a
#: link to that page, a relative one read from the linking page's own declared address. 8: a
#: path to a file (``../../README.md``) is never read as a site address. 9: of a wikilink's two
#: parts the one naming a file wins, the left at equal strength (Obsidian's
#: ``[[Plugins/Templates|Templates]]`` went to another note named by its label), and
#: ``[[#Heading|label]]`` is a place in the same note. 10: a docs site's route by frontmatter
#: ``id`` or ``slug:`` (Docusaurus's ``[x](watch-plugins)``, ``/docs/watch-plugins``) is a link
#: to that page, the one in the linking page's own version folder.
LINKS_RESOLVED = "10"


def resolve_all(conn: sqlite3.Connection, kb_id: str, kb_name: str) -> set[str]:
    """:func:`pinakes_core.read.links.resolve_all`, imported when a sync first needs it.

    A module-level name (tests replace it to stop a sync at this point); markdown-it, which the
    links module loads, is only needed once something changed.
    """
    from pinakes_core.read.links import resolve_all as resolve

    return resolve(conn, kb_id, kb_name)


def _id_history(root: Path) -> dict[str, str]:
    """Doc id -> path in the store a rebuild is about to replace (empty when there is none)."""
    try:
        old = Store.open(root, create=False)
    except (FileNotFoundError, PinakesError, sqlite3.Error):
        return {}
    try:
        return {
            str(r[0]): str(r[1]) for r in old.conn.execute("SELECT doc_id, path FROM documents")
        }
    except sqlite3.Error:
        return {}
    finally:
        old.close()


def run_sync(
    root: Path,
    config: Config,
    embedder_factory: Callable[[], _Embedder],
    *,
    rebuild: bool = False,
    model_id: str | None = None,
    progress: ProgressFn | None = None,
    after_write: Callable[[Store, list[str], list[str], list[str]], None] | None = None,
) -> SyncReport:
    """Bring the store of the KB at ``root`` up to date with its files.

    Args:
        root: the KB root (the folder holding ``pinakes.toml``).
        config: the KB's validated configuration.
        embedder_factory: returns the embedder; called only if something needs embedding.
        rebuild: build a new store from the files beside the current one, and swap it in
            atomically once complete; readers keep answering from the old one until then.
        model_id: the embedder's model id (default: derived from ``config`` without loading the
            model); a change from the stored id re-embeds every chunk.
        progress: optional ``progress(stage, done, total)`` callback.
        after_write: called with the store, the changed and removed doc ids (a removed one may
            be the old id of a document at a path that took another), and the ids of other
            documents whose links resolve differently now, once documents are written and links
            resolved (the plugins' edge-derivation hook runs here).

    Raises:
        LockError: if another sync of this KB is running.
    """
    started = time.perf_counter()
    with sync_lock(store_dir(root, create=True)):
        history = _id_history(root) if rebuild else {}
        store = Store.open(root, rebuild=rebuild)
        racy = racy_cutoff(store.get_meta("sync_started"))  # before this sync's start is set
        syncer: _Syncer | None = None
        syncer_warnings: list[str] = []
        try:
            rebuilt = None
            if store.rebuilt_from is not None:
                rebuilt = f"store schema {store.rebuilt_from} differs from this version's; rebuilt from the files"
                log.warning("Pinakes: %s.", rebuilt)
            elif rebuild:
                rebuilt = "rebuild requested"
            syncer = _Syncer(root, config, store, embedder_factory, progress, history)
            model_id = model_id or model_id_for(config)
            # Whether the last sync ran to its end: if not, chunks may lack vectors.
            finished = float(store.get_meta("last_sync") or -1) >= float(
                store.get_meta("sync_started") or 0
            )
            model_changed = store.get_meta("model_id") != model_id
            if model_changed:
                with store.transaction() as conn:
                    conn.execute("DELETE FROM vectors")
                    store.set_meta(conn, "model_id", model_id)
                    store.set_meta(conn, "kb_id", config.kb.id)
            # Bookkeeping only (no query sees it): no generation bump, so a sync that finds
            # nothing changed leaves every reader's loaded vectors and caches valid (issue 14).
            with store._tx(store.conn):
                conn = store.conn
                store.set_meta(conn, "sync_started", str(time.time()))
                # Every sync gets a serial; plugins compare it to detect syncs they missed.
                serial = int(store.get_meta("sync_serial") or 0) + 1
                store.set_meta(conn, "sync_serial", str(serial))
            leftovers: list[Path] = []
            not_included: Counter[str] = Counter()
            unreadable: list[str] = []
            entries, scan_skips = scan(
                root,
                config.sync,
                leftovers=leftovers,
                not_included=not_included,
                unreadable=unreadable,
            )
            # A KB's first sync says which document files its include leaves out (a Sphinx
            # tree of .rst files would look empty); later syncs leave it to `pnk doctor`.
            hint = not_included_hint(not_included) if store.get_meta("last_sync") is None else None
            if hint is not None:
                syncer_warnings.append(hint)
            syncer_warnings.extend(config.clamped)
            for path in leftovers:
                if remove_leftover(path):
                    log.info("Pinakes: removed %s, left by an interrupted sidecar write.", path)
            plan, missing, unchanged = syncer.plan(entries, racy)
            syncer_warnings.extend(_keep_unreadable(missing, unreadable))
            syncer.close()  # every PDF is read by now: the worker's memory goes back
            syncer.write(plan)
            removed = syncer.remove(missing)
            changed_ids = [p.doc_id for p in plan.prepared if p.kind != "touched"]
            # With the documents whose path another id took (a sidecar's `id:` changed).
            written = set(changed_ids)
            removed_ids = list(
                dict.fromkeys(
                    [doc_id for _, doc_id in removed]
                    + [d for d in syncer.displaced if d not in written]
                )
            )
            # Nothing written, no model change, the last sync finished: no chunk can lack a
            # vector and none went unused, so the two whole-store passes are skipped (issue 14).
            quiet = finished and not (changed_ids or removed_ids or model_changed)
            if not quiet:
                syncer.fill_missing_vectors()
            relinked: set[str] = set()
            if changed_ids or removed_ids or store.get_meta("links_resolved") != LINKS_RESOLVED:
                syncer.progress("links", 0, 0)
                with store.transaction() as conn:
                    relinked = resolve_all(conn, config.kb.id, config.kb.name)
                    store.set_meta(conn, "links_resolved", LINKS_RESOLVED)
                syncer.progress("links", 1, 1)
            if after_write is not None:
                after_write(store, changed_ids, removed_ids, sorted(relinked - set(changed_ids)))
            with store._tx(store.conn):  # invisible to queries: no generation bump
                conn = store.conn
                if not quiet:
                    # Vectors no chunk and no graph label uses any more.
                    conn.execute(
                        "DELETE FROM vectors WHERE embed_hash NOT IN "
                        "(SELECT embed_hash FROM chunks UNION SELECT embed_hash FROM node_vectors)"
                    )
                store.set_meta(conn, "last_sync", str(time.time()))
                # Files read and left out, as they were: status counts them as new only
                # once they change (else a binary .md stays "1 new" after every sync).
                by_rel = {e.rel: e for e in entries}
                skipped = {s.path: by_rel[s.path].stamp for s in plan.skips if s.path in by_rel}
                store.set_meta(conn, "skipped_files", json.dumps(skipped))
                store.set_meta(conn, "chunking", syncer.chunking)
                store.set_meta(conn, "fts_rows", syncer.reading)
            # A rebuild was written beside the store readers use; now it becomes theirs.
            store.publish()
            syncer.collect_cache()
        finally:
            if syncer is not None:
                syncer.close()
            store.close()
    seconds = time.perf_counter() - started
    return SyncReport(
        added=sorted(p.entry.rel for p in plan.prepared if p.kind == "added"),
        changed=sorted(p.entry.rel for p in plan.prepared if p.kind == "changed"),
        removed=[path for path, _ in removed],
        renamed=[
            RenamedPath.model_validate(
                {"doc_id": p.doc_id, "from": p.old_path or "", "to": p.entry.rel}
            )
            for p in plan.prepared
            if p.kind == "renamed"
        ],
        unchanged=unchanged + sum(1 for p in plan.prepared if p.kind == "touched"),
        skipped=[SkippedFile(path=s.path, reason=s.reason) for s in [*scan_skips, *plan.skips]],
        warnings=[*syncer_warnings, *plan.warnings],
        chunks_embedded=syncer.embedded,
        chunks_reused=syncer.reused,
        embed_seconds=round(syncer.embed_seconds, 3),
        chunks_per_second=round(syncer.embedded / syncer.embed_seconds, 1)
        if syncer.embed_seconds > 0
        else None,
        seconds=round(seconds, 3),
        rebuilt=rebuilt,
        pdfs_extracted=syncer._extractor.misses if syncer._extractor is not None else 0,
        pdfs_from_cache=syncer._extractor.hits if syncer._extractor is not None else 0,
        repeated_ids=plan.repeated_ids,
    )
