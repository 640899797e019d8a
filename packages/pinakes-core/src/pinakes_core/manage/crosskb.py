"""Cross-KB links: ``pnk://<other-kb>/<doc-ulid>`` resolved through the fleet (DESIGN §2, §10).

Sync resolves links inside its own KB only and stores a link to another KB with the reason
:data:`~pinakes_core.read.links.OTHER_KB` (a bare ``pnk://<doc-ulid>`` not in this KB with
:data:`~pinakes_core.read.links.NO_SUCH_ID`). Whether such a link resolves is decided when it is
read, against the other KB's store as it is now, so deleting the target in the other KB makes
the link dangle at once, with no sync of this KB. The other KBs are the *peers*: the fleet
registry's KBs by default, or exactly the KBs a server serves (it never reads outside them).

A peer is read through a read-only connection of its own to its index, wherever the peer's
``pinakes.toml`` says that lives (its SQLite file, or its schema on a PostgreSQL server:
:meth:`IndexPlace.reader <pinakes_core.index.place.IndexPlace.reader>`), never through another
``KB`` object, so reading a peer never competes with a thread using that KB.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pinakes_core.config import Config, load_config
from pinakes_core.errors import ConfigError, DocumentNotFoundError, PinakesError, UriError
from pinakes_core.index.backend import DatabaseErrors
from pinakes_core.index.place import IndexPlace, index_place
from pinakes_core.index.store import Store
from pinakes_core.manage.registry import FleetRegistry
from pinakes_core.models import (
    DoctorFinding,
    FrontierItem,
    LinksResult,
    Neighbour,
    UnresolvedLink,
)
from pinakes_core.read.links import NO_SUCH_ID, OTHER_KB
from pinakes_core.uri import SCHEME, is_ulid, parse_uri

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Vectors

__all__ = [
    "Peer",
    "PeerDoc",
    "Peers",
    "cross_rows",
    "doctor_findings",
    "extend_links",
    "link_target",
]

log = logging.getLogger(__name__)

#: Most cross-KB neighbours one ``links`` answer adds; the rest go on the frontier.
CROSS_CAP = 20
_LIST_CAP = 20
_CHUNK = 500  # host parameters per IN (...) query
#: What opening a peer's index may raise: the engines' errors, or a missing index or driver.
_OPEN_ERRORS: tuple[type[Exception], ...] = (*DatabaseErrors, PinakesError)


@dataclass(frozen=True)
class PeerDoc:
    """A document found in another KB."""

    kb: str
    kb_id: str
    doc_id: str
    title: str
    path: str


class Peer:
    """Another KB, read through a private read-only connection to its index.

    Attributes:
        name: its fleet name.
        kb_id: its ``[kb] id``.
        root: its folder.
    """

    def __init__(self, name: str, kb_id: str, root: Path) -> None:
        self.name = name
        self.kb_id = kb_id
        self.root = root
        self._lock = threading.Lock()
        self._place: IndexPlace | None = None
        self._conn: Any = None
        self._identity: object | None = None
        self._kb_name: str | bool | None = False  # False: not read yet
        self.problem = ""

    @property
    def kb_name(self) -> str | None:
        """The KB's own ``[kb] name`` (``None`` when its config cannot be read)."""
        if self._kb_name is False:
            try:
                self._kb_name = load_config(self.root).kb.name
            except ConfigError:
                self._kb_name = None
        return self._kb_name if isinstance(self._kb_name, str) else None

    def matches(self, ref: str) -> bool:
        """Whether ``ref`` (a KB ULID, fleet name or ``[kb] name``) names this KB."""
        return ref.upper() == self.kb_id or ref == self.name or ref == self.kb_name

    def _where(self) -> IndexPlace | None:
        """Where the peer's index lives, as its ``pinakes.toml`` says (read once, kept)."""
        if self._place is None:
            try:
                config = load_config(self.root)
            except ConfigError:
                self.problem = self._gone()
                return None
            try:
                self._place = index_place(self.root, config)
            except PinakesError as exc:  # postgres without its URL or its driver
                self.problem = f"KB {self.name!r}'s index cannot be read ({exc.message})"
        return self._place

    def _gone(self) -> str:
        """Why there is no index to read: never synced, or the folder is not this KB's now."""
        try:
            same = load_config(self.root).kb.id == self.kb_id
        except ConfigError:
            same = False
        return (
            f"KB {self.name!r} was never synced (run `pnk sync --kb {self.root}`)"
            if same
            else f"KB {self.name!r} is not at {self.root} any more (moved? `pnk fleet add` its new folder)"
        )

    def _connect(self) -> Any:
        place = self._where()
        if place is None:
            self._drop()
            return None
        try:
            identity = place.identity()
        except DatabaseErrors as exc:
            self._drop()
            self.problem = f"KB {self.name!r}'s index cannot be read ({exc})"
            return None
        if identity is None:
            self._forget()  # its pinakes.toml is read again next time
            self.problem = self._gone()
            return None
        if self._conn is not None and identity == self._identity:
            return self._conn
        self._drop()  # first use, or the index was replaced (a rebuild)
        try:
            if not place.current():
                self.problem = f"KB {self.name!r}'s index is from another version (run `pnk sync --kb {self.root}`)"
                return None
            conn = place.reader()
        except _OPEN_ERRORS as exc:
            self.problem = f"KB {self.name!r}'s index cannot be read ({exc})"
            return None
        try:
            kb_row = conn.execute("SELECT value FROM meta WHERE key = 'kb_id'").fetchone()
        except DatabaseErrors as exc:
            conn.close()
            self.problem = f"KB {self.name!r}'s index cannot be read ({exc})"
            return None
        if kb_row is not None and str(kb_row[0]) != self.kb_id:
            conn.close()
            self.problem = f"the folder of KB {self.name!r} ({self.root}) now holds another KB"
            return None
        self._conn, self._identity, self.problem = conn, identity, ""
        return conn

    def query(self, sql: str, params: Sequence[object] = ()) -> list[Any] | None:
        """Run a read query on the peer's index; ``None`` (and :attr:`problem`) when unavailable."""
        with self._lock:
            conn = self._connect()
            if conn is None:
                return None
            try:
                return list(conn.execute(sql, list(params)).fetchall())
            except DatabaseErrors as exc:
                self.problem = f"KB {self.name!r}'s index cannot be read ({exc})"
                self._drop()
                return None

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn, self._identity = None, None

    def close(self) -> None:
        """Close the connections (they reopen on the next query; ``pinakes.toml`` is read again)."""
        with self._lock:
            self._forget()

    def _forget(self) -> None:
        self._drop()
        if self._place is not None:
            self._place.close()
            self._place = None


