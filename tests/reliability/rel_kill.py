"""The kill-9 harness: kill a sync at a chosen point, heal it, compare with a clean rebuild.

A *kill point* is a place where a sync's durable state changes: just before and just after
every COMMIT of the store, and just before and just after every rename (sidecar writes, the
store swap of a rebuild). The child process counts the points it passes and SIGKILLs itself at
the chosen one, so every point is hit deterministically; a dry run counts them first.

After a kill the next sync must heal the store, and the healed store must equal, table by
table, a store rebuilt from scratch out of the same files. Nothing the user wrote may change:
every file that existed keeps its bytes, and the only new files are sidecar skeletons.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rel_helpers import sync
from rel_watchdog import Outcome, run_guarded

from conftest import FakeHashEmbedder, make_kb, write_files
from pinakes_core import KB
from pinakes_core.index.store import Store
from pinakes_core.read.sidecar import SIDECAR_SUFFIX

# The KB before the sync that gets killed: synced once, with sidecars.
BEFORE: dict[str, str | bytes] = {
    "a.md": "---\ntags: [alpha, shared]\n---\n# A\n\nA links to [[b]] and [c](c.md).\n",
    "b.md": "# B\n\nB text about consensus.\n\n## More\n\nSecond section of B.\n",
    "c.md": "# C\n\nC is linked from A and D.\n",
    "d.txt": "Plain text D links nowhere.\n\nSecond paragraph.\n",
    "notes/e.md": "# E\n\n" + "\n\n".join(f"Paragraph {i} of E. " * 12 for i in range(12)),
    "notes/f.md": "# F\n\nF links to [[missing-note]] and [[g]] (not there yet).\n",
    "notes/r.md": "# R\n\nR will be renamed with its sidecar.\n",
    "notes/m.md": "# M\n\nM will move without its sidecar.\n",
}


def _changes(root: Path) -> None:
    """What changed on disk since the last sync: every path a sync takes."""
    write_files(
        root,
        {
            "a.md": "---\ntags: [alpha, changed]\n---\n# A\n\nA now links to [[b]] only.\n",
            "g.md": "# G\n\nG is new and links to [C](c.md).\n",  # new: no sidecar yet
            "h/deep/h.md": "# H\n\nH is new too, tagged #later.\n",
        },
    )
    side = root / "b.md.pnk.yaml"
    side.write_text(
        side.read_text() + "tags: [sidecar-tag]\nlinks:\n  - to: d.txt\n    rel: cites\n"
    )
    (root / "c.md").unlink()  # deleted: A's and G's links to it now dangle
    (root / "c.md.pnk.yaml").unlink()
    (root / "notes/r.md").rename(root / "notes/r2.md")  # renamed with its sidecar
    (root / "notes/r.md.pnk.yaml").rename(root / "notes/r2.md.pnk.yaml")
    (root / "notes/m.md").rename(root / "m-moved.md")  # moved, sidecar left behind
    os.utime(root / "notes/f.md", ns=(1_700_000_000_000_000_000,) * 2)  # touched only


def build_template(base: Path) -> Path:
    """Make the KB at ``base``, sync it, then change its files (not synced)."""
    root = make_kb(base, BEFORE, name="killed")
    sync(root)
    _changes(root)
    return root


def copy_kb(template: Path, target: Path) -> Path:
    """Copy a KB folder (store included) keeping mtimes to the nanosecond."""
    shutil.copytree(template, target, symlinks=True)
    return target


class KillPoints:
    """Counts kill points in this process and SIGKILLs it at number ``at`` (1-based)."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.passed: list[str] = []

    def point(self, label: str) -> None:
        self.passed.append(label)
        if self.at is not None and len(self.passed) == self.at:
            os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Wrap the store's transactions and ``os.replace`` (run only in a child process)."""
        point = self.point

        @contextlib.contextmanager
        def transaction(conn: sqlite3.Connection) -> Iterator[None]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            where = _caller()
            point(f"{where}: in the transaction, before COMMIT")
            conn.execute("COMMIT")
            point(f"{where}: after COMMIT")

        Store._tx = staticmethod(transaction)  # type: ignore[method-assign,assignment]
        real_replace = os.replace

        def replace(src: Any, dst: Any, **kwargs: Any) -> None:
            name = Path(os.fsdecode(dst)).name
            point(f"before renaming onto {name}")
            real_replace(src, dst, **kwargs)
            point(f"after renaming onto {name}")

        os.replace = replace  # type: ignore[assignment]


def _caller() -> str:
    """The first function outside the store and contextlib that is running a transaction."""
    frame = sys._getframe(2)
    while frame is not None and (
        frame.f_code.co_filename.endswith(("store.py", "contextlib.py", "rel_kill.py"))
    ):
        frame = frame.f_back  # type: ignore[assignment]
    return frame.f_code.co_name if frame is not None else "?"


def killed_sync(root: Path, at: int | None, *, rebuild: bool = False) -> Outcome:
    """Sync ``root`` in a forked child that dies at kill point ``at`` (``None``: count them)."""

    def child() -> list[str]:
        points = KillPoints(at)
        points.install()
        sync(root, rebuild=rebuild)
        return points.passed

    return run_guarded(child, timeout=120)


