"""Fit the reader's part of core's confidence prior on the golden set (issue 36).

    uv run python benchmarks/fit_reader_prior.py [--kb KB] [--dry-run]

The golden KB (``golden/kb``, or a staged copy with ``--kb``) is synced with ``[retrieval]
reader = true``, which self-calibrates it with the reader (anchors for every feature, the
reader's two included). Every golden question is searched with the default pipeline and the
reader; a logistic model over the features' positions, the reader's features included, is fitted
on them (L2 as ``fit_calibration.PRIOR_L2``) and written to ``data/confidence_prior.json`` with
the prior fitted without the reader (``benchmarks/fit_calibration.py``) kept as its ``base``,
unchanged: searches without the reader are judged as before.

Printed: the in-sample AUROC of the prior with and without the reader's features on the same
searches, and the coefficients. The self-calibration of every KB reading with the reader shrinks
toward these coefficients (``calibration.fit_self``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from pinakes_core import KB
from pinakes_core.manage.eval import _auc, load_questions, run_questions
from pinakes_core.search.calibration import stored
from pinakes_core.search.confidence import (
    FEATURES,
    READER_FEATURES,
    Calibration,
    fit_logistic,
    prior_calibration,
    to_json,
)

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "packages/pinakes-core/src/pinakes_core/data/confidence_prior.json"
PRIOR_L2 = 3.0  # as benchmarks/fit_calibration.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden/kb")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    shipped = prior_calibration()
    base = shipped.base if shipped is not None and shipped.reads else shipped
    if base is None or base.features != list(FEATURES):
        raise SystemExit("no prior over the reader-less features to extend; run fit_calibration.py")
    kb = KB.open(args.kb)
    retrieval = kb.config.retrieval.model_copy(update={"reader": True})
    kb.config = kb.config.model_copy(update={"retrieval": retrieval})
    kb.sync()
    kb.self_calibrate()
    own = stored(kb.store())
    if own is None or not own.reads:
        raise SystemExit(f"{args.kb}: no self-calibration with the reader's features")
    names = [*FEATURES, *READER_FEATURES]
    outcomes = [
        o
        for o in run_questions(kb, load_questions(ROOT / "golden/questions.jsonl"), None)
        if o.features is not None and all(n in o.features for n in names)
    ]
    z = np.array([own.positions(o.features or {}) for o in outcomes])
    y = np.array([1.0 if o.top_correct else 0.0 for o in outcomes])
    coef, intercept = fit_logistic(z, y, names=names, l2=PRIOR_L2)
    prior = Calibration(
        model_id=base.model_id,
        kind="prior",
        features=names,
        off=own.off,
        scale=own.scale,
        coef=[round(float(c), 6) for c in coef],
        intercept=round(intercept, 6),
        fitted_on=f"golden/questions.jsonl with the reader ({len(y)} questions)",
        n=len(y),
        base=base,
    )
    with_reader = np.array([prior.predict(o.features or {}) for o in outcomes])
    without = np.array(
        [
            base.with_anchors(own.off[: len(FEATURES)], own.scale[: len(FEATURES)]).predict(
                o.features or {}
            )
            for o in outcomes
        ]
    )
    print(f"golden with the reader: {len(y)} questions, {int(y.sum())} right top documents")
    print(
        f"in-sample AUROC: without the reader's features {_auc(without, y)}, with {_auc(with_reader, y)}"
    )
    for name, c, o, s in zip(names, prior.coef, prior.off, prior.scale, strict=True):
        print(f"  {name:18s} {c:+.3f}   off {o:.3f}  scale {s:.3f}")
    print(f"  intercept {prior.intercept:+.3f}")
    if not args.dry_run:
        TARGET.write_text(to_json(prior))
        print(f"wrote {TARGET.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