class Peers:
    """The KBs this KB's cross-KB links may resolve in (itself excluded).

    Attributes:
        problem: why there are no peers when the fleet registry could not be read, else ``""``.
    """

    def __init__(self, own_id: str, peers: Iterable[Peer], problem: str = "") -> None:
        self.own_id = own_id
        given = list(peers)
        self._peers = [p for p in given if p.kb_id != own_id]
        #: the names this KB itself goes by in the fleet (other KBs' links may use them).
        self.own_names = {p.name for p in given if p.kb_id == own_id}
        self.problem = problem

    @classmethod
    def from_registry(cls, own_id: str, path: Path | None = None) -> Peers:
        """The fleet registry's KBs; an unreadable registry gives no peers (and says why)."""
        try:
            registry = FleetRegistry.load(path)
        except ConfigError as exc:
            log.warning("Pinakes: %s Cross-KB links stay unresolved.", exc.message)
            return cls(own_id, [], problem=f"the fleet registry is invalid: {exc.message}")
        return cls(own_id, [Peer(e.name, e.kb_id, e.path) for e in registry])

    @classmethod
    def of(cls, own_id: str, members: Iterable[tuple[str, str, Path]]) -> Peers:
        """Exactly these KBs, given as ``(name, kb_id, root)`` (a server's served KBs)."""
        return cls(own_id, [Peer(name, kb_id, root) for name, kb_id, root in members])

    def __iter__(self) -> Iterator[Peer]:
        return iter(self._peers)

    def __len__(self) -> int:
        return len(self._peers)

    def find(self, ref: str) -> Peer | None:
        """The peer ``ref`` names (KB ULID, fleet name or ``[kb] name``), or ``None``."""
        return next((p for p in self._peers if p.matches(ref)), None)

    def resolve(self, kb_ref: str | None, doc_id: str) -> tuple[PeerDoc | None, str]:
        """Find document ``doc_id`` in the peer ``kb_ref`` names (in any peer when ``None``).

        Returns:
            The document, or ``None`` and the reason in a few words.
        """
        if kb_ref is None:
            for candidate in self._peers:
                found = _doc(candidate, doc_id)
                if found is not None:
                    return found, ""
            return None, "no document with this id in this KB or the fleet"
        peer = self.find(kb_ref)
        if peer is None:
            extra = f"; {self.problem}" if self.problem else ""
            return None, f"KB {kb_ref!r} is not in the fleet{extra}"
        found = _doc(peer, doc_id)
        if found is not None:
            return found, ""
        return None, peer.problem or f"no document {doc_id} in KB {peer.name!r}"

    def close(self) -> None:
        """Close every peer connection."""
        for peer in self._peers:
            peer.close()


