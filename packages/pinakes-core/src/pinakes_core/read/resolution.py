"""Resolving stored link targets to document ids (DESIGN §2, §6).

Targets resolve by ``pnk://`` id, path (relative to the linking page, the KB root or a
``content/`` folder), a site address or route a page declares (``permalink:``, ``url:``, a
Docusaurus ``id:`` or ``slug:``), file stem, title and alias; an unresolvable target is kept with
the reason (:data:`~pinakes_core.read.links.NO_SUCH_ID`, …), never dropped. :func:`resolve_all`
resolves a whole KB's ``links`` table at the end of a sync; :func:`resolver` resolves one target
(``pnk add-link``, a read); :func:`near_names` suggests names for a reference that names nothing.
What a link is, and how links are found in text, is :mod:`pinakes_core.read.links`.
"""

from __future__ import annotations

import json
import posixpath
import sqlite3
import unicodedata
from collections.abc import Callable, Iterator
from urllib.parse import unquote

from pinakes_core.errors import UriError
from pinakes_core.read.links import (
    DOC_SUFFIXES,
    IN_NOTE,
    NO_SUCH_ID,
    OTHER_KB,
    VAULT_PREFIX,
    link_kind,
)
from pinakes_core.uri import SCHEME, is_ulid, parse_uri

__all__ = ["NEAR_NAME_RATIO", "near_names", "resolve_all", "resolver"]

# Frontmatter keys that declare a page's site address, absolute from the site's root.
_ADDRESS_KEYS = ("permalink", "url")


def _fields(meta: str | None) -> dict[str, object]:
    """A document's stored frontmatter fields (``{}`` when there are none or they do not parse)."""
    try:
        fields = json.loads(meta or "{}")
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def _declared_address(fields: dict[str, object]) -> str | None:
    """The site address a document's frontmatter declares ("/docs/pages/"), if any.

    Only a literal address from the site root: a pattern (``/:categories/:title/``) or a full
    URL names no one page.
    """
    for key in _ADDRESS_KEYS:
        value = fields.get(key)
        if isinstance(value, str) and value.startswith("/") and ":" not in value:
            return value.strip()
    return None


def _route_names(path: str, fields: dict[str, object]) -> Iterator[tuple[str, str, bool]]:
    """``(route, root, full)`` per address a docs site gives the page at ``path`` by its name.

    Docusaurus publishes a page under its frontmatter ``id`` (``WatchPlugins.md`` with
    ``id: watch-plugins`` is ``/docs/watch-plugins``) or its ``slug:`` (relative to the
    page's folder, or from the docs root when it starts with ``/``), and its pages link to those
    routes. The docs root is some folder above the page, unknown here: each is yielded as a
    ``root`` with the ``route`` read from it; ``full`` marks the route read from the KB's top
    through the page's own folder, which a relative link (``[x](watch-plugins)``) names. An id
    that is a ULID is Pinakes' own identity, not an address; a value with ``:`` is a pattern.
    """
    folders = posixpath.dirname(path).split("/") if "/" in path else []
    names: list[tuple[str, bool]] = []  # (name, from the docs root)
    front_id, slug = fields.get("id"), fields.get("slug")
    if isinstance(front_id, str) and front_id.strip() and not is_ulid(front_id.strip().upper()):
        names.append((front_id.strip(), False))
    if isinstance(slug, str) and slug.strip().strip("/"):
        names.append((slug.strip().strip("/"), slug.strip().startswith("/")))
    for name, absolute in names:
        if ":" in name or name.startswith("."):
            continue
        for cut in range(len(folders), -1, -1):
            root = "/".join(folders[:cut])
            if absolute:
                yield name, root, False
            else:
                yield "/".join([*folders[cut:], name]), root, cut == 0


def _pretty_address(path: str) -> str:
    """The address a static site publishes the file at ``path`` at: ``guide/setup/``.

    A folder's own page (``index.md``, ``_index.md``, ``README.md``) is the folder's address.
    """
    stem = path.rsplit(".", 1)[0] if "." in posixpath.basename(path) else path
    if posixpath.basename(stem).lower() in ("index", "_index", "readme"):
        stem = posixpath.dirname(stem)
    return stem + "/" if stem else ""


