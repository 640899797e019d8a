"""The KBs a server serves: lookup by name, safe document references, freshness, locking.

Everything a client names goes through here. A KB is found only among the served ones; a
document only by ULID, ``pnk://`` URI, or a KB-relative path that stays inside the KB root and
names an indexed document. Each served KB has a lock, so the tools (which fastmcp runs in worker
threads) use one KB's store connection one call at a time; no code ever holds two KB locks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import PurePosixPath

from pinakes_core import (
    KB,
    DocumentNotFoundError,
    DocumentView,
    PinakesError,
    SyncReport,
    parse_uri,
)
from pinakes_core.manage.crosskb import Peers
from pinakes_core.manage.fleet import Fleet
from pinakes_core.manage.registry import registry_path
from pinakes_core.manage.writing import PathError, confine
from pinakes_core.plugins import plugin_manager
from pinakes_core.uri import SCHEME, is_ulid

__all__ = ["ArgumentError", "Registry", "ServedKB", "open_fleet", "open_kbs"]

log = logging.getLogger(__name__)

_ID_HINT = (
    "Pass a doc_id (ULID) from pinakes_search, a pnk:// URI, a path relative to the KB root, or "
    "a note's name as its wikilinks write it."
)
_DRIVE = re.compile(r"^[A-Za-z]:")


class ArgumentError(PinakesError):
    """A tool argument names a KB this server does not serve, or a document reference is unsafe."""


class ServedKB:
    """One KB the server serves, with its lock and what the server last saw of its store.

    Attributes:
        kb: the open :class:`~pinakes_core.KB` (model, store connection and vectors stay loaded).
        name: the KB's name on this server: its ``[kb] name``, or its fleet name.
        kb_id: the KB's ``[kb] id`` (ULID).
        lock: held while a tool uses ``kb``.
        watching: whether ``--watch`` re-syncs this KB on file changes.
    """

    def __init__(self, kb: KB, *, watching: bool = False, name: str | None = None) -> None:
        self.kb = kb
        self.name = name or kb.config.kb.name
        self.kb_id = kb.config.kb.id
        self.root = kb.root.resolve()
        self.lock = threading.Lock()
        self.watching = watching
        self.generation: int | None = None
        self._identity: object | None = None
        #: set once the start-up sync and warm-up finished (whatever their outcome).
        self.ready = threading.Event()
        #: set when the warm-up found the KB never synced (or outdated) and began syncing it.
        self.syncing = threading.Event()
        #: the start-up sync's latest (stage, done, total), relayed as MCP progress.
        self.progress: tuple[str, int, int] = ("starting", 0, 0)
        #: why the start-up sync or warm-up failed, if it did.
        self.error: PinakesError | None = None

    @property
    def graph(self) -> bool:
        """Whether `KB.links` can answer: the method exists and a plugin implements it."""
        if not callable(getattr(self.kb, "links", None)):
            return False
        hook = getattr(plugin_manager().hook, "kb_links", None)
        return hook is None or bool(hook.get_hookimpls())

    def refresh(self) -> None:
        """Notice another process's sync before a tool uses the KB (call with ``lock`` held).

        A store file that was replaced (``pnk sync --rebuild``) is reopened; a changed store
        generation (any committed sync) makes the KB reload its vector matrix on the next search
        (``KB`` compares generations itself; this logs it and keeps the number for
        ``pinakes_kbs``). Both checks are one ``stat`` (a PostgreSQL index: one query on a
        kept connection) and one indexed read.
        """
        identity = self.kb.place.identity()
        if self._identity is not None and identity != self._identity:
            log.info("KB %r: the store file was replaced; reopening it", self.name)
            self.kb.close()
            self.generation = None
        self._identity = identity
        if identity is None:
            return
        generation = self.kb.store().generation()
        if self.generation is not None and generation != self.generation:
            log.info(
                "KB %r: store changed (generation %d -> %d); vectors reload on the next search",
                self.name,
                self.generation,
                generation,
            )
        self.generation = generation

    def warm(self, sync_lock: threading.Lock) -> None:
        """Sync a never-synced (or outdated) KB, then load the model, the vectors and calibration.

        Runs in a background thread from server start, so ``initialize`` is answered at once;
        tools wait on :attr:`ready` and relay :attr:`progress` to the client as MCP progress
        notifications. One throw-away search loads model, vectors and calibration, so the first
        client query pays for none. A failure is kept in :attr:`error` (tools then say so).
        """
        try:
            if not self.kb.place.current():
                log.info(
                    "KB %r was never synced (or is outdated); syncing %s", self.name, self.root
                )
                self.syncing.set()
                with sync_lock:
                    syncer = KB.open(self.root, embedder=self.kb.embedder)
                    try:
                        report = syncer.sync(progress=self._progress)
                    finally:
                        syncer.close()
                log.info("KB %r: %d documents indexed", self.name, len(report.added))
            with self.lock:
                self.refresh()
                self.kb.search("warm up", k=1)
        except PinakesError as exc:
            self.error = exc
            log.warning("KB %r is not ready: %s", self.name, exc)
        except Exception as exc:  # a bug: each tool call meets (and masks) it on its own
            log.warning("KB %r: warm-up failed (%s)", self.name, type(exc).__name__)
        finally:
            self.ready.set()

    def _progress(self, stage: str, done: int, total: int) -> None:
        self.progress = (stage, done, total)


class Registry:
    """The served KBs, in the order they were given.

    Raises:
        ArgumentError: (from the constructor) if two KBs share a name or a KB id.
    """

    def __init__(
        self,
        kbs: Sequence[KB],
        *,
        watching: bool = False,
        names: Sequence[str | None] = (),
    ) -> None:
        if not kbs:
            raise ArgumentError("No KB to serve.", "Pass at least one --kb PATH (or --fleet).")
        self._served: dict[str, ServedKB] = {}
        ids: dict[str, ServedKB] = {}
        for kb, name in zip(kbs, [*names, *[None] * (len(kbs) - len(names))], strict=True):
            served = ServedKB(kb, watching=watching, name=name)
            for table, key, what in (
                (self._served, served.name, "name"),
                (ids, served.kb_id, "id"),
            ):
                other = table.get(key)
                if other is not None:
                    raise ArgumentError(
                        f"Two KBs have the same {what} {key!r}: {other.root} and {served.root}.",
                        "Give each KB a unique [kb] name (and id) in its pinakes.toml, or serve one of them.",
                    )
                table[key] = served
        self._ids = ids
        # Cross-KB links resolve among the served KBs only: the server never reads outside them.
        members = [(s.name, s.kb_id, s.root) for s in self._served.values()]
        for served in self._served.values():
            served.kb.use_peers(Peers.of(served.kb_id, members))
        #: held by every sync the server runs (start-up, watcher, write tools): never two at once.
        self.sync_lock = threading.Lock()
        #: whether the server re-syncs the KBs when their files change.
        self.watching = watching
        self._warmers: list[threading.Thread] = []

    def start_warming(self) -> list[threading.Thread]:
        """Start each KB's :meth:`ServedKB.warm` in its own thread, once; return the threads.

        The server's lifespan calls it; ``pinakes-mcp`` calls it earlier, as soon as the KBs
        are open, so the model and vectors load while fastmcp is still being imported.
        """
        if not self._warmers:
            self._warmers = [
                threading.Thread(
                    target=served.warm, args=(self.sync_lock,), name=f"warm:{served.name}"
                )
                for served in self
            ]
            for thread in self._warmers:
                thread.start()
        return list(self._warmers)

    def __iter__(self) -> Iterator[ServedKB]:
        return iter(self._served.values())

    def __len__(self) -> int:
        return len(self._served)

    @property
    def multi(self) -> bool:
        """Whether several KBs are served (hits then say which KB they come from)."""
        return len(self._served) > 1

    def find(self, ref: str) -> ServedKB | None:
        """Return the served KB called ``ref`` (a name or a KB ULID), or ``None``."""
        return self._served.get(ref) or self._ids.get(ref.upper())

    def one(self, ref: str) -> ServedKB:
        """Return the served KB called ``ref`` (a name or a KB ULID).

        Raises:
            ArgumentError: if no served KB has that name or id.
        """
        served = self.find(ref.strip())
        if served is None:
            raise ArgumentError(
                f"No served KB is called {ref!r}.",
                f"Served KBs: {', '.join(self._served)} (see pinakes_kbs).",
            )
        return served

    def select(self, ref: str | None) -> list[ServedKB]:
        """Return the KB ``ref`` names, or every served KB when ``ref`` is ``None``."""
        return list(self._served.values()) if ref is None else [self.one(ref)]

    def sync(self, served: ServedKB) -> SyncReport:
        """Run one incremental sync of ``served`` and return its report (blocking).

        The sync runs through a second ``KB`` sharing the served KB's loaded model, under
        :attr:`sync_lock`: the served KB keeps answering meanwhile (SQLite WAL) and picks the
        result up by the store generation.

        Raises:
            PinakesError: if the sync fails (e.g. another process holds the KB's sync lock).
        """
        with self.sync_lock:
            syncer = KB.open(served.root, embedder=served.kb.embedder)
            try:
                return syncer.sync()
            finally:
                syncer.close()

    @contextlib.contextmanager
    def using(self, served: ServedKB) -> Iterator[KB]:
        """Hold ``served``'s lock, refresh it from its store, and yield its ``KB``."""
        with served.lock:
            served.refresh()
            yield served.kb

    # -- documents ------------------------------------------------------------------------

    def locate(self, ref: str, kb: str | None = None) -> tuple[ServedKB, str]:
        """Return the served KB and document ULID a client's document reference names.

        ``ref`` is a ULID, a ``pnk://`` URI (whose KB part, if any, must be served), a
        KB-relative path of an indexed document, or a note's name (as a wikilink resolves it).
        Paths that are absolute, contain ``..`` or resolve outside the KB root (a symlink) are
        refused before anything is looked up.

        Raises:
            ArgumentError: for an unserved KB, a non-``pnk`` URI or an unsafe path.
            UriError: for a malformed ``pnk://`` URI.
            DocumentNotFoundError: if no served KB (or the named one) has the document, or
                several do and ``kb`` was not given.
        """
        ref = ref.strip()
        if not ref or "\x00" in ref:
            raise ArgumentError("The document reference is empty or holds a NUL byte.", _ID_HINT)
        candidates = self.select(kb)
        if ref.startswith(SCHEME):
            uri = parse_uri(ref)
            if uri.kb is not None:
                named = self.one(uri.kb)
                if kb is not None and named is not candidates[0]:
                    raise ArgumentError(
                        f"{ref!r} names KB {uri.kb!r} but kb={kb!r} was given.",
                        "Drop the kb argument or make the two agree.",
                    )
                candidates = [named]
            key = uri.doc_id
        elif is_ulid(ref.upper()):
            key = ref.upper()
        else:
            key = self._safe_path(ref, candidates)
        found: list[tuple[ServedKB, str]] = []
        near: list[str] = []
        for served in candidates:
            with self.using(served) as handle:
                try:
                    found.append((served, handle.resolve(key)))
                except DocumentNotFoundError as exc:
                    near += exc.near
                    continue
        if not found:
            where = f"KB {candidates[0].name!r}" if len(candidates) == 1 else "any served KB"
            maybe = f"Did you mean {', '.join(map(repr, near[:3]))}? " if near else ""
            raise DocumentNotFoundError(f"No document {ref!r} in {where}.", maybe + _ID_HINT, near)
        if len(found) > 1:
            names = ", ".join(served.name for served, _ in found)
            raise DocumentNotFoundError(
                f"{ref!r} names a document in several KBs ({names}).", "Pass kb= to pick one."
            )
        return found[0]

    @staticmethod
    def _safe_path(ref: str, candidates: Sequence[ServedKB]) -> str:
        """Return ``ref`` as a KB-relative POSIX path, refusing anything that could leave a root."""
        rel = ref
        for served in candidates:
            try:
                rel = confine(served.root, ref, served.name)
            except PathError as exc:
                raise ArgumentError(exc.message, _ID_HINT) from None
        return rel

    @staticmethod
    def check_inside(served: ServedKB, view: DocumentView) -> DocumentView:
        """Return ``view`` if its file lies inside the KB root, else refuse it.

        A document replaced by a symlink to somewhere else after the last sync would otherwise
        be read through the link.

        Raises:
            ArgumentError: if the file resolves outside the KB root.
        """
        if not (served.root / view.path).resolve().is_relative_to(served.root):
            raise ArgumentError(
                f"{view.path} now leads outside the KB {served.name!r}; it is not served.",
                "Run `pnk sync` so the index matches the files.",
            )
        return view

    @staticmethod
    def check_prefix(prefix: str) -> str:
        """Return a search ``path`` filter, refusing absolute and ``..`` prefixes.

        Raises:
            ArgumentError: if the prefix is absolute or climbs with ``..``.
        """
        posix = prefix.replace("\\", "/")
        path = PurePosixPath(posix)
        if path.is_absolute() or _DRIVE.match(posix) or ".." in path.parts:
            raise ArgumentError(
                f"The path filter {prefix!r} is not a KB-relative folder.",
                "Use a prefix relative to the KB root, e.g. 'runbooks/'.",
            )
        return posix.removeprefix("./")


def open_kbs(paths: Sequence[str | os.PathLike[str]]) -> list[KB]:
    """Open the KB at each path (config only: the heavy loading happens in the warm-up).

    Raises:
        PinakesError: if a path holds no valid ``pinakes.toml``.
    """
    return [KB.open(path) for path in paths]


def open_fleet(
    paths: Sequence[str | os.PathLike[str]],
) -> tuple[list[KB], list[str | None]]:
    """Open every KB of the fleet registry, then those at ``paths`` it does not hold.

    Registered KBs are served under their fleet names; one that cannot be opened (moved, a
    broken ``pinakes.toml``) is left out with a warning.

    Raises:
        PinakesError: if a path holds no valid ``pinakes.toml``, or nothing is left to serve.
    """
    fleet = Fleet.open()
    for entry, reason in fleet.unavailable:
        log.warning("Fleet KB %r is not served: %s", entry.name, reason)
    kbs: list[KB] = [kb for _, kb in fleet]
    names: list[str | None] = [name for name, _ in fleet]
    ids = {kb.config.kb.id for kb in kbs}
    for kb in open_kbs(paths):
        if kb.config.kb.id not in ids:
            kbs.append(kb)
            names.append(None)
    if not kbs:
        raise PinakesError(
            f"No KB to serve: the fleet registry {registry_path()} holds none that opens.",
            "Register one with `pnk fleet add PATH`, or pass --kb PATH.",
        )
    return kbs, names
