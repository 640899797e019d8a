"""The golden-set regression gate: retrieval must not fall below golden/baseline.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinakes_core import KB
from pinakes_core.eval import evaluate, matrix_configs

ROOT = Path(__file__).resolve().parents[2]
BASELINE = json.loads((ROOT / "golden" / "baseline.json").read_text())
#: Absolute tolerance for recall / MRR / nDCG (one question in ~50 of a class).
RETRIEVAL_TOLERANCE = 0.02
#: Absolute tolerance for false-abstain / false-confidence (their denominators are small).
CONFIDENCE_TOLERANCE = 0.05

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):
    kb_dir = tmp_path_factory.mktemp("golden") / "kb"
    shutil.copytree(ROOT / "golden" / "kb", kb_dir, ignore=shutil.ignore_patterns(".pinakes"))
    kb = KB.open(kb_dir)
    kb.sync()
    configs = {
        name: chans for name, chans in matrix_configs().items() if name in BASELINE["configs"]
    }
    return evaluate(kb, ROOT / "golden" / "questions.jsonl", configs)


def test_every_baseline_config_ran(report) -> None:
    assert set(report.configs) == set(BASELINE["configs"])


@pytest.mark.parametrize("config", sorted(BASELINE["configs"]))
def test_retrieval_does_not_regress(report, config: str) -> None:
    now = report.configs[config]
    failures = []
    for cls, metrics in BASELINE["configs"][config]["classes"].items():
        current = now.classes[cls].model_dump(by_alias=True)
        for metric, before in metrics.items():
            if metric == "questions" or before is None:
                continue
            if current[metric] < before - RETRIEVAL_TOLERANCE:
                failures.append(f"{cls} {metric}: {current[metric]:.4f} < baseline {before:.4f}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("config", sorted(BASELINE["configs"]))
def test_confidence_errors_do_not_regress(report, config: str) -> None:
    now = report.configs[config].overall.model_dump()
    failures = []
    for metric, before in BASELINE["configs"][config]["overall"].items():
        if metric == "questions" or before is None:
            continue
        if now[metric] is None or now[metric] > before + CONFIDENCE_TOLERANCE:
            failures.append(f"{metric}: {now[metric]} > baseline {before}")
    assert not failures, "\n".join(failures)


def test_targets_of_the_evaluation_issue(report) -> None:
    """Lookup recall@5 of hybrid stays at or above the issue's 0.90 target."""
    assert report.configs["hybrid"].classes["lookup"].recall_5 >= 0.90
