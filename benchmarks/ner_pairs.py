"""Choose the near-duplicate threshold of pinakes-ner from labelled entity pairs.

Candidate pairs are what the merge considers: two entity keys found by the real spaCy pipeline
in a corpus, one containing the other as whole words ("obama" / "barack obama"). Each pair's
label similarity is the cosine of the two labels' embeddings with the default model — exactly
what ``[ner] near_duplicate`` is compared with.

Two steps::

    # 1. sample candidate pairs from a corpus (written for labelling, similarity included)
    uv run python benchmarks/ner_pairs.py sample --corpus musique --n 120 > pairs.jsonl
    # 2. label each line's "same" (true: one entity; false: two), then score thresholds
    uv run python benchmarks/ner_pairs.py score benchmarks/data/ner_near_duplicates.jsonl

``score`` prints precision, recall and F1 of "merge when similarity ≥ t" for each t, and the t
with the best F1 (ties: the higher t, which merges less).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DATASETS = REPO_ROOT.parent / "shared" / "datasets"
CORPORA = {
    "musique": DATASETS / "musique" / "corpus_train100.json",
    "hotpotqa": DATASETS / "hotpotqa" / "corpus_train100.json",
    "2wiki": DATASETS / "2wikimultihopqa" / "corpus.json",
}


def _passages(name: str, limit: int) -> list[str]:
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from multihop import load_json, parse_corpus

    passages = parse_corpus(load_json(CORPORA[name]))[:limit]
    return [f"{p.title}.\n\n{p.text}" for p in passages]


def candidate_pairs(texts: list[str], types: set[str]) -> list[tuple[str, str, str, str, str, str]]:
    """``(short key, long key, short label, long label, short type, long type)`` per pair."""
    from pinakes_ner import extract
    from pinakes_ner.layer import containment_candidates
    from pinakes_ner.normalise import entity_key

    surfaces: dict[str, Counter[str]] = {}
    kinds: dict[str, Counter[str]] = {}
    for found in extract.extract(texts):
        for surface, kind, n in found:
            key = entity_key(surface) if kind in types else None
            if key:
                surfaces.setdefault(key, Counter())[surface] += n
                kinds.setdefault(key, Counter())[kind] += n
    pairs = []
    for short, longer in containment_candidates(sorted(surfaces)).items():
        for long in longer:
            pairs.append(
                (
                    short,
                    long,
                    surfaces[short].most_common(1)[0][0],
                    surfaces[long].most_common(1)[0][0],
                    kinds[short].most_common(1)[0][0],
                    kinds[long].most_common(1)[0][0],
                )
            )
    return pairs


def similarities(pairs: list[tuple[str, str, str, str, str, str]]) -> list[float]:
    import numpy as np

    from pinakes_core.config import EmbeddingConfig
    from pinakes_core.index.embedding import load_embedder

    model = load_embedder(EmbeddingConfig())
    labels = sorted({p[2] for p in pairs} | {p[3] for p in pairs})
    vectors = np.asarray(model.embed_documents(labels), dtype=np.float32)
    row = {label: i for i, label in enumerate(labels)}
    return [float(vectors[row[p[2]]] @ vectors[row[p[3]]]) for p in pairs]


def sample(args: argparse.Namespace) -> None:
    from pinakes_core.config import NerConfig

    texts = _passages(args.corpus, args.limit)
    pairs = candidate_pairs(texts, set(NerConfig().types))
    print(f"{len(texts)} passages, {len(pairs)} candidate pairs", file=sys.stderr)
    random.Random(args.seed).shuffle(pairs)
    chosen = pairs[: args.n]
    for pair, sim in zip(chosen, similarities(chosen), strict=True):
        record = {
            "short": pair[2],
            "long": pair[3],
            "short_type": pair[4],
            "long_type": pair[5],
            "similarity": round(sim, 4),
            "same": None,
        }
        print(json.dumps(record, ensure_ascii=False))


def score(args: argparse.Namespace) -> None:
    rows: list[dict[str, Any]] = [
        json.loads(line) for line in Path(args.file).read_text(encoding="utf-8").splitlines()
    ]
    rows = [r for r in rows if r.get("same") is not None]
    positives = sum(1 for r in rows if r["same"])
    print(f"{len(rows)} labelled pairs: {positives} same entity, {len(rows) - positives} different")
    print("| threshold | merged | precision | recall | F1 |")
    print("|--:|--:|--:|--:|--:|")
    best = (-1.0, 0.0)
    for step in range(30, 96, 5):
        t = step / 100
        merged = [r for r in rows if r["similarity"] >= t]
        tp = sum(1 for r in merged if r["same"])
        precision = tp / len(merged) if merged else 1.0
        recall = tp / positives if positives else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        print(f"| {t:.2f} | {len(merged)} | {precision:.2f} | {recall:.2f} | {f1:.2f} |")
        if f1 >= best[0]:
            best = (f1, t)
    print(f"\nbest F1 {best[0]:.2f} at threshold {best[1]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("sample", help="sample candidate pairs from a corpus")
    one.add_argument("--corpus", choices=list(CORPORA), default="musique")
    one.add_argument("--limit", type=int, default=2000, help="passages read (default 2000)")
    one.add_argument("--n", type=int, default=120, help="pairs sampled (default 120)")
    one.add_argument("--seed", type=int, default=13)
    two = sub.add_parser("score", help="score thresholds on a labelled pairs file")
    two.add_argument("file")
    args = parser.parse_args()
    sample(args) if args.command == "sample" else score(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