def _site_key(address: str) -> str:
    """An address as pages are looked up by: no anchor, query, ``index.html`` or ``.html``.

    Case is kept: site addresses, like file paths on most hosts, are case-sensitive.
    """
    path = posixpath.normpath("/" + address.split("#", 1)[0].split("?", 1)[0]).strip("/")
    if path.endswith("index.html") or path.endswith("index.htm"):
        path = posixpath.dirname(path)
    elif path.lower().endswith((".html", ".htm")):
        path = path.rsplit(".", 1)[0]
    return path


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _specificity(part: str) -> int:
    """How many levels a wikilink part's name spells out: its ``/`` and ``.`` separators.

    ``Plugins/Templates`` and ``dendron.topic.tags`` name one file where ``Templates`` and
    ``Tags`` may be anyone's label; a file suffix and Dendron's vault prefix do not count.
    """
    name = VAULT_PREFIX.sub("", part.split("#", 1)[0].strip())
    if name.lower().endswith(DOC_SUFFIXES):
        name = name.rsplit(".", 1)[0]
    return name.count("/") + name.count(".")


class _Index:
    """Lookup tables over the KB's documents for resolving link targets."""

    def __init__(self, conn: sqlite3.Connection, kb_id: str, kb_name: str) -> None:
        self.kb = {kb_id, kb_name}
        self.ids: set[str] = set()
        self.paths: dict[str, str] = {}
        # lower key -> [(tier, path, doc_id)]: tier 0 names the file (path, stem), 1 its title
        # or an alias.
        self.names: dict[str, list[tuple[int, str, str]]] = {}
        # Folders a Zola "@/" link may start from: the KB root and every "content/" folder.
        self.content_roots: set[str] = {""}
        # Site addresses pages declare in frontmatter (Jekyll's "permalink: /docs/pages/"):
        # normalised address -> doc, and each such page's own address (relative links on a
        # built site are relative to it, not to the file).
        self.site: dict[str, str] = {}
        self.urls: dict[str, str] = {}
        # Docusaurus routes by frontmatter id or slug (_route_names): route -> [(root, doc)],
        # and the routes read from the KB's top, which relative links name.
        self.routes: dict[str, list[tuple[str, str]]] = {}
        self.route_paths: dict[str, str] = {}
        prefixes: dict[str, int] = {}  # "docs/" when pages at x.md declare "/docs/x/"
        for row in conn.execute(
            "SELECT doc_id, path, title, aliases, meta FROM documents ORDER BY path"
        ):
            doc_id, path = row[0], row[1]
            fields = _fields(row[4])
            address = _declared_address(fields)
            if address is not None:
                self.urls[path] = address
                key = _site_key(address)
                self.site.setdefault(key, doc_id)
                own = _site_key(_pretty_address(path))
                if key != own and key.endswith("/" + own):
                    prefixes[key[: -len(own)]] = prefixes.get(key[: -len(own)], 0) + 1
            for route, root, full in _route_names(path, fields):
                self.routes.setdefault(route, []).append((root, doc_id))
                if full:
                    self.route_paths.setdefault(route, doc_id)
            self.ids.add(doc_id)
            self.paths[path] = doc_id
            # A name written on macOS is NFD ("cafe" + U+0301), the link typed to it NFC: both
            # spellings of a path or name find it.
            self.paths.setdefault(_nfc(path), doc_id)
            at = f"/{path}".rfind("/content/")
            if at >= 0:
                self.content_roots.add(path[: at + len("content/")])
            stem = posixpath.basename(path).rsplit(".", 1)[0]
            files = {path.lower(), path.rsplit(".", 1)[0].lower(), stem.lower()}
            titles = {str(row[2]).lower(), *(a.lower() for a in json.loads(row[3]))}
            for tier, keys in enumerate((files, titles)):
                for key in {*keys, *map(_nfc, keys)}:
                    hits = self.names.setdefault(key, [])
                    if not any(d == doc_id for _, _, d in hits):
                        hits.append((tier, path, doc_id))

        # The site folder the KB's root is published at, when two or more pages say so.
        self.prefix = max(prefixes, key=lambda p: prefixes[p]) if prefixes else ""
        if prefixes.get(self.prefix, 0) < 2:
            self.prefix = ""

    def by_uri(self, target: str) -> tuple[str | None, str | None, str | None]:
        try:
            uri = parse_uri(target) if target.startswith(SCHEME) else parse_uri(SCHEME + target)
        except UriError as exc:
            return None, None, exc.message
        if uri.kb is not None and uri.kb not in self.kb:
            return uri.kb, uri.doc_id, OTHER_KB
        if uri.doc_id not in self.ids:
            return None, uri.doc_id, NO_SUCH_ID
        return None, uri.doc_id, None

    def by_path(self, src_path: str, target: str) -> tuple[str | None, str | None]:
        path = unquote(target.split("#", 1)[0].split("?", 1)[0]).strip()
        if not path:
            return None, "empty link target"
        if path.startswith("@/"):
            # Zola's internal link: the path from the site's content folder, which is the KB
            # root or a "content/" folder in it (a whole site repository).
            rel = posixpath.normpath(path[2:])
            if rel.startswith(".."):
                return None, f"{rel} is outside the KB"
            # The linking page's own content folder first (the longest that holds it), then
            # the others, shortest first: the same target whatever the set's order.
            own = max((r for r in self.content_roots if src_path.startswith(r)), key=len)
            for root in [own, *sorted(self.content_roots - {own}, key=lambda r: (len(r), r))]:
                doc = self._at(root + rel)
                if doc is not None:
                    return doc, None
            return None, f"no document at {rel} in the KB or a content/ folder"
        base = "" if path.startswith("/") else posixpath.dirname(src_path)
        norm = posixpath.normpath(posixpath.join(base, path.lstrip("/")))
        if norm.startswith(".."):
            doc = self._by_address(src_path, path)  # "../ubuntu/" from a page's own address
            return (doc, None) if doc else (None, f"{norm} is outside the KB")
        bases = [norm]
        if base and not path.startswith("."):
            # "blog/posts/a.md" written in blog/posts/b.md: site generators' frontmatter (an
            # MkDocs blog post's links:) and many hand-written links name pages from the root.
            # The linking folder is tried first; the root only when nothing is there.
            bases.append(posixpath.normpath(path))
        for here in bases:
            doc = self._at(here)
            if doc is not None:
                return doc, None
        doc = self._by_address(src_path, path) or self._by_route(src_path, path, norm)
        if doc is not None:
            return doc, None
        return None, f"no document at {norm}"

    def _by_route(self, src_path: str, path: str, norm: str) -> str | None:
        """The document a docs site's route names by frontmatter ``id`` or ``slug``.

        A relative route (``watch-plugins`` written in ``version-29.7/Configuration.md``) is
        read from the linking page's folder (``norm``), so it reaches the page of its own
        version. An absolute one (``/docs/watch-plugins``) is read with or without its first
        segment (the docs' route base, ``/docs/``) from a docs root the linking page lies in,
        the deepest first: the page of its own version again, and a page only another version
        has (removed from this one) leaves the link dangling.
        """
        if not self.routes or path.lower().endswith(DOC_SUFFIXES):
            return None
        if not path.startswith("/"):
            return self.route_paths.get(norm)
        route = posixpath.normpath(path).strip("/")
        keys = [route, route.split("/", 1)[1]] if "/" in route else [route]
        found = [
            (len(root), doc)
            for key in keys
            for root, doc in self.routes.get(key, ())
            if not root or src_path.startswith(root + "/")
        ]
        # The deepest root; among equals the first found (the whole route, then path order).
        return max(found, key=lambda f: f[0])[1] if found else None

    def _by_address(self, src_path: str, path: str) -> str | None:
        """The document whose declared site address ``path`` is, from ``src_path``'s page.

        A site whose pages declare their addresses (Jekyll's ``permalink:``, Hugo's ``url:``)
        links to those addresses: ``/docs/front-matter/`` is the page declaring it, wherever its
        file lies, and ``../ubuntu/`` is read from the linking page's own address, as a browser
        does. A path to a file (``../../README.md``) is no site address: read from the page's
        address it would climb less far than from the file and land on another document (a docs
        folder's own README instead of its repository's).
        """
        if path.lower().endswith(DOC_SUFFIXES):
            return None
        if not path.startswith("/"):
            # A page's address: declared, else the "pretty" one a site gives its file
            # (guide/setup.md is /guide/setup/), which relative links are written from.
            own = self.urls.get(src_path) or "/" + self.prefix + _pretty_address(src_path)
            folder = own if own.endswith("/") else posixpath.dirname(own)
            path = posixpath.join(folder, path)
        key = _site_key(path)
        doc = self.site.get(key)
        if doc is None and self.prefix and key.startswith(self.prefix):
            key = key[len(self.prefix) :]  # /docs/x/ on a site whose root folder is docs/
        return doc or (self._at(key) if key else None)

    def _at(self, norm: str) -> str | None:
        if norm == ".":  # the KB root ("/", "../" from a top folder): only its folder page
            norm = ""
        candidates = [norm] if norm else []
        if norm.lower().endswith((".html", ".htm")):
            # Static-site builds (VuePress, MkDocs, Hugo) link to the page the .md becomes.
            norm = norm.rsplit(".", 1)[0]
        if not norm.lower().endswith(DOC_SUFFIXES):
            candidates += [norm + s for s in DOC_SUFFIXES] if norm else []
            # A folder's page: README (forges, VuePress), index (MkDocs, Hugo's leaf bundles)
            # or _index (Hugo's sections: "/hugo-modules/" is hugo-modules/_index.md).
            candidates += [
                posixpath.join(norm, n) for n in ("README.md", "index.md", "index.mdx", "_index.md")
            ]
        for candidate in candidates:
            doc = self.paths.get(candidate) or self.paths.get(_nfc(candidate))
            if doc is not None:
                return doc
        return None

    def by_name(self, src_path: str, target: str) -> str | None:
        found = self._named(src_path, target)
        return found[1] if found else None

    def _named(self, src_path: str, target: str) -> tuple[int, str] | None:
        """``(tier, doc)`` of the document ``target`` names: tier 0 by its file, 1 by a title."""
        name = _nfc(VAULT_PREFIX.sub("", target.split("#", 1)[0].strip()).lower())
        if name.endswith(DOC_SUFFIXES):
            name = name.rsplit(".", 1)[0]
        hits = self.names.get(name) or self.names.get(name.replace(" ", "-")) or []
        if not hits:
            return None
        # A file of that name before a title or alias (a folder page titled by its folder
        # must not take [[projects]] from projects.md); among equals, one in the linking
        # document's folder.
        tier = min(t for t, _, _ in hits)
        best = [(p, d) for t, p, d in hits if t == tier]
        here = posixpath.dirname(src_path)
        return tier, next((d for p, d in best if posixpath.dirname(p) == here), best[0][1])

    def resolve(
        self, src_path: str, target: str, kind: str
    ) -> tuple[str | None, str | None, str | None]:
        """Return ``(dst_kb, dst_doc, reason)``; ``reason`` is ``None`` when resolved locally."""
        if target.startswith(SCHEME) or is_ulid(target.upper()):
            return self.by_uri(target)
        if kind == "wiki":
            parts = [p.strip() for p in target.split("|", 1)]
            if len(parts) == 2 and parts[0].startswith("#"):
                # Obsidian's [[#Heading|label]] is a place in this note whatever the label says
                # ("properties" is no link to Properties.md); Dendron's tag form [[#x|tags.x]]
                # names its dotted note by file.
                tagged = self._named(src_path, parts[1]) if "." in parts[1] else None
                if tagged is None or tagged[0] > 0:
                    return None, None, IN_NOTE
                return None, tagged[1], None
            named = [p for p in parts if p.split("#", 1)[0].strip()]
            # Obsidian, Foam and Logseq write [[target|label]], Dendron [[label|target]], and a
            # label may be another note's name ("Templates", "Tags"). The part naming a file
            # wins over one matching only a title; then the more specific name, a path or a
            # dotted hierarchy (Obsidian's [[Plugins/Templates|Templates]], Dendron's
            # [[Tags|dendron.topic.tags]]); then the left part.
            found = [
                (hit[0], -_specificity(part), i, hit[1])
                for i, part in enumerate(named)
                if (hit := self._named(src_path, part)) is not None
            ]
            if found:
                return None, min(found)[3], None
            if not any(parts):
                return None, None, "empty link target"
            if len(named) < len(parts) and not any("#" in p for p in named):
                # [[#Heading]], [[#^block]], Obsidian's [[#Heading|label]], Dendron's
                # [[label|#Heading]]: a place in the linking note itself, not a missing document
                # (while the part of [[Missing#Sec|#label]] holding its own anchor is a target).
                return None, None, IN_NOTE
            # Either part may be the target: name both ("no document named 'a' or 'b'").
            names = dict.fromkeys(VAULT_PREFIX.sub("", p.split("#", 1)[0]) for p in named)
            return None, None, "no document named " + " or ".join(map(repr, names))
        doc, reason = self.by_path(src_path, target)
        if doc is None and "/" not in target.split("#", 1)[0]:
            doc = self.by_name(src_path, target)  # a bare name in a Markdown link
            reason = None if doc else reason
        return None, doc, reason