def _rows(conn: sqlite3.Connection, sql: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in conn.execute(sql))


def snapshot(root: Path) -> dict[str, Any]:
    """Every table of the store in a form that does not depend on row ids or timing."""
    conn = sqlite3.connect(Store.location(root))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES ('integrity-check')")
        node_key = "(SELECT kind || ':' || key FROM nodes WHERE node_id = {})"
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        return {
            "documents": _rows(
                conn,
                "SELECT doc_id, path, title, tags, aliases, content_hash, sidecar_hash, mtime_ns, "
                "size, sidecar_mtime_ns, sidecar_size, chunk_count FROM documents",
            ),
            "doc_tags": _rows(conn, "SELECT doc_id, tag FROM doc_tags"),
            "chunks": _rows(
                conn,
                "SELECT doc_id, ordinal, heading_path, text, embed_hash, start_line, end_line, "
                "tokens FROM chunks",
            ),
            "chunks_fts": _rows(
                conn,
                "SELECT c.doc_id, c.ordinal, f.title, f.heading, f.text FROM chunks_fts f "
                "LEFT JOIN chunks c ON c.chunk_id = f.rowid",
            ),
            "vectors": _rows(conn, "SELECT embed_hash, hex(vector) FROM vectors"),
            "links": _rows(
                conn,
                "SELECT src_doc, target, kind, dst_kb, dst_doc, rel, origin, reason FROM links",
            ),
            "nodes": _rows(conn, "SELECT kind, key, label FROM nodes"),
            "edges": _rows(
                conn,
                f"SELECT {node_key.format('src')}, {node_key.format('dst')}, kind, "
                "round(weight, 9) FROM edges",
            ),
            "node_vectors": _rows(
                conn, f"SELECT {node_key.format('node_id')}, embed_hash FROM node_vectors"
            ),
            "meta": {
                key: meta.get(key)
                for key in ("schema_version", "model_id", "dim", "kb_id", "links_resolved")
            }
            | {"graph_current": meta.get("graph_serial") == meta.get("sync_serial")},
        }
    finally:
        conn.close()


def differences(healed: dict[str, Any], rebuilt: dict[str, Any]) -> list[str]:
    """The names of the tables that differ."""
    return [name for name in rebuilt if healed.get(name) != rebuilt[name]]


def _is_skeleton(rel: str, data: bytes) -> bool:
    """Whether ``rel`` is a sidecar Pinakes wrote holding nothing but ``id: …``."""
    return rel.endswith(SIDECAR_SUFFIX) and data.startswith(b"id: ") and data.count(b"\n") == 1


def user_files(root: Path) -> dict[str, str]:
    """Hash of every file outside ``.pinakes/`` (the truth layer); skeletons are marked."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts[0] == ".pinakes" or not path.is_file():
            continue
        data = path.read_bytes()
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        key = rel.as_posix()
        found[key] = f"skeleton {digest}" if _is_skeleton(key, data) else digest
    return found


def changed_user_bytes(before: dict[str, str], root: Path) -> list[str]:
    """Files whose bytes changed or that went, and new files that are not sidecar skeletons.

    A skeleton whose document is gone may go too: sync removes a sidecar that held nothing but
    the id of a deleted or moved document (issue 17), and nothing the user wrote is in it.
    """
    after = user_files(root)
    problems = []
    for rel, digest in before.items():
        if after.get(rel) == digest:
            continue
        orphan = (
            digest.startswith("skeleton ") and not (root / rel[: -len(SIDECAR_SUFFIX)]).exists()
        )
        if not (orphan and rel not in after):
            problems.append(f"changed or removed: {rel}")
    problems += [
        f"new file that is not a sidecar skeleton: {rel}"
        for rel in sorted(after.keys() - before.keys())
        if not after[rel].startswith("skeleton ")
    ]
    return problems


def heal_and_compare(root: Path, before: dict[str, str]) -> list[str]:
    """Sync after a kill, then rebuild; return what is inconsistent (empty when all is well)."""
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    healed = snapshot(root)
    problems = changed_user_bytes(before, root)
    sync(root, rebuild=True)
    problems += [
        f"table {name} differs from a clean rebuild" for name in differences(healed, snapshot(root))
    ]
    return problems


def describe(passed: list[str], at: int) -> str:
    """A readable name for kill point ``at``."""
    return f"#{at} {passed[at - 1]}" if 0 < at <= len(passed) else f"#{at}"


def dump(snapshot_a: dict[str, Any], snapshot_b: dict[str, Any], table: str) -> str:
    """The rows of one table that differ between two snapshots (for failure messages)."""
    a, b = snapshot_a.get(table), snapshot_b.get(table)
    if isinstance(a, list) and isinstance(b, list):
        return json.dumps(
            {
                "only healed": [r for r in a if r not in b][:5],
                "only rebuilt": [r for r in b if r not in a][:5],
            },
            default=str,
        )
    return json.dumps({"healed": a, "rebuilt": b}, default=str)
