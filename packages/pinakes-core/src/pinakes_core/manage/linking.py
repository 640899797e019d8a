"""Typed links: ``pnk link`` writing one into a sidecar, and ``links`` following them (DESIGN §6).

:func:`add_link` appends ``{to, rel, note}`` to the linking document's sidecar (the index sees
it at the next sync): the relation matched to ``[schema]`` (:func:`~pinakes_core.manage.schema.
match_relation`), a target in another KB of the fleet written as its ``pnk://`` URI, and a
relation outside the schema logged as a schema suggestion. :func:`links` follows them for
:meth:`KB.links <pinakes_core.kb.KB.links>`: it asks the plugins (the graph plugin's
``kb_links``, the entity plugin's ``entity_neighbours``) and :func:`follow_links` completes the
graph plugin's answer with shared-entity neighbours and the hop into other KBs
(:mod:`pinakes_core.manage.crosskb`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pinakes_core.config import Config, normalise_rel
from pinakes_core.errors import ConfigError, PinakesError, PluginMissingError
from pinakes_core.index.store import Store
from pinakes_core.manage.crosskb import Peers, extend_links, link_target
from pinakes_core.manage.schema import GENERIC_REL, match_relation
from pinakes_core.models import EntityNeighbour, LinksResult
from pinakes_core.read.sidecar import (
    append_link,
    read_sidecar,
    sidecar_path,
    write_skeleton,
)
from pinakes_core.search.arguments import check_depth, clean_query, clean_text
from pinakes_core.uri import SCHEME, parse_uri

if TYPE_CHECKING:
    from pinakes_core.index.embedding import Embedder, Vectors

__all__ = ["add_link", "check_link_arguments", "follow_links", "links"]


def add_link(
    root: Path,
    config: Config,
    conn: sqlite3.Connection,
    src_id: str,
    dst: str,
    rel: str,
    note: str | None = None,
    *,
    dst_kb: str | None,
    peers: Peers,
    resolve: Callable[[str], str],
    embedder: Callable[[], Embedder],
) -> tuple[str, str, str]:
    """Append a typed link ``src_id → dst`` to ``src_id``'s sidecar.

    Args:
        root: the KB root.
        config: its config (id, name and ``[schema]``).
        conn: its store.
        src_id: the linking document's ULID.
        dst: the target document (ULID, ``pnk://`` URI or path): in this KB, or in another
            KB of the fleet when it is a ``pnk://<kb>/<doc>`` URI naming that KB, a ULID found
            only there, or anything with ``dst_kb`` (see
            :func:`~pinakes_core.manage.crosskb.link_target`).
        rel: the relation as given: matched to ``[schema] relation_types`` by name, alias,
            inverse or label embedding (``"relies on"`` → ``depends-on``); a relation outside
            the schema is written normalised to lower-kebab and logged as a schema suggestion.
        note: an optional free-text note stored with the link.
        dst_kb: the fleet KB holding ``dst`` (name or KB ULID), when not this one.
        peers: the KBs cross-KB links resolve in.
        resolve: this KB's document lookup (raises ``DocumentNotFoundError``).
        embedder: gives the KB's model; called only when ``rel`` needs embedding.

    Returns:
        The sidecar path (KB-relative) and its text before and after.

    Raises:
        DocumentNotFoundError: if the target (or the other KB) is unknown.
        PinakesError: for a self-link or a link that already exists.
    """
    # The schema-suggestion log (tomlkit) and link extraction (markdown-it) load only here.
    from pinakes_core.paid.suggestions import record_schema_suggestion
    from pinakes_core.read.resolution import resolver

    other = link_target(dst, dst_kb, config=config, peers=peers, resolve=resolve)
    dst_kb_id, dst_id = (other.kb_id, other.doc_id) if other else (config.kb.id, resolve(dst))
    if src_id == dst_id and other is None:
        raise PinakesError("A document cannot link to itself.", "Pick a different target.")
    match = match_relation(config.schema_, embedder, clean_text(rel, "rel")[:200])
    inverse = config.schema_.relation_types[match.rel].inverse if match.inverted else None
    # An inverse ("cited-by") is schema vocabulary: written as such, followed backwards.
    rel = normalise_rel(inverse) if inverse else match.rel
    note = None if note is None else clean_text(note, "note")
    path = conn.execute("SELECT path FROM documents WHERE doc_id = ?", (src_id,)).fetchone()[0]
    side = sidecar_path(root / path)
    real_root = root.resolve()
    if not side.exists() and not side.is_symlink():
        write_skeleton(side, src_id)
    local = resolver(conn, config.kb.id, config.kb.name)
    for link in read_sidecar(side, root=real_root).links:
        if link.rel != rel:
            continue
        if other is None:
            same = local(path, link.to) == dst_id
        else:
            same = _names_doc(link.to, dst_id) and _names_kb(link.to, other.kb_id, peers)
        if same:
            raise PinakesError(
                f"{side.relative_to(root)} already links to {dst_id} as {rel!r}.",
                "Nothing to do.",
            )
    entry: dict[str, str] = {"to": f"{SCHEME}{dst_kb_id}/{dst_id}", "rel": rel}
    if note:
        entry["note"] = note
    before, after = append_link(side, entry, root=real_root)
    if not match.in_schema and rel != GENERIC_REL:
        record_schema_suggestion(root, "relation", rel, source=path, origin="link")
    return str(side.relative_to(root)), before, after


def _names_doc(target: str, doc_id: str) -> bool:
    """Whether an authored link target names document ``doc_id`` (as a URI or a bare ULID)."""
    try:
        uri = parse_uri(target if target.startswith(SCHEME) else SCHEME + target)
    except PinakesError:
        return False
    return uri.doc_id == doc_id


def _names_kb(target: str, kb_id: str, peers: Peers) -> bool:
    """Whether a ``pnk://`` target names the KB ``kb_id`` (by id or a fleet name), or no KB."""
    try:
        uri = parse_uri(target if target.startswith(SCHEME) else SCHEME + target)
    except PinakesError:
        return False
    if uri.kb is None or uri.kb == kb_id:
        return True
    peer = peers.find(uri.kb)
    return peer is not None and peer.kb_id == kb_id


def check_link_arguments(
    rel: str | None, direction: str, depth: int, query: str | None
) -> tuple[str | None, str, int, str | None]:
    """``links``' arguments checked and cleaned: ``(rel, direction, depth, query)``.

    Raises:
        ConfigError: if ``direction`` is not ``out``, ``in`` or ``both``.
        PinakesError: for a depth that is not a positive whole number, or text that is not.
    """
    if direction not in ("out", "in", "both"):
        raise ConfigError(f"direction {direction!r} is not one of out, in, both.")
    depth = check_depth(depth)
    rel = None if rel is None else clean_text(rel, "rel")[:200]
    query = None if query is None else clean_query(query)
    return rel, direction, depth, query


def links(
    kb: Any,
    doc: str,
    *,
    rel: str | None,
    direction: str,
    depth: int,
    query: str | None,
    resolve: Callable[[str], str],
    store: Callable[[], Store],
    config: Config,
    peers: Callable[[], Peers],
    embedder: Callable[[], Embedder],
) -> LinksResult:
    """Follow links from ``doc``: :meth:`KB.links <pinakes_core.kb.KB.links>`' whole job.

    The arguments are checked (:func:`check_link_arguments`) before ``doc`` is resolved; the
    plugins answer (``kb`` is what their hooks receive as ``kb``), and :func:`follow_links`
    completes the answer.

    Args:
        kb: the KB the links are followed in, passed to the plugins' hooks.
        doc: a ULID, ``pnk://`` URI or path.
        rel: only this relation; free text ("relies on") is matched to the KB's relations.
        direction: ``"out"``, ``"in"`` or ``"both"``.
        depth: hops to follow; served at most 3 whatever is asked.
        query: rank neighbours by similarity to this text and compute a confidence.
        resolve: this KB's document lookup (raises ``DocumentNotFoundError``).
        store: gives this KB's open store.
        config: its config.
        peers: gives the KBs cross-KB links resolve in.
        embedder: gives the KB's model; called only to rank other KBs' documents.

    Raises:
        PluginMissingError: if no installed plugin answers links.
        DocumentNotFoundError: if ``doc`` matches nothing.
    """
    from pinakes_core.plugins import plugin_manager

    rel, direction, depth, query = check_link_arguments(rel, direction, depth, query)
    doc_id = resolve(doc)
    hook = plugin_manager().hook
    return follow_links(
        hook.kb_links(kb=kb, doc_id=doc_id, rel=rel, direction=direction, depth=depth, query=query),
        shared=lambda: hook.entity_neighbours(kb=kb, doc_id=doc_id),
        store=store(),
        config=config,
        peers=peers,
        embed_query=lambda text: embedder().embed_query(text),
        direction=direction,
        query=query,
    )


def follow_links(
    found: LinksResult | None,
    *,
    shared: Callable[[], list[EntityNeighbour] | None],
    store: Store,
    config: Config,
    peers: Callable[[], Peers],
    embed_query: Callable[[str], Vectors],
    direction: str,
    query: str | None,
) -> LinksResult:
    """The graph plugin's ``links`` answer, with shared-entity neighbours and other KBs' links.

    Args:
        found: the answer of the plugin that follows links (``None``: no plugin answered).
        shared: the entity plugin's documents sharing entities with the start document.
        store: this KB's store.
        config: its config.
        peers: gives the KBs cross-KB links resolve in.
        embed_query: this KB's query embedding, called only to rank other KBs' documents.
        direction: ``"out"``, ``"in"`` or ``"both"``.
        query: rank neighbours by similarity to this text.

    Raises:
        PluginMissingError: if no installed plugin answers links.
    """
    if found is None:
        raise PluginMissingError(
            "Following links needs the pinakes-graph plugin.",
            "Install it: uv pip install pinakes-graph",
        )
    assert isinstance(found, LinksResult)
    neighbours = shared()
    if neighbours:
        found = found.model_copy(update={"entity_neighbours": neighbours})
    return extend_links(
        found,
        store=store,
        config=config,
        peers=peers(),
        embed_query=embed_query,
        direction=direction,
        query=query,
    )
