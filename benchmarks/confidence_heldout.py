"""Confidence on a held-out question set over a real corpus (never used for fitting).

    uv run python benchmarks/confidence_heldout.py --corpus ../shared/corpora/nushell-docs \
        --questions golden/nushell/questions.jsonl --work /tmp/pnk-heldout

The corpus is copied into ``--work`` (never into the repo), made a KB and synced with
``KB.sync()`` alone — which self-calibrates it from synthetic queries, no labels. Every question
is then searched with the defaults; the report gives AUROC of ``confidence`` against "the top
document is relevant", the error rates at the configured ``abstain_below``, the lowest
false-confidence reachable at false-abstain <= 0.10, the share of ``offtopic`` questions
abstained on, the 10-bin reliability diagram, and the self-calibration's cost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

from pinakes_core import KB
from pinakes_core.manage.eval import _auc, reliability


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    root = args.work / args.corpus.name
    if not (root / "pinakes.toml").exists():
        shutil.copytree(args.corpus, root, dirs_exist_ok=True)
        KB.init(root, name=args.corpus.name)
    kb = KB.open(root)
    kb.sync()
    t0 = time.perf_counter()
    kb.self_calibrate(force=True)
    cost = time.perf_counter() - t0
    docs = kb.status().documents
    rows = [json.loads(line) for line in args.questions.read_text().splitlines() if line.strip()]
    p, y, answerable, cls = [], [], [], []
    for q in rows:
        f = q.get("filters") or {}
        r = kb.search(q["query"], k=50, tags=f.get("tags", ()), path=f.get("path"))
        top = r.hits[0].path if r.hits else None
        ok = q["class"] not in ("none", "offtopic") and top in q["relevant"]
        p.append(r.confidence if r.confidence is not None else 0.0)
        y.append(1.0 if ok else 0.0)
        answerable.append(q["class"] not in ("none", "offtopic"))
        cls.append(q["class"])
    pa, ya, ans, c = np.array(p), np.array(y), np.array(answerable), np.array(cls)
    cut = kb.config.retrieval.abstain_below
    conf = pa >= cut
    best = (1.0, 0.0, 0.0)
    for t in np.unique(np.concatenate([pa, [0.0]])):
        fa = float((~(pa >= t) & ans).sum() / ans.sum())
        fc = float(((pa >= t) & (ya == 0)).sum() / max((ya == 0).sum(), 1))
        if fa <= 0.10 and fc < best[0]:
            best = (fc, fa, float(t))
    off = c == "offtopic"
    print(f"{args.questions}: {len(rows)} questions, {int(ya.sum())} with a relevant top document")
    print(f"self-calibration: {cost:.1f} s on {docs} documents")
    print(f"AUROC {_auc(pa, ya)}")
    print(
        f"at abstain_below={cut}: false-abstain {float((~conf & ans).sum() / ans.sum()):.3f}, "
        f"false-confidence {float((conf & (ya == 0)).sum() / max((ya == 0).sum(), 1)):.3f}, "
        f"none answered {float(conf[c == 'none'].mean()) if (c == 'none').any() else float('nan'):.3f}, "
        f"off-topic abstained {float((~conf[off]).mean()) if off.any() else float('nan'):.3f}"
    )
    print(
        f"best false-confidence at false-abstain <= 0.10: {best[0]:.3f} (threshold {best[2]:.3f})"
    )
    if off.any():
        print(f"off-topic abstained at that threshold: {float((pa[off] < best[2]).mean()):.3f}")
    print("| bin | questions | mean confidence | observed |\n|---|---|---|---|")
    for b in reliability(pa, ya):
        print(f"| {b.lower:.1f}–{b.upper:.1f} | {b.count} | {b.mean_confidence} | {b.observed} |")


if __name__ == "__main__":
    main()
