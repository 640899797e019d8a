"""benchmarks/scale.py's helpers: the mixture vectors of the 1M KB, exact top k, process memory."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from conftest import load_benchmark

scale = load_benchmark("scale")


def _base(rows: int = 300, dim: int = 32) -> np.ndarray:
    rng = np.random.default_rng(3)
    base = rng.normal(size=(rows, dim))
    return (base / np.linalg.norm(base, axis=1, keepdims=True)).astype(np.float32)


def test_mixtures_are_distinct_unit_vectors_mostly_about_their_first_text() -> None:
    base = _base()
    first = np.arange(base.shape[0])
    mixed = scale.mixtures(base, base.shape[0], np.random.default_rng(14), first=first)
    assert mixed.shape == base.shape and mixed.dtype == np.float32
    assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)
    # w ≥ 0.5 on a: each row is at least as close to its own text as to any other base text.
    cosines = mixed @ base.T
    assert (cosines[first, first] >= cosines.max(axis=1) - 1e-6).all()
    assert (cosines[first, first] < 1.0 - 1e-4).mean() > 0.95  # mixed, not copies
    # Distinct: no two mixtures coincide, and none is a base row.
    pairwise = mixed @ mixed.T
    np.fill_diagonal(pairwise, 0.0)
    assert pairwise.max() < 0.9999
    # Random first texts when none are given; the same seed gives the same rows.
    again = scale.mixtures(base, 50, np.random.default_rng(5))
    assert np.array_equal(again, scale.mixtures(base, 50, np.random.default_rng(5)))
    assert not np.array_equal(again, scale.mixtures(base, 50, np.random.default_rng(6)))


def test_clone_vectors_are_what_ann_recall_rebuilds() -> None:
    # ann_recall.py builds its index over the very rows scale.py --chunks (--mix) stores:
    # the base, then clone_vectors once per copy from a generator seeded CLONE_SEED.
    ann_recall = load_benchmark("ann_recall")
    base = _base(100)
    for mix in (False, True):
        rng = np.random.default_rng(scale.CLONE_SEED)
        copies = [scale.clone_vectors(base, rng, 1.0, mix) for _ in range(2)]
        expected = np.concatenate([base, *copies])
        assert np.array_equal(ann_recall.dataset(base, 300, 1.0, mix), expected)
    noisy = scale.clone_vectors(base, np.random.default_rng(1), 0.3, mix=False)
    mixed = scale.clone_vectors(base, np.random.default_rng(1), 0.3, mix=True)
    assert not np.array_equal(noisy, mixed)
    held = scale.held_out_queries(base, 20, 1.0, mix=True)
    assert held.shape == (20, base.shape[1])
    assert not np.isin(held, expected).all(axis=1).any()  # not rows of the KB


def test_exact_top_is_the_brute_force_top_across_blocks() -> None:
    rng = np.random.default_rng(9)
    data = rng.normal(size=(140_000, 8)).astype(np.float32)  # more than one 131,072-row block
    queries = rng.normal(size=(5, 8)).astype(np.float32)
    got = scale.exact_top(data, queries, k=10)
    want = np.argsort(-(data @ queries.T), axis=0, kind="stable")[:10].T
    assert np.array_equal(np.sort(got, axis=1), np.sort(want, axis=1))


def test_proc_memory_reads_another_process_rss_and_peak() -> None:
    # A child that touches 200 MB, frees it, and waits: its peak stays, its RSS falls.
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "block = bytearray(b'x') * (200 * 1024 * 1024)\n"
            "del block\n"
            "print('ready', flush=True)\n"
            "time.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        memory = load_benchmark("memory").proc_memory_mb(child.pid)
    finally:
        child.kill()
        child.wait()
    assert set(memory) == {"VmRSS", "VmHWM"}
    assert memory["VmHWM"] >= 200
    assert memory["VmRSS"] < memory["VmHWM"] - 150
    own = load_benchmark("memory").proc_memory_mb()
    assert 0 < own["VmRSS"] <= own["VmHWM"]