def resolve_all(conn: sqlite3.Connection, kb_id: str, kb_name: str) -> set[str]:
    """Re-resolve every stored link against the current documents.

    Returns the ids of documents whose outgoing links changed resolution (the graph plugin
    re-derives their link edges). Runs inside the caller's transaction.
    """
    index = _Index(conn, kb_id, kb_name)
    changed: set[str] = set()
    updates = []
    for row in conn.execute(
        "SELECT l.rowid, l.src_doc, l.target, l.kind, l.dst_kb, l.dst_doc, l.reason, d.path "
        "FROM links l JOIN documents d ON d.doc_id = l.src_doc"
    ):
        dst_kb, dst_doc, reason = index.resolve(row[7], row[2], row[3])
        if (dst_kb, dst_doc, reason) != (row[4], row[5], row[6]):
            updates.append((dst_kb, dst_doc, reason, row[0]))
            changed.add(row[1])
    conn.executemany(
        "UPDATE links SET dst_kb = ?, dst_doc = ?, reason = ? WHERE rowid = ?", updates
    )
    return changed


def resolver(
    conn: sqlite3.Connection, kb_id: str, kb_name: str
) -> Callable[[str, str], str | None]:
    """Return ``resolve(src_path, target) -> doc_id | None`` over the KB's current documents."""
    index = _Index(conn, kb_id, kb_name)

    def resolve(src_path: str, target: str) -> str | None:
        _, doc, reason = index.resolve(src_path, target, link_kind(target))
        return doc if reason is None else None

    return resolve