def _doc(peer: Peer, doc_id: str) -> PeerDoc | None:
    rows = peer.query("SELECT doc_id, title, path FROM documents WHERE doc_id = ?", (doc_id,))
    if not rows:
        return None
    return PeerDoc(peer.name, peer.kb_id, rows[0]["doc_id"], rows[0]["title"], rows[0]["path"])


def _marks(values: Sequence[object]) -> str:
    return ",".join("?" * len(values))


def _outgoing(conn: Any, sources: Sequence[str], rel: str | None) -> list[Any]:
    """Stored links from ``sources`` that point outside the KB (or at an unknown ULID)."""
    rel_clause = " AND rel = ?" if rel else ""
    rows: list[Any] = []
    for i in range(0, len(sources), _CHUNK):
        part = list(sources[i : i + _CHUNK])
        rows += conn.execute(
            "SELECT rowid, src_doc, target, dst_kb, dst_doc, rel, origin, reason FROM links "
            f"WHERE src_doc IN ({_marks(part)}) AND dst_doc IS NOT NULL AND reason IN (?, ?)"
            f"{rel_clause} ORDER BY rowid",
            [*part, OTHER_KB, NO_SUCH_ID, *([rel] if rel else [])],
        ).fetchall()
    return rows


def _incoming(
    keys: Sequence[str], peer: Peer, targets: Sequence[str], rel: str | None
) -> list[Any] | None:
    """The peer's stored links whose target is one of ``targets`` in this KB (named by ``keys``)."""
    rel_clause = " AND l.rel = ?" if rel else ""
    sql = (
        "SELECT l.src_doc, d.title, d.path, l.dst_doc, l.rel, l.origin FROM links l "
        "JOIN documents d ON d.doc_id = l.src_doc "
        f"WHERE l.dst_doc IN ({_marks(targets)}) AND ((l.reason = ? AND l.dst_kb IN "
        f"({_marks(keys)})) OR (l.reason = ? AND l.dst_kb IS NULL)){rel_clause} ORDER BY d.path"
    )
    return peer.query(sql, [*targets, OTHER_KB, *keys, NO_SUCH_ID, *([rel] if rel else [])])


def _scores(
    model: str | None,
    embed_query: Callable[[str], Vectors],
    query: str,
    found: Sequence[PeerDoc],
    peers: Peers,
) -> dict[tuple[str, str], float]:
    """Best-chunk cosine of each cross-KB neighbour to ``query``.

    Only for peers whose vectors come from the same model as this KB's, ``model`` (the query
    vector is this KB's); others score 0.
    """
    vector = np.asarray(embed_query(query), dtype=np.float32)
    scores: dict[tuple[str, str], float] = {}
    by_kb: dict[str, list[str]] = {}
    for doc in found:
        by_kb.setdefault(doc.kb_id, []).append(doc.doc_id)
    for kb_id, ids in by_kb.items():
        peer = peers.find(kb_id)
        meta = peer.query("SELECT value FROM meta WHERE key = 'model_id'") if peer else None
        if peer is None or not meta or meta[0][0] != model:
            continue
        rows = peer.query(
            "SELECT c.doc_id, v.vector FROM chunks c JOIN vectors v ON v.embed_hash = c.embed_hash "
            f"WHERE c.doc_id IN ({_marks(ids)})",
            ids,
        )
        for row in rows or ():
            chunk = np.frombuffer(row["vector"], dtype=np.float32)
            if chunk.shape == vector.shape:
                key = (kb_id, row["doc_id"])
                scores[key] = max(scores.get(key, -1.0), float(chunk @ vector))
    return scores


