"""``pnk doctor``: what is wrong or worth knowing about a KB, and the safe repairs (DESIGN §6, §13).

Core checks the truth layer and the store (sidecars, ids, links, schema, model, size); plugins
add their own checks through the ``doctor_checks`` hook (the graph plugin reports hubs).
Repairs never touch a document and never delete a sidecar without the caller's consent.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from pinakes_core.config import Config
from pinakes_core.derived import STORE_DIR, store_problems
from pinakes_core.errors import SidecarError
from pinakes_core.index.place import IndexPlace
from pinakes_core.index.store import SCHEMA_VERSION, Store
from pinakes_core.intake import display_name
from pinakes_core.manage.crosskb import Peers, cross_rows, doctor_findings
from pinakes_core.manage.hooks import hook_findings
from pinakes_core.manage.schema import schema_findings
from pinakes_core.models import DoctorFinding, DoctorReport
from pinakes_core.read.documents import MAX_DEPTH, never_indexed, not_included_hint, scan
from pinakes_core.read.links import IN_NOTE, OTHER_KB
from pinakes_core.read.sidecar import SIDECAR_SUFFIX, read_sidecar, write_sidecar
from pinakes_core.uri import new_ulid

__all__ = ["run_doctor"]

_LIST_CAP = 20  # items listed per finding; the message carries the full count


def _sidecars(root: Path) -> list[Path]:
    """Every sidecar under ``root`` (not in dot-folders, not through symlinked folders).

    Iterative and bounded in depth like :func:`~pinakes_core.read.documents.scan`.
    """
    found = []
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                children = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        for child in children:
            if display_name(child.name) != child.name:
                continue  # not valid UTF-8: sync skips it and says so
            if child.is_dir(follow_symlinks=False):
                if not never_indexed(child.name) and depth < MAX_DEPTH:
                    stack.append((Path(child.path), depth + 1))
            elif child.name.endswith(SIDECAR_SUFFIX):
                found.append(Path(child.path))
    return sorted(found)


def run_doctor(
    root: Path,
    config: Config,
    *,
    store: Callable[[], Store],
    place: IndexPlace,
    peers: Callable[[], Peers],
    plugin_checks: Callable[[Store], Iterable[list[DoctorFinding]]],
    fix: bool = False,
    remove_orphans: bool | Callable[[int], bool] = False,
) -> DoctorReport:
    """Run every check; with ``fix``, repair what is safe and say what was done.

    Args:
        root: the KB root.
        config: its config.
        store: opens (or gives the open) store; called only when the KB was synced.
        place: where the index lives (whether it exists, its size).
        peers: gives the KBs its cross-KB links resolve in; called only when synced.
        plugin_checks: the plugins' ``doctor_checks`` over the store, one list per plugin.
        fix: give a copied sidecar (duplicate id) a new ULID, and with ``remove_orphans`` delete
            sidecars whose document is gone.
        remove_orphans: the caller's consent to delete orphan sidecars: a bool, or a function
            asked with their number once they are found (a CLI prompt).
    """
    from pinakes_core.index.sync import model_id_for

    unsafe = store_problems(root)
    if unsafe:  # every other check reads or writes the index: this comes first, alone
        return DoctorReport(
            findings=[
                DoctorFinding(
                    check="unsafe-index-folder",
                    severity="error",
                    message=f"{root / STORE_DIR} could lead Pinakes to write outside the KB, so "
                    "nothing is synced or searched until it is fixed: remove it (a link is "
                    "removed, not what it points at), or take it out of git, then sync again.",
                    items=unsafe[:_LIST_CAP],
                )
            ]
        )
    real_root = root.resolve()
    findings: list[DoctorFinding] = []
    fixed: list[str] = []
    not_included: Counter[str] = Counter()
    entries, _ = scan(root, config.sync, not_included=not_included)
    documents = {e.sidecar for e in entries}
    hint = not_included_hint(not_included)
    if hint is not None:
        findings.append(DoctorFinding(check="not-included", severity="info", message=hint))

    ids: dict[str, list[Path]] = defaultdict(list)
    orphans: list[Path] = []
    malformed: list[str] = []
    broken: list[Path] = []
    for side in _sidecars(root):
        document = side.with_name(side.name[: -len(SIDECAR_SUFFIX)])
        try:
            os.lstat(document)
        except FileNotFoundError:
            orphans.append(side)
            continue
        except OSError:  # it cannot be looked at: not known to be gone
            continue
        if not document.exists():
            # A symlinked note whose target is missing for now (an unmounted drive): the
            # note is still there, so its sidecar is not an orphan.
            broken.append(document)
            continue
        try:
            sidecar = read_sidecar(side, root=real_root)
        except SidecarError as exc:
            malformed.append(str(exc))
            continue
        if sidecar.id and side in documents:
            ids[sidecar.id].append(side)

    indexed: dict[str, str] = {}
    if place.exists():
        indexed = {r[0]: r[1] for r in store().conn.execute("SELECT doc_id, path FROM documents")}
    duplicates = {i: paths for i, paths in ids.items() if len(paths) > 1}
    if duplicates:
        items = [
            f"{i}: {', '.join(str(p.relative_to(root)) for p in paths)}"
            for i, paths in duplicates.items()
        ]
        findings.append(
            DoctorFinding(
                check="duplicate-ids",
                severity="error",
                message=f"{len(duplicates)} id(s) are used by more than one sidecar (a copied sidecar); "
                "the copy is left out of the index.",
                items=items[:_LIST_CAP],
                fixable=True,
            )
        )
        if fix:
            for doc_id, paths in duplicates.items():
                owner = indexed.get(doc_id)
                keep = next(
                    (
                        p
                        for p in paths
                        if owner and str(p.relative_to(root)) == owner + SIDECAR_SUFFIX
                    ),
                    None,
                )
                if keep is None:  # no index says whose it is: path order must not decide
                    fixed.append(
                        f"left {doc_id} alone: no index says which of "
                        f"{', '.join(str(p.relative_to(root)) for p in paths[:3])} had it first; "
                        "keep it in one sidecar and write a new id into the others"
                    )
                    continue
                for copy in paths:
                    if copy != keep:
                        fresh = new_ulid()
                        write_sidecar(copy, {"id": fresh}, root=real_root)
                        fixed.append(
                            f"gave {copy.relative_to(root)} a new id {fresh} (it repeated {doc_id})"
                        )
    if broken:
        findings.append(
            DoctorFinding(
                check="dangling-documents",
                severity="info",
                message=f"{len(broken)} document(s) are symlinks to something missing (an "
                "unmounted drive?); their sidecars are kept.",
                items=[str(p.relative_to(root)) for p in broken[:_LIST_CAP]],
            )
        )
    if orphans:
        findings.append(
            DoctorFinding(
                check="orphan-sidecars",
                severity="warning",
                message=f"{len(orphans)} sidecar(s) have no document beside them (moved or deleted).",
                items=[str(p.relative_to(root)) for p in orphans[:_LIST_CAP]],
                fixable=True,
            )
        )
        consent = (
            remove_orphans(len(orphans)) if callable(remove_orphans) and fix else remove_orphans
        )
        if fix and consent:
            for side in orphans:
                side.unlink()
                fixed.append(f"removed orphan sidecar {side.relative_to(root)}")
    if malformed:
        findings.append(
            DoctorFinding(
                check="malformed-sidecars",
                severity="error",
                message=f"{len(malformed)} sidecar(s) do not parse; their documents are left out until fixed by hand.",
                items=malformed[:_LIST_CAP],
            )
        )

    if not place.exists():
        findings.append(
            DoctorFinding(
                check="store", severity="info", message="The KB was never synced; run `pnk sync`."
            )
        )
    else:
        opened = store()
        conn = opened.conn
        version = opened.get_meta("schema_version")
        if version != str(SCHEMA_VERSION):
            findings.append(
                DoctorFinding(
                    check="schema",
                    severity="warning",
                    message=f"The store has schema {version}, this version uses {SCHEMA_VERSION}; the next sync rebuilds it.",
                )
            )
        stored, configured = opened.get_meta("model_id"), model_id_for(config)
        if stored != configured:
            findings.append(
                DoctorFinding(
                    check="model",
                    severity="warning",
                    message=f"Vectors are from {stored!r} but [embedding] model is {configured!r}; the next sync re-embeds.",
                )
            )
        # Links into other KBs are resolved through the fleet and reported on their own.
        via_fleet, cross_dangling = cross_rows(conn, peers())
        dangling = [
            r
            for r in conn.execute(
                "SELECT l.rowid, d.path, l.target, l.reason, l.kind FROM links l JOIN documents d "
                "ON d.doc_id = l.src_doc WHERE l.reason IS NOT NULL AND l.reason NOT IN (?, ?) ORDER BY d.path",
                (OTHER_KB, IN_NOTE),
            )
            if r[0] not in via_fleet
        ]
        total_links = conn.execute("SELECT COUNT(*) FROM links").fetchone()[0]
        if (root / "logseq" / "config.edn").is_file():
            # In a Logseq graph a [[reference]] names a page that exists once it is opened: most
            # name pages nobody wrote (650 of 947 "dangling" on Logseq's own docs graph).
            unwritten = [r for r in dangling if r[4] == "wiki"]
            dangling = [r for r in dangling if r[4] != "wiki"]
            if unwritten:
                findings.append(
                    DoctorFinding(
                        check="unwritten-pages",
                        severity="info",
                        message=(
                            f"{len(unwritten)} [[references]] name Logseq pages that have no file "
                            "yet (Logseq makes a page when one is opened); they are not broken."
                        ),
                        items=[f"{r[1]}: {r[2]}" for r in unwritten[:_LIST_CAP]],
                    )
                )
        if dangling:
            findings.append(
                DoctorFinding(
                    check="dangling-links",
                    severity="warning",
                    message=f"{len(dangling)} of {total_links} links do not resolve to a document.",
                    items=[f"{r[1]}: {r[2]} ({r[3]})" for r in dangling[:_LIST_CAP]],
                )
            )
        findings += doctor_findings(cross_dangling, len(via_fleet))
        docs = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        lonely = [
            r[0]
            for r in conn.execute(
                "SELECT path FROM documents d WHERE NOT EXISTS (SELECT 1 FROM links WHERE src_doc = d.doc_id "
                "AND reason IS NULL) AND NOT EXISTS (SELECT 1 FROM links WHERE dst_doc = d.doc_id AND reason IS NULL) "
                "ORDER BY path"
            )
        ]
        if lonely:
            findings.append(
                DoctorFinding(
                    check="zero-link-documents",
                    severity="info",
                    message=f"{len(lonely)} of {docs} documents ({len(lonely) / max(docs, 1):.0%}) link nowhere and "
                    "nothing links to them; a link or two makes them reachable by graph search.",
                    items=lonely[:_LIST_CAP],
                )
            )
        size = place.size()
        chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        findings.append(
            DoctorFinding(
                check="store-size",
                severity="info",
                message=f"The store holds {docs} documents and {chunks} chunks in {size / 1048576:.1f} MB.",
            )
        )
        for group in plugin_checks(opened):
            findings.extend(group)
        findings.extend(
            schema_findings(config.schema_, conn)
        )  # relations outside [schema] (issue 16)
    findings.extend(hook_findings(root))  # git hooks keeping the index fresh (issue 16)

    from pinakes_core.paid.budget import budget_findings  # the paid path's ledger (never litellm)

    findings.extend(budget_findings(root, config))
    return DoctorReport(findings=findings, fixed=fixed)
