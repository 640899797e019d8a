"""SIGKILL a sync at every commit point and at random instants; the next sync must heal it.

DESIGN §13: a sync killed at any instant leaves every document either fully old or fully new,
and the next sync finishes the job. Checked here by comparing the healed store, table by
table, with a clean rebuild from the same files (rel_kill.py), and by checking that no byte
the user wrote changed. The fake hash embedder keeps each run to a fraction of a second.
"""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
from rel_helpers import remove_tree, sync
from rel_kill import (
    build_template,
    copy_kb,
    describe,
    heal_and_compare,
    killed_sync,
    user_files,
)
from rel_ledger import record, scale
from rel_watchdog import LIMIT_BYTES, run_guarded


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_template(tmp_path_factory.mktemp("kill") / "template")


def _points(template: Path, work: Path, *, rebuild: bool) -> list[str]:
    root = copy_kb(template, work / f"count-{rebuild}")
    outcome = killed_sync(root, None, rebuild=rebuild)
    assert outcome.error_type is None, outcome.error
    remove_tree(root)
    assert isinstance(outcome.value, list) and outcome.value
    return outcome.value


def _kill_every_point(template: Path, work: Path, *, rebuild: bool) -> None:
    points = _points(template, work, rebuild=rebuild)
    before = user_files(template)
    failures: list[str] = []
    hangs = over = peak = 0
    for at in range(1, len(points) + 1):
        root = copy_kb(template, work / f"kill-{at}")
        outcome = killed_sync(root, at, rebuild=rebuild)
        hangs += outcome.hung
        over += outcome.peak_rss > LIMIT_BYTES
        peak = max(peak, outcome.peak_rss)
        if outcome.killed_by != signal.SIGKILL or outcome.hung:
            failures.append(f"{describe(points, at)}: not killed there ({outcome})")
        else:
            failures += [f"{describe(points, at)}: {p}" for p in heal_and_compare(root, before)]
        remove_tree(root)
    record(
        "kill-9 at every commit point" + (" of a rebuild" if rebuild else ""),
        peak_rss=peak,
        tried=len(points),
        inconsistent=sum(1 for f in failures if "table" in f),
        hangs=hangs,
        over_memory=over,
        changed_bytes=sum(1 for f in failures if "table" not in f and "not killed" not in f),
    )
    assert len(points) >= 20, points  # the scenario passes through every kind of write
    assert not failures, "\n".join(failures)


def test_kill_at_every_commit_point_heals(template: Path, tmp_path: Path) -> None:
    _kill_every_point(template, tmp_path, rebuild=False)


@pytest.mark.slow
def test_kill_at_every_commit_point_of_a_rebuild_heals(template: Path, tmp_path: Path) -> None:
    _kill_every_point(template, tmp_path, rebuild=True)


@pytest.mark.slow
def test_kill_at_random_instants_heals(template: Path, tmp_path: Path) -> None:
    # How long an uninterrupted sync takes, to spread the kills over it.
    probe = copy_kb(template, tmp_path / "probe")
    full = killed_sync(probe, None)
    assert full.error_type is None, full.error
    remove_tree(probe)
    before = user_files(template)
    rng = random.Random(12)
    failures: list[str] = []
    runs = scale(20)
    killed = 0
    for run in range(runs):
        root = copy_kb(template, tmp_path / f"random-{run}")
        rebuild = run % 4 == 3
        delay = rng.uniform(0.0, full.seconds * 1.2)
        # The watchdog's time limit is the kill: a SIGKILL after `delay` seconds.

        outcome = run_guarded(
            lambda root=root, rebuild=rebuild: sync(root, rebuild=rebuild), timeout=delay
        )
        killed += outcome.hung  # "hung" here: still running when its time was up, so killed
        failures += [
            f"run {run} (kill after {delay:.3f} s): {p}" for p in heal_and_compare(root, before)
        ]
        remove_tree(root)
    record(
        "kill-9 at random instants",
        tried=killed,
        inconsistent=sum(1 for f in failures if "table" in f),
        changed_bytes=sum(1 for f in failures if "table" not in f),
    )
    assert not failures, "\n".join(failures)
    assert killed >= runs // 3, f"only {killed} of {runs} syncs were killed before they ended"
