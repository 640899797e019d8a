"""A KB's status: counts, model, schema, and how stale the index is (``pnk status``).

Staleness is what the next sync would find: files new, changed or removed since the last one,
compared by stat as sync compares them (a file written in the last sync's clock tick is read
and hashed, as sync does). Nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pinakes_core.config import Config
from pinakes_core.index.store import SCHEMA_VERSION, Store
from pinakes_core.models import Status

__all__ = ["kb_status"]


def kb_status(
    root: Path, config: Config, *, store: Callable[[], Store | None], size: Callable[[], int]
) -> Status:
    """Counts, model, schema and staleness (files new, changed or removed since last sync).

    Args:
        root: the KB root.
        config: its config.
        store: gives the KB's open store, or ``None`` when it was never synced; called once,
            after the folder was scanned.
        size: gives the bytes the index takes where it lives
            (:meth:`IndexPlace.size <pinakes_core.index.place.IndexPlace.size>`).
    """
    # Document scanning and sync's change tests load only for a status (issue 14).
    from pinakes_core.read.documents import scan

    base: dict[str, Any] = {"name": config.kb.name, "kb_id": config.kb.id, "root": str(root)}
    entries, _ = scan(root, config.sync)
    opened = store()
    if opened is None:
        return Status(
            **base,
            synced=False,
            documents=0,
            chunks=0,
            vectors=0,
            model=None,
            dim=None,
            schema_version=None,
            last_sync=None,
            stale={"new": len(entries), "changed": 0, "removed": 0},
            store_bytes=0,
        )
    from pinakes_core.index.sync import is_racy, racy_changed, racy_cutoff

    conn = opened.conn
    rows = {
        r[0]: tuple(r[1:])
        for r in conn.execute(
            "SELECT path, mtime_ns, size, sidecar_mtime_ns, sidecar_size, content_hash, "
            "sidecar_hash FROM documents"
        )
    }
    seen = {e.rel for e in entries}
    # A file whose stat is as stored but that was written in the last sync's clock tick
    # is read and hashed, as the next sync will (racily clean, as git calls it).
    racy = racy_cutoff(opened.get_meta("sync_started"))
    limit = int(config.sync.max_file_mb * 1024 * 1024)
    changed = sum(
        1
        for e in entries
        if e.rel in rows
        and (
            rows[e.rel][:4] != e.stamp
            or (is_racy(e, racy) and racy_changed(e, root.resolve(), limit, *rows[e.rel][4:]))
        )
    )

    def count(table: str) -> int:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    last = opened.get_meta("last_sync")
    skipped = json.loads(opened.get_meta("skipped_files") or "{}")
    dim = opened.get_meta("dim")
    ner = opened.get_meta("ner_settings") is not None  # the NER layer was derived
    mentions = conn.execute("SELECT COUNT(*) FROM edges WHERE kind = 'mentions'").fetchone()
    return Status(
        **base,
        synced=True,
        documents=count("documents"),
        chunks=count("chunks"),
        vectors=count("vectors"),
        model=opened.get_meta("model_id"),
        dim=int(dim) if dim else None,
        schema_version=int(opened.get_meta("schema_version") or SCHEMA_VERSION),
        last_sync=float(last) if last else None,
        stale={
            "new": sum(
                1
                for e in entries
                if e.rel not in rows
                and tuple(skipped.get(e.rel, ())) != e.stamp  # skipped as it is
            ),
            "changed": changed,
            "removed": len(rows.keys() - seen),
        },
        store_bytes=size(),
        entities=int(conn.execute("SELECT COUNT(*) FROM nodes WHERE kind = 'entity'").fetchone()[0])
        if ner
        else None,
        mentions=int(mentions[0]) if ner else None,
    )
