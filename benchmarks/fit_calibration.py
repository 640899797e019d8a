"""Fit core's default confidence calibration on the golden set and write it into the package.

    uv run python benchmarks/fit_calibration.py            # fit, write, print the CV report
    uv run python benchmarks/fit_calibration.py --dry-run  # print only

The coefficients are fitted on every golden question; every figure printed comes from 5-fold
held-out predictions (each question scored by a model that never saw it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pinakes_core import KB
from pinakes_core.confidence import to_json
from pinakes_core.eval import calibrate

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "packages/pinakes-core/src/pinakes_core/calibration.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    kb = KB.open(ROOT / "golden/kb")
    kb.sync()
    report = calibrate(kb, ROOT / "golden/questions.jsonl")
    if not args.dry_run:
        TARGET.write_text(to_json(report.calibration))
    print(f"questions {report.questions}, correct top hit {report.positives}")
    print(f"held-out Brier {report.brier}, log loss {report.log_loss}, AUC {report.auc}")
    print(
        "\n| confidence bin | questions | mean confidence | observed correct |\n|---|---|---|---|"
    )
    for b in report.reliability:
        print(f"| {b.lower:.1f}–{b.upper:.1f} | {b.count} | {b.mean_confidence} | {b.observed} |")
    print(
        "\n| abstain_below | false-abstain | false-confidence | false-confidence (none) |\n|---|---|---|---|"
    )
    for row in report.thresholds:
        print(
            f"| {row.threshold:.2f} | {row.false_abstain} | {row.false_confidence} | {row.false_confidence_none} |"
        )
    print("\ncoefficients (standardised features):")
    for name, coef in zip(report.calibration.features, report.calibration.coef, strict=True):
        print(f"  {name:16s} {coef:+.3f}")


if __name__ == "__main__":
    main()
