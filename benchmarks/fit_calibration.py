"""Fit core's confidence prior on the golden set and report the self-calibration cross-validated.

    uv run python benchmarks/fit_calibration.py            # fit, write the prior, print the report
    uv run python benchmarks/fit_calibration.py --dry-run  # print only
    uv run python benchmarks/fit_calibration.py --json OUT # also save the held-out predictions

The golden KB is synced (which self-calibrates it: anchors from its synthetic queries), every
golden question is searched with the default pipeline, and the prior (a logistic model over the
features' positions) is fitted on all of them and written to
``pinakes_core/data/confidence_prior.json``.

Every figure printed comes from 5-fold held-out predictions, repeated over 3 shuffles (and with
``--samples N`` over N synthetic samples, each the one a KB with another id would draw): for each
fold a prior is fitted on the other four, and the KB's self-calibration is refitted on its
synthetic queries shrunk toward that prior — exactly what ``pnk sync`` does on a new KB, except
that there the prior saw all golden questions. Rows:

- ``self``: the shipped mechanism (synthetic fit + golden prior from the other folds);
- ``prior``: the golden prior alone (labelled fit on the other folds);
- ``synthetic``: the synthetic fit with no prior at all (what labels add).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pinakes_core import KB
from pinakes_core.manage.eval import (
    _auc,
    load_questions,
    reliability,
    run_questions,
    thresholds,
)
from pinakes_core.search.calibration import anchors, fit_self, run_synthetic
from pinakes_core.search.confidence import FEATURES, Calibration, fit_logistic, to_json

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "packages/pinakes-core/src/pinakes_core/data/confidence_prior.json"
#: L2 strength of the prior's own fit (on standardised positions; chosen by CV below).
PRIOR_L2 = 3.0


def operating_point(
    p: np.ndarray[Any, Any],
    y: np.ndarray[Any, Any],
    answerable: np.ndarray[Any, Any],
    fa_max: float = 0.10,
) -> tuple[float, float, float]:
    """The threshold with the lowest false-confidence whose false-abstain is ≤ ``fa_max``."""
    best = (0.0, 1.0, 0.0)
    for t in np.unique(np.concatenate([p, [0.0]])):
        confident = p >= t
        fa = float((~confident & answerable).sum() / max(answerable.sum(), 1))
        fc = float((confident & (y == 0)).sum() / max((y == 0).sum(), 1))
        if fa <= fa_max and fc < best[1]:
            best = (float(t), fc, fa)
    return best


def prior_from(
    z: np.ndarray[Any, Any],
    y: np.ndarray[Any, Any],
    off: list[float],
    scale: list[float],
    model_id: str,
    n: int,
) -> Calibration:
    coef, intercept = fit_logistic(z, y, l2=PRIOR_L2)
    return Calibration(
        model_id=model_id,
        kind="prior",
        features=list(FEATURES),
        off=off,
        scale=scale,
        coef=[round(float(c), 6) for c in coef],
        intercept=round(intercept, 6),
        fitted_on=f"golden/questions.jsonl ({n} questions)",
        n=n,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--samples",
        type=int,
        default=1,
        help="synthetic samples to cross-validate over (each as another KB id would draw it)",
    )
    args = parser.parse_args()
    kb = KB.open(ROOT / "golden/kb")
    kb.sync()
    kb.self_calibrate()
    model_id = kb.store().get_meta("model_id") or ""
    # The KB id seeds the synthetic sample; other seeds give the samples a KB with the same
    # documents but another id would draw (the first is golden's own).
    seeds = [kb.config.kb.id, *(f"{kb.config.kb.id}/{i}" for i in range(1, args.samples))]
    samples = [run_synthetic(kb, seed=seed)[0] for seed in seeds]
    rows = samples[0]
    off, scale = anchors(rows)
    outcomes = [
        o
        for o in run_questions(kb, load_questions(ROOT / "golden/questions.jsonl"), None)
        if o.features is not None
    ]
    probe = Calibration(
        model_id=model_id,
        features=list(FEATURES),
        off=off,
        scale=scale,
        coef=[0.0] * len(FEATURES),
        intercept=0.0,
        fitted_on="",
        n=0,
    )
    z = np.array([probe.positions(o.features or {}) for o in outcomes])
    y = np.array([1.0 if o.top_correct else 0.0 for o in outcomes])
    answerable = np.array([o.answerable for o in outcomes])
    offtopic_q = np.array(
        [
            o.question.cls == "offtopic"
            or (o.question.id >= "none-035" and o.question.cls == "none")
            for o in outcomes
        ]
    )

    held: dict[str, list[np.ndarray[Any, Any]]] = {"self": [], "prior": [], "synthetic": []}
    for sample in samples:
        synthetic_only = fit_self(sample, None, model_id)
        for repeat in range(args.repeats):
            order = list(range(len(y)))
            random.Random(repeat).shuffle(order)
            preds = {k: np.zeros(len(y)) for k in held}
            for fold in range(args.folds):
                test = np.array(order[fold :: args.folds])
                train = np.setdiff1d(np.arange(len(y)), test)
                prior = prior_from(z[train], y[train], off, scale, model_id, len(train))
                own = fit_self(sample, prior, model_id)
                preds["prior"][test] = [prior.predict(outcomes[i].features or {}) for i in test]
                preds["self"][test] = [own.predict(outcomes[i].features or {}) for i in test]
                preds["synthetic"][test] = [
                    synthetic_only.predict(outcomes[i].features or {}) for i in test
                ]
            for k in held:
                held[k].append(preds[k])

    print(
        f"golden: {len(y)} questions, {int(y.sum())} with a correct top document; synthetic rows "
        f"{len(rows)}; {len(samples)} synthetic sample(s) × {args.repeats} shuffles"
    )
    print(
        "\n| calibration | AUROC | Brier | false-confidence at false-abstain ≤ 0.10 (threshold) |\n|---|---|---|---|"
    )
    for k, runs in held.items():
        aucs = [_auc(p, y) or 0.0 for p in runs]
        briers = [float(np.mean((p - y) ** 2)) for p in runs]
        ops = [operating_point(p, y, answerable) for p in runs]
        print(
            f"| {k} | {np.mean(aucs):.3f} | {np.mean(briers):.3f} | {np.mean([o[1] for o in ops]):.3f} (≈{np.mean([o[0] for o in ops]):.2f}) |"
        )
    p = held["self"][0]
    print(
        "\nreliability (self, first shuffle):\n| bin | questions | mean confidence | observed |\n|---|---|---|---|"
    )
    for b in reliability(p, y):
        print(f"| {b.lower:.1f}–{b.upper:.1f} | {b.count} | {b.mean_confidence} | {b.observed} |")
    print(
        "\n| abstain_below | false-abstain (min–max over runs) | false-confidence | false-confidence (none) |"
        "\n|---|---|---|---|"
    )
    tables = [thresholds(run, y, answerable) for run in held["self"]]
    for rows_at in zip(*tables, strict=True):
        fa = [r.false_abstain for r in rows_at]
        print(
            f"| {rows_at[0].threshold:.2f} | {np.mean(fa):.3f} ({min(fa):.3f}–{max(fa):.3f}) "
            f"| {np.mean([r.false_confidence for r in rows_at]):.3f} "
            f"| {np.mean([r.false_confidence_none for r in rows_at]):.3f} |"
        )
    if offtopic_q.any():
        for t in (0.2, 0.3, 0.4, 0.5):
            print(
                f"off-topic abstained at {t}: {float((p[offtopic_q] < t).mean()):.3f} of {int(offtopic_q.sum())}"
            )

    prior = prior_from(z, y, off, scale, model_id, len(y))
    print("\nprior coefficients (positions):")
    for name, c, o, s in zip(FEATURES, prior.coef, off, scale, strict=True):
        print(f"  {name:18s} {c:+.3f}   off {o:.3f}  scale {s:.3f}")
    print(f"  intercept {prior.intercept:+.3f}")
    if not args.dry_run:
        TARGET.write_text(to_json(prior))
        print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "y": y.tolist(),
                    "ids": [o.question.id for o in outcomes],
                    **{k: v[0].tolist() for k, v in held.items()},
                }
            )
        )


if __name__ == "__main__":
    main()