def extend_links(
    result: LinksResult,
    *,
    store: Store,
    config: Config,
    peers: Peers,
    embed_query: Callable[[str], Vectors],
    direction: str,
    query: str | None,
) -> LinksResult:
    """Add the cross-KB neighbours to a ``links`` answer (one hop across, DESIGN §10).

    The start document and every neighbour found in this KB closer than the served depth
    contribute their links into other KBs (``out``) and the other KBs' links to them (``in``),
    one hop further. A neighbour in another KB carries ``kb`` and is terminal: it is never
    expanded inside its own KB. The start document's cross-KB links that do not resolve stay in
    ``unresolved`` with the fleet's reason. Never raises for a peer that cannot be read.

    Args:
        result: the answer inside this KB.
        store: this KB's store.
        config: this KB's config (its id, name and ``[graph]`` weights).
        peers: the KBs cross-KB links resolve in.
        embed_query: this KB's query embedding, called only to rank by ``query``.
        direction: ``"out"``, ``"in"`` or ``"both"``.
        query: rank the neighbours by similarity to this text.
    """
    sources = {result.doc_id: 0}
    for n in result.neighbours:
        if n.kb is None and n.distance < result.depth:
            sources.setdefault(n.doc_id, n.distance)
    rel = result.matched_rel
    found: list[tuple[PeerDoc, str, str, str, int]] = []  # (doc, rel, direction, via, distance)
    reasons: dict[str, str] = {}
    resolved_targets: set[str] = set()
    if direction in ("out", "both"):
        for row in _outgoing(store.conn, list(sources), rel):
            kb_ref = row["dst_kb"] if row["reason"] == OTHER_KB else None
            doc, reason = peers.resolve(kb_ref, row["dst_doc"])
            if row["src_doc"] == result.doc_id:
                if doc is None:
                    reasons[row["target"]] = reason
                else:
                    resolved_targets.add(row["target"])
            if doc is not None:
                found.append((doc, row["rel"], "out", row["src_doc"], sources[row["src_doc"]] + 1))
    if direction in ("in", "both") and len(peers):
        targets = list(sources)
        keys = sorted({config.kb.id, config.kb.name, *peers.own_names})
        for peer in peers:
            for i in range(0, len(targets), _CHUNK):
                for row in _incoming(keys, peer, targets[i : i + _CHUNK], rel) or ():
                    doc = PeerDoc(peer.name, peer.kb_id, row["src_doc"], row["title"], row["path"])
                    found.append(
                        (doc, row["rel"], "in", row["dst_doc"], sources[row["dst_doc"]] + 1)
                    )
    weights = config.graph
    scores = (
        _scores(store.get_meta("model_id"), embed_query, query, [f[0] for f in found], peers)
        if query and found
        else {}
    )
    best: dict[tuple[str, str], Neighbour] = {}
    for doc, link_rel, way, via, distance in found:
        weight = weights.authored / distance
        score = scores.get((doc.kb_id, doc.doc_id), 0.0) if query else weight
        key = (doc.kb_id, doc.doc_id)
        if key in best and best[key].score >= score:
            continue
        best[key] = Neighbour(
            doc_id=doc.doc_id,
            title=doc.title,
            path=doc.path,
            rel=link_rel,
            direction=way,
            distance=distance,
            score=round(score, 4),
            via=None if via == result.doc_id else via,
            kb=doc.kb,
        )
    ranked = sorted(best.values(), key=lambda n: (-n.score, n.distance, n.kb or "", n.path))
    kept, extra = ranked[:CROSS_CAP], ranked[CROSS_CAP:]
    unresolved = [
        UnresolvedLink(target=u.target, reason=reasons.get(u.target, u.reason))
        for u in result.unresolved
        if u.target not in resolved_targets
    ]
    return result.model_copy(
        update={
            "neighbours": [*result.neighbours, *kept],
            "frontier": [
                *result.frontier,
                *(
                    FrontierItem(doc_id=n.doc_id, rel=n.rel, reason="rows", path=n.path, kb=n.kb)
                    for n in extra
                ),
            ],
            "unresolved": unresolved,
            "truncated": result.truncated or bool(extra),
        }
    )