#: How close (difflib's ratio, 0-1) a name must be to what was typed to be suggested.
NEAR_NAME_RATIO = 0.6


def near_names(conn: sqlite3.Connection, ref: str, limit: int = 3) -> list[str]:
    """Paths of the documents a mistyped reference may mean, closest first (at most ``limit``).

    Compared, case aside, with every document's path, file name without its suffix, title and
    aliases (difflib's ratio at least :data:`NEAR_NAME_RATIO`): ``0002-retry-polcy`` suggests
    ``decisions/0002-retry-policy.md``. For an error's hint; reads every document's names.
    """
    import difflib

    wanted = _nfc(ref.strip()).lower()
    if not wanted or len(wanted) > 300:
        return []
    owners: dict[str, list[str]] = {}
    for path, title, aliases in conn.execute("SELECT path, title, aliases FROM documents"):
        stem = posixpath.splitext(posixpath.basename(path))[0]
        for name in {path, stem, title, *json.loads(aliases or "[]")}:
            owners.setdefault(_nfc(str(name)).lower(), []).append(path)
    close = difflib.get_close_matches(wanted, list(owners), n=limit * 2, cutoff=NEAR_NAME_RATIO)
    found = dict.fromkeys(path for name in close for path in sorted(owners[name]))
    return list(found)[:limit]
