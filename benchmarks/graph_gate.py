"""Reachability diagnostics for the graph-channel gate (research/pinakes-approach.txt §9).

For every multi-hop question of a golden set, take the hybrid (bm25 + dense) fused top-10 chunks
as seeds and ask where the relevant documents the top 5 missed actually lie:

- reachable ceiling: share of multi-hop questions whose every relevant document is a seed
  document or within 2 logical hops of one (links either way = 1 hop; documents sharing a
  tag or folder = 1 hop through the hub, which is itself free);
- the same ceiling through authored/text links only (hubs excluded);
- beyond-2-hop share: questions with a relevant document further than 2 hops;
- membership-only share: questions whose missed relevant document is already a seed
  document (expansion cannot add it: a root's own document is excluded by design).

    uv run python benchmarks/graph_gate.py --kb golden/kb --questions golden/questions.jsonl
"""

from __future__ import annotations

import argparse
import json
import posixpath
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

from pinakes_core import KB
from pinakes_core.manage.eval import load_questions


def doc_graph(kb: KB, *, hubs: bool) -> dict[str, set[str]]:
    """Document adjacency: resolved links both ways, plus shared tags and folders if ``hubs``."""
    conn = kb.store().conn
    adjacent: dict[str, set[str]] = defaultdict(set)
    for src, dst in conn.execute(
        "SELECT src_doc, dst_doc FROM links WHERE reason IS NULL AND dst_doc != src_doc"
    ):
        adjacent[src].add(dst)
        adjacent[dst].add(src)
    if hubs:
        groups: dict[str, set[str]] = defaultdict(set)
        for doc, path in conn.execute("SELECT doc_id, path FROM documents"):
            groups["dir:" + posixpath.dirname(path)].add(doc)
        for doc, tag in conn.execute("SELECT doc_id, tag FROM doc_tags"):
            groups["tag:" + tag].add(doc)
        for members in groups.values():
            for doc in members:
                adjacent[doc] |= members - {doc}
    return adjacent


def hops(adjacent: dict[str, set[str]], seeds: set[str], limit: int = 6) -> dict[str, int]:
    """Breadth-first distance of every document reachable from ``seeds`` (0 for seeds)."""
    distance = dict.fromkeys(seeds, 0)
    layer = set(seeds)
    for depth in range(1, limit + 1):
        layer = {n for d in layer for n in adjacent.get(d, ())} - distance.keys()
        if not layer:
            break
        distance.update(dict.fromkeys(layer, depth))
    return distance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=Path("golden/kb"))
    parser.add_argument("--questions", type=Path, default=Path("golden/questions.jsonl"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "kb"
        shutil.copytree(args.kb, root, ignore=shutil.ignore_patterns(".pinakes"))
        kb = KB.open(root)
        kb.sync()
        paths = {p: d for d, p in kb.store().conn.execute("SELECT doc_id, path FROM documents")}
        graphs = {"hubs": doc_graph(kb, hubs=True), "links": doc_graph(kb, hubs=False)}
        questions = [q for q in load_questions(args.questions) if q.cls == "multi-hop"]
        counts = {"questions": len(questions), "top5_complete": 0, "membership_only": 0}
        for name in graphs:
            counts[f"ceiling_{name}"] = 0
            counts[f"beyond_2_{name}"] = 0
        for q in questions:
            result = kb.search(q.query, k=50, channels=["bm25", "dense"])
            docs = list(dict.fromkeys(h.doc_id for h in result.hits))
            seed_docs = set(dict.fromkeys(h.doc_id for h in result.hits[:10]))
            wanted = {paths[p] for p in q.relevant if p in paths}
            missed = wanted - set(docs[:5])
            counts["top5_complete"] += not missed
            counts["membership_only"] += bool(missed) and missed <= seed_docs
            for name, graph in graphs.items():
                distance = hops(graph, seed_docs)
                counts[f"ceiling_{name}"] += all(distance.get(d, 99) <= 2 for d in wanted)
                counts[f"beyond_2_{name}"] += any(distance.get(d, 99) > 2 for d in wanted)
        shares = {
            k: round(v / counts["questions"], 3) for k, v in counts.items() if k != "questions"
        }
        if args.json:
            print(json.dumps({"counts": counts, "shares": shares}))
            return
        print(f"multi-hop questions: {counts['questions']}")
        for key, value in shares.items():
            print(f"  {key:22s} {value:.3f} ({counts[key]})")


if __name__ == "__main__":
    main()