def cross_rows(conn: Any, peers: Peers) -> tuple[set[int], list[tuple[str, str, str]]]:
    """Classify the stored links (in the store ``conn``) that only the fleet can resolve.

    Returns:
        The rowids of links that resolve in another KB, and ``(path, target, reason)`` of the
        links naming another KB that do not.
    """
    resolved: set[int] = set()
    dangling: list[tuple[str, str, str]] = []
    rows = conn.execute(
        "SELECT l.rowid, d.path, l.target, l.dst_kb, l.dst_doc, l.reason FROM links l "
        "JOIN documents d ON d.doc_id = l.src_doc WHERE l.dst_doc IS NOT NULL AND l.reason IN (?, ?) "
        "ORDER BY d.path, l.rowid",
        (OTHER_KB, NO_SUCH_ID),
    ).fetchall()
    for row in rows:
        kb_ref = row["dst_kb"] if row["reason"] == OTHER_KB else None
        doc, reason = peers.resolve(kb_ref, row["dst_doc"])
        if doc is not None:
            resolved.add(int(row["rowid"]))
        elif kb_ref is not None:
            dangling.append((row["path"], row["target"], reason))
    return resolved, dangling


def doctor_findings(dangling: list[tuple[str, str, str]], resolved: int) -> list[DoctorFinding]:
    """The ``cross-kb-links`` finding: links into other KBs that do not resolve now."""
    if dangling:
        return [
            DoctorFinding(
                check="cross-kb-links",
                severity="warning",
                message=f"{len(dangling)} link(s) to other KBs do not resolve in the fleet "
                "(target deleted, KB not registered, or never synced).",
                items=[f"{p}: {t} ({r})" for p, t, r in dangling[:_LIST_CAP]],
            )
        ]
    if resolved:
        return [
            DoctorFinding(
                check="cross-kb-links",
                severity="info",
                message=f"{resolved} link(s) to other KBs resolve in the fleet.",
            )
        ]
    return []


def link_target(
    dst: str,
    dst_kb: str | None,
    *,
    config: Config,
    peers: Peers,
    resolve: Callable[[str], str],
) -> PeerDoc | None:
    """The document in another KB that ``pnk link``'s target names, or ``None`` if it is local.

    ``dst`` is a ``pnk://<kb>/<doc>`` URI naming another KB, a document ULID (or path, with
    ``dst_kb``) in the KB ``dst_kb`` names, or a bare ULID found in no KB but another.

    Args:
        dst: the link's target as given.
        dst_kb: the KB holding it, when given apart.
        config: this KB's config (its id and name).
        peers: the KBs cross-KB links resolve in.
        resolve: this KB's document lookup (raises ``DocumentNotFoundError``).

    Raises:
        DocumentNotFoundError: if the named KB or document cannot be found.
    """
    own = {config.kb.id, config.kb.name}
    ref = dst.strip()
    kb_ref: str | None = None
    doc_ref = ref
    if ref.startswith(SCHEME):
        try:
            uri = parse_uri(ref)
        except UriError as exc:
            raise DocumentNotFoundError(exc.message, exc.hint) from None
        kb_ref, doc_ref = uri.kb, uri.doc_id
    if dst_kb is not None:
        if kb_ref is not None and kb_ref != dst_kb:
            raise DocumentNotFoundError(f"{dst!r} names KB {kb_ref!r}, not {dst_kb!r}.")
        kb_ref = dst_kb
    if kb_ref is not None and (kb_ref in own or kb_ref.upper() in own):
        return None
    if kb_ref is None:
        if not is_ulid(doc_ref.upper()):
            return None
        try:
            resolve(doc_ref)
            return None  # a local document
        except DocumentNotFoundError:
            doc, reason = peers.resolve(None, doc_ref.upper())
            if doc is None:
                raise DocumentNotFoundError(f"No document {dst!r}: {reason}.") from None
            return doc
    peer = peers.find(kb_ref)
    if peer is None:
        raise DocumentNotFoundError(
            f"KB {kb_ref!r} is not in the fleet registry.",
            "Register it with `pnk fleet add PATH`.",
        )
    doc_id = doc_ref.upper() if is_ulid(doc_ref.upper()) else None
    if doc_id is None:  # a path in the other KB
        rows = peer.query(
            "SELECT doc_id FROM documents WHERE path = ?", (doc_ref.removeprefix("./"),)
        )
        doc_id = rows[0]["doc_id"] if rows else None
    found = _doc(peer, doc_id) if doc_id else None
    if found is None:
        raise DocumentNotFoundError(
            f"No document {doc_ref!r} in KB {peer.name!r}"
            + (f" ({peer.problem})." if peer.problem else "."),
            "Use its ULID, a pnk:// URI or its path relative to that KB's root.",
        )
    return found
