"""Graph census and links-API latency on synced KBs (issue: the free graph).

For each KB: edge counts per kind, the five highest-degree tag/folder hubs, the time of a full
edge derivation (forced by clearing the derivation marker, then one sync), store size, and
``KB.links`` latency p50 / p95 at depth 1 and 3 over up to 50 documents.

    uv run python benchmarks/graph_stats.py PATH [PATH ...]    # each PATH a synced KB
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from pinakes_core import KB


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure(root: Path) -> None:
    kb = KB.open(root)
    kb.sync()
    store = kb.store()
    with store.transaction() as conn:
        store.set_meta(conn, "graph_serial", "-1")  # force a full derivation on the next sync
    t0 = time.perf_counter()
    kb.sync()
    derive = time.perf_counter() - t0
    conn = kb.store().conn
    census = conn.execute(
        "SELECT kind, COUNT(*) FROM edges GROUP BY kind ORDER BY COUNT(*) DESC"
    ).fetchall()
    hubs = conn.execute(
        "SELECT n.kind, n.label, COUNT(*) FROM edges e JOIN nodes n ON n.node_id = e.src "
        "WHERE n.kind IN ('tag', 'dir') GROUP BY e.src ORDER BY COUNT(*) DESC LIMIT 5"
    ).fetchall()
    docs = [r[0] for r in conn.execute("SELECT doc_id FROM documents ORDER BY doc_id LIMIT 50")]
    latency = {}
    for depth in (1, 3):
        times = []
        for doc in docs:
            start = time.perf_counter()
            kb.links(doc, depth=depth)
            times.append((time.perf_counter() - start) * 1000)
        latency[depth] = (statistics.median(times), percentile(times, 95))
    status = kb.status()
    print(
        f"### {root.name}: {status.documents} documents, {status.chunks} chunks, store {status.store_bytes / 1048576:.1f} MB"
    )
    print(f"full edge derivation (sync with nothing else to do): {derive:.1f} s")
    print("edges: " + ", ".join(f"{k} {n:,}" for k, n in census))
    print("top hubs: " + ", ".join(f"{k} {label!r} {n}" for k, label, n in hubs))
    for depth, (p50, p95) in latency.items():
        print(f"links() depth {depth}: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kbs", nargs="+", type=Path)
    for root in parser.parse_args().kbs:
        measure(root)


if __name__ == "__main__":
    main()
