"""Incremental, hash-diffed, crash-safe sync of a KB folder into its store (DESIGN §4, §13).

A file whose stat (and its sidecar's) is unchanged costs one ``stat`` and no read. A changed
file is re-read and, if its bytes really changed, re-chunked; only chunk texts whose hash has no
vector yet are embedded. Each document is written in its own transaction, so a sync killed at
any instant leaves every document either fully old or fully new, and the next sync finishes the
job.

:func:`run_sync` runs the stages in order: scan the files (:mod:`pinakes_core.read.documents`),
plan which ones to read and who holds each id (here), read each into a document
(:mod:`pinakes_core.index.preparation`), embed and write them (:mod:`pinakes_core.index.writer`),
resolve the links, and let the plugins' ``after_sync`` hook run.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes_core.config import Config
from pinakes_core.errors import EmptyFolderError, PinakesError, UnsafeFileError
from pinakes_core.index.backend import DatabaseErrors
from pinakes_core.index.preparation import Plan, Preparer, digest
from pinakes_core.index.store import Store
from pinakes_core.index.writer import DocumentEmbedder, Writer
from pinakes_core.intake import MAX_YAML_BYTES, read_limited
from pinakes_core.models import RenamedPath, SkippedFile, SyncReport
from pinakes_core.read.documents import (
    FileEntry,
    not_included_hint,
    scan,
)
from pinakes_core.read.identity import (
    repeated_ids_warning,
)
from pinakes_core.read.sidecar import (
    remove_leftover,
)

if TYPE_CHECKING:
    from pinakes_core.index.place import IndexPlace

__all__ = ["ProgressFn", "model_id_for", "run_sync"]

log = logging.getLogger(__name__)

#: ``progress(stage, done, total)``; core's stages are "read", "embed" and "links", plugins add
#: their own through the ``after_sync`` hook (the graph plugin: "graph", "graph links",
#: "labels"). ``total`` 0 means the length is unknown.
ProgressFn = Callable[[str, int, int], None]
#: A sidecar's top-level ``id:`` line, read without YAML to find disputed ids before the
#: sidecars are parsed (an id written another way is simply not seen here).
_SIDECAR_ID = re.compile(rb"(?m)^id:[ \t]*[\"']?([0-9A-Za-z]{26})[\"']?[ \t]*(?:#.*)?\r?$")


def model_id_for(config: Config) -> str:
    """Return the model id a sync with ``config`` records, without loading the model."""
    from pinakes_core.config import DEFAULT_MODEL
    from pinakes_core.index.embedding import assemble_default_model

    if config.embedding.model == DEFAULT_MODEL:
        return assemble_default_model()[1]
    return config.embedding.model


class _Planner:
    """Decides which files a sync reads: changed stat, racy, or a rechunk; who holds each id."""

    def __init__(
        self,
        store: Store,
        preparer: Preparer,
        progress: ProgressFn,
        history: dict[str, str],
    ) -> None:
        self.store = store
        self.preparer = preparer
        self.rechunk = preparer.rechunk
        self.real_root = preparer.real_root
        #: doc id -> path in the generation a rebuild replaces: who held an id first.
        self.history = history
        self.progress = progress

    def plan(
        self, entries: list[FileEntry], racy: int | None = None
    ) -> tuple[Plan, dict[str, Any], int]:
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
        plan = Plan()
        claimed: dict[str, str] = {}  # doc_id -> path, for duplicate detection
        unchanged = 0
        candidates: list[FileEntry] = []
        racy_entries: list[FileEntry] = []  # stat as stored, written in the last sync's tick
        for entry in entries:
            known = stats.get(entry.rel)
            if known is not None and not self.rechunk and known[1] == entry.stamp:
                if not is_racy(entry, racy):
                    claimed[known[0]] = entry.rel
                    unchanged += 1
                    continue
                racy_entries.append(entry)
                continue
            candidates.append(entry)
        if racy_entries:
            # Hashed, not prepared: a first sync writes every note's sidecar after it started,
            # so the next sync finds them all racy, and reading and parsing each again made a
            # no-change sync at 100k notes as long as a first sync's reading (issue 38).
            hashes = {
                r[0]: (r[1], r[2])
                for r in cursor.execute("SELECT path, content_hash, sidecar_hash FROM documents")
            }
            limit = self.preparer.max_bytes
            for entry in racy_entries:
                if racy_changed(entry, self.real_root, limit, *hashes[entry.rel]):
                    candidates.append(entry)
                else:
                    claimed[stats[entry.rel][0]] = entry.rel
                    unchanged += 1
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
            prepared = self.preparer.prepare(
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
        plan: Plan,
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
        if digest(read_limited(entry.path, limit=limit, root=root, name=entry.rel)) != content_hash:
            return True
        if entry.sidecar_mtime_ns is None:
            return sidecar_hash is not None
        side = read_limited(entry.sidecar, limit=MAX_YAML_BYTES, root=root, name=entry.rel)
        return digest(side) != sidecar_hash
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


#: The ``links_resolved`` meta value of a store whose links were resolved by today's rules
#: (``"0"``: a resolution is due). Raise it when :mod:`pinakes_core.read.resolution` resolves a stored
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


#: Vectors no chunk and no graph label uses any more. Two NOT EXISTS on the indexed hashes:
#: PostgreSQL ran NOT IN (… UNION …) as a scan per vector (42 s against 0.03 s at 27k chunks,
#: benchmarks/pg_vector_gc.py).
FORGET_VECTORS_SQL = (
    "DELETE FROM vectors WHERE NOT EXISTS "
    "(SELECT 1 FROM chunks c WHERE c.embed_hash = vectors.embed_hash) "
    "AND NOT EXISTS (SELECT 1 FROM node_vectors n WHERE n.embed_hash = vectors.embed_hash)"
)


def resolve_all(conn: sqlite3.Connection, kb_id: str, kb_name: str) -> set[str]:
    """:func:`pinakes_core.read.resolution.resolve_all`, imported when a sync first needs it.

    A module-level name (tests replace it to stop a sync at this point); markdown-it, which the
    links module loads, is only needed once something changed.
    """
    from pinakes_core.read.resolution import resolve_all as resolve

    return resolve(conn, kb_id, kb_name)


def _id_history(place: IndexPlace) -> dict[str, str]:
    """Doc id -> path in the store a rebuild is about to replace (empty when there is none)."""
    try:
        old = place.open(create=False)
    except (FileNotFoundError, PinakesError):
        return {}
    except DatabaseErrors:
        return {}
    try:
        return {
            str(r[0]): str(r[1]) for r in old.conn.execute("SELECT doc_id, path FROM documents")
        }
    except DatabaseErrors:
        return {}
    finally:
        old.close()


def _keep_shared_index(root: Path, place: IndexPlace) -> None:
    """Stop a sync that found no document from emptying a shared index that holds some.

    A machine that reads a team's index without the files (only ``pinakes.toml``) would
    otherwise publish an empty index, or rebuild one of another layout from nothing, for every
    other reader (issue 38).

    Raises:
        EmptyFolderError: naming the folder, the index and what to do.
    """
    held = len(_id_history(place))  # the index readers see now, of any layout
    if held:
        raise EmptyFolderError(
            f"{root} holds no document, while the shared {place.backend} index of this KB "
            f"holds {held}: a sync from here would empty it for every reader, so nothing was "
            "changed.",
            "Run `pnk sync` on a machine that has the KB's files (or check `[sync] include`).",
        )


def run_sync(
    root: Path,
    config: Config,
    place: IndexPlace,
    embedder_factory: Callable[[], DocumentEmbedder],
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
        place: where the KB's index lives (:func:`pinakes_core.index.backend.index_place`).
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
    with place.lock():
        history = _id_history(place) if rebuild else {}
        store = place.open(rebuild=rebuild)
        racy = racy_cutoff(store.get_meta("sync_started"))  # before this sync's start is set
        preparer: Preparer | None = None
        sync_warnings: list[str] = []
        try:
            rebuilt = None
            if store.rebuilt_from is not None:
                rebuilt = f"store schema {store.rebuilt_from} differs from this version's; rebuilt from the files"
                log.warning("Pinakes: %s.", rebuilt)
            elif rebuild:
                rebuilt = "rebuild requested"
            preparer = Preparer(root, config, store)
            tick = progress or (lambda stage, done, total: None)
            planner = _Planner(store, preparer, tick, history)
            writer = Writer(root, store, embedder_factory, tick)
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
            if not entries and place.shared:
                _keep_shared_index(root, place)
            hint = not_included_hint(not_included) if store.get_meta("last_sync") is None else None
            if hint is not None:
                sync_warnings.append(hint)
            sync_warnings.extend(config.clamped)
            for path in leftovers:
                if remove_leftover(path):
                    log.info("Pinakes: removed %s, left by an interrupted sidecar write.", path)
            plan, missing, unchanged = planner.plan(entries, racy)
            sync_warnings.extend(_keep_unreadable(missing, unreadable))
            preparer.close()  # every PDF is read by now: the worker's memory goes back
            writer.write(plan)
            removed = writer.remove(missing)
            changed_ids = [p.doc_id for p in plan.prepared if p.kind != "touched"]
            # With the documents whose path another id took (a sidecar's `id:` changed).
            written = set(changed_ids)
            removed_ids = list(
                dict.fromkeys(
                    [doc_id for _, doc_id in removed]
                    + [d for d in writer.displaced if d not in written]
                )
            )
            # Nothing written, no model change, the last sync finished: no chunk can lack a
            # vector and none went unused, so the two whole-store passes are skipped (issue 14).
            quiet = finished and not (changed_ids or removed_ids or model_changed)
            if not quiet:
                writer.fill_missing_vectors()
            relinked: set[str] = set()
            if changed_ids or removed_ids or store.get_meta("links_resolved") != LINKS_RESOLVED:
                tick("links", 0, 0)
                with store.transaction() as conn:
                    relinked = resolve_all(conn, config.kb.id, config.kb.name)
                    store.set_meta(conn, "links_resolved", LINKS_RESOLVED)
                tick("links", 1, 1)
            if after_write is not None:
                after_write(store, changed_ids, removed_ids, sorted(relinked - set(changed_ids)))
            with store._tx(store.conn):  # invisible to queries: no generation bump
                conn = store.conn
                if not quiet:
                    conn.execute(FORGET_VECTORS_SQL)
                store.set_meta(conn, "last_sync", str(time.time()))
                # Files read and left out, as they were: status counts them as new only
                # once they change (else a binary .md stays "1 new" after every sync).
                by_rel = {e.rel: e for e in entries}
                skipped = {s.path: by_rel[s.path].stamp for s in plan.skips if s.path in by_rel}
                store.set_meta(conn, "skipped_files", json.dumps(skipped))
                store.set_meta(conn, "chunking", preparer.chunking)
                store.set_meta(conn, "fts_rows", preparer.reading)
            # A rebuild was written beside the store readers use; now it becomes theirs.
            store.publish()
            preparer.collect_cache()
        finally:
            if preparer is not None:
                preparer.close()
            store.close()
    seconds = time.perf_counter() - started
    pdfs = preparer.pdf_counts()
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
        warnings=[*sync_warnings, *plan.warnings],
        chunks_embedded=writer.embedded,
        chunks_reused=writer.reused,
        embed_seconds=round(writer.embed_seconds, 3),
        chunks_per_second=round(writer.embedded / writer.embed_seconds, 1)
        if writer.embed_seconds > 0
        else None,
        seconds=round(seconds, 3),
        rebuilt=rebuilt,
        pdfs_extracted=pdfs[0],
        pdfs_from_cache=pdfs[1],
        repeated_ids=plan.repeated_ids,
    )
