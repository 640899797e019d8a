"""Reading one new or changed file into a document ready to write (DESIGN §4, §13).

:class:`Preparer` reads a file and its sidecar within limits, parses its frontmatter, decides
its identity (sidecar id, frontmatter id, the id of a moved twin, a fresh one; a skeleton
sidecar where ``[sidecars] write`` asks for one), extracts a PDF's text, chunks it by source
type and collects its tags, aliases and links: a :class:`Prepared` document, collected in a
:class:`Plan` by :func:`pinakes_core.index.sync.run_sync` and written by
:class:`~pinakes_core.index.writer.Writer`.

This module is about 700 lines (issue 37): reading one document is one job whose steps
each depend on the previous one (the id decides whether the PDF is extracted again, the title
the chunks' embedded text), and the constants of what sync reads (:data:`FTS_ROWS`) belong with
the code they describe.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pinakes_core.config import Config
from pinakes_core.derived import store_dir
from pinakes_core.errors import SidecarError, UnsafeFileError
from pinakes_core.index.query import symbol_words
from pinakes_core.index.store import Store
from pinakes_core.index.tokens import TokenCounter, token_counter
from pinakes_core.intake import MAX_YAML_BYTES, clip, normal_tag, read_limited
from pinakes_core.models import RepeatedId
from pinakes_core.read.code import Section, code_sections, identifier_terms
from pinakes_core.read.documents import FileEntry, Skip, decode, name_title
from pinakes_core.read.extraction import (
    CACHE_DIR,
    Extraction,
    ExtractionError,
    Extractor,
    PdfLimits,
    pdf_findings,
)
from pinakes_core.read.forge import repository_pages
from pinakes_core.read.frontmatter import Frontmatter, parse_frontmatter
from pinakes_core.read.identity import (
    fresh_id,
    holds_only_id,
    needs_sidecar,
    stand_in_id,
)
from pinakes_core.read.markup import is_placeholder
from pinakes_core.read.mdx import is_mdx, markdown_of
from pinakes_core.read.sidecar import (
    SIDECAR_SUFFIX,
    LinkSpec,
    Sidecar,
    read_sidecar,
    sidecar_path,
    write_skeleton,
)
from pinakes_core.read.sources import PdfText, pdf_text
from pinakes_core.uri import new_ulid

if TYPE_CHECKING:
    from pinakes_core.index.packer import Chunk

# Chunking and link extraction (markdown-it) load only when a document changed (issue 14).

__all__ = [
    "FILE_NAMED_TYPES",
    "FTS_ROWS",
    "Plan",
    "Prepared",
    "Preparer",
    "digest",
    "drop_skeleton",
    "norm_tags",
    "reading_id",
]

log = logging.getLogger(__name__)

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
    return f"{FTS_ROWS}:{digest(settings.encode('utf-8'))[:12]}"


@dataclass
class Prepared:
    """One document read and ready to write: its record, chunks and what changed about it."""

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
class Plan:
    """What a sync read: the prepared documents, the files left out and the warnings."""

    prepared: list[Prepared] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Documents whose frontmatter id another holds: one warning for all (repeated_ids_warning).
    repeated_ids: list[RepeatedId] = field(default_factory=list)


def digest(data: bytes) -> str:
    """The hash sync records for a file's bytes, a sidecar's and a chunk's embedded text."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def norm_tags(*groups: tuple[str, ...]) -> list[str]:
    """Tags of all ``groups`` in the form the index keeps them, each once, in order."""
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


def _bounded(items: list[_T], what: str, rel: str, plan: Plan) -> list[_T]:
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


class Preparer:
    """Reads new and changed files of one sync into :class:`Prepared` documents.

    Args:
        root: the KB root.
        config: the KB's configuration.
        store: the store being synced (its reading and chunking marks decide :attr:`rechunk`).
    """

    def __init__(self, root: Path, config: Config, store: Store) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.pages = repository_pages(root)  # the KB's own files' forge addresses
        self.max_bytes = int(config.sync.max_file_mb * 1024 * 1024)
        self.config = config
        self.store = store
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

    def pdf_counts(self) -> tuple[int, int]:
        """PDFs extracted this sync, and PDFs whose text came from the extraction cache."""
        if self._extractor is None:
            return 0, 0
        return self._extractor.misses, self._extractor.hits

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

    def _read(
        self, entry: FileEntry, plan: Plan
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
                side_bytes = self.sidecar_bytes(entry)
                sidecar = read_sidecar(entry.sidecar, side_bytes)
            except (SidecarError, UnsafeFileError) as exc:
                plan.skips.append(Skip(entry.rel, str(exc)))
                return None
            except OSError as exc:
                plan.skips.append(Skip(entry.rel, f"sidecar cannot be read ({exc.strerror})"))
                return None
        return text, data, sidecar, side_bytes

    def sidecar_bytes(self, entry: FileEntry) -> bytes:
        """The sidecar's bytes, read as untrusted input: inside the KB, regular, at most 256 KB."""
        return read_limited(
            entry.sidecar,
            limit=MAX_YAML_BYTES,
            root=self.real_root,
            name=f"sidecar {entry.rel}{SIDECAR_SUFFIX}",
        )

    def prepare(
        self,
        entry: FileEntry,
        rows: dict[str, Any],
        by_id: dict[str, Any],
        missing: dict[str, Any],
        missing_by_hash: dict[str, Any],
        claimed: dict[str, str],
        plan: Plan,
        disputed: set[str],
    ) -> Prepared | None:
        """Read one new or changed file into a document, or ``None`` (a skip line says why).

        ``rows``, ``by_id``, ``missing``, ``missing_by_hash`` and ``claimed`` are the plan's
        state (stored documents by path and by id, those not seen yet, and ids taken this
        sync); a rename or a left-out document updates them.
        """
        from pinakes_core.index.chunking import bound_chunks, embed_text, with_description
        from pinakes_core.read.blocks import first_heading

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
        content_hash = digest(data)
        sidecar_hash = digest(side_bytes) if side_bytes is not None else None
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
        return Prepared(
            entry=entry,
            doc_id=doc_id,
            title=title,
            tags=_bounded(
                norm_tags(front.tags, sidecar.tags if sidecar else (), tuple(inline_tags)),
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
            embed_hashes=[digest(t.encode("utf-8")) for t in texts],
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
        plan: Plan,
    ) -> Extraction | None:
        """A PDF's text, or ``None`` with a skip line when it has none (DESIGN §13)."""
        try:
            extraction = self.extractor.extract(content_hash, data)
            reason = pdf_findings(entry.rel, extraction, plan.warnings)
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
        plan: Plan,
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
                side_bytes = self.sidecar_bytes(entry)
                sidecar_hash = digest(side_bytes)
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
                    drop_skeleton(self.root, old_path, doc_id)
        return doc_id, kind, old_path, entry, sidecar_hash


def drop_skeleton(root: Path, rel: str, doc_id: str) -> None:
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
