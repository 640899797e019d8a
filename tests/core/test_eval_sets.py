"""benchmarks/eval_sets.py: staging a read-only corpus as a KB, incrementally."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from conftest import load_benchmark

es = load_benchmark("eval_sets")


def _read_only(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            Path(directory, name).chmod(stat.S_IRUSR | stat.S_IRGRP)
        Path(directory).chmod(stat.S_IRUSR | stat.S_IXUSR)


def _writable(root: Path) -> None:
    for directory, _, files in os.walk(root):
        Path(directory).chmod(stat.S_IRWXU)
        for name in files:
            Path(directory, name).chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_stage_mirrors_incrementally_and_keeps_the_kb(tmp_path: Path) -> None:
    src, dst = tmp_path / "corpus", tmp_path / "cache" / "corpus"
    (src / "book").mkdir(parents=True)
    (src / "book" / "a.md").write_text("# A\n\nalpha\n")
    (src / "b.md").write_text("# B\n\nbeta\n")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: main\n")
    _read_only(src)  # the shared corpora are read-only

    first = es.stage(src, dst)
    assert (first.copied, first.removed, first.unchanged) == (2, 0, 0)
    assert (dst / "pinakes.toml").is_file()  # KB.init made it a KB
    assert not (dst / ".git").exists()
    assert (dst / "book" / "a.md").stat().st_mtime_ns == (src / "book" / "a.md").stat().st_mtime_ns
    assert os.access(dst / "b.md", os.W_OK)  # the copy is writable although the source is not
    (dst / ".pinakes").mkdir()
    (dst / ".pinakes" / "index.db").write_text("x")
    (dst / "b.md.pnk.yaml").write_text("id: 01J\n")  # sync mints ids into sidecars
    (dst / "c.md.pnk.yaml").write_text("id: 01K\n")  # an orphan: c.md is not in the source

    again = es.stage(src, dst)
    assert (again.copied, again.removed, again.unchanged) == (0, 1, 2)
    assert (dst / "b.md.pnk.yaml").is_file()  # the minted id survives a re-stage
    assert not (dst / "c.md.pnk.yaml").exists()

    _writable(src)
    (src / "b.md").write_text("# B\n\nbeta, changed\n")
    (src / "book" / "a.md").unlink()
    (src / "book").rmdir()
    (src / "c.md").write_text("# C\n")
    (src / "b.md.pnk.yaml").write_text("id: 01L\n")  # the source's own sidecar wins
    changed = es.stage(src, dst)
    assert (changed.copied, changed.removed, changed.unchanged) == (3, 1, 0)
    assert (dst / "b.md.pnk.yaml").read_text() == "id: 01L\n"
    assert (dst / "b.md").read_text() == "# B\n\nbeta, changed\n"
    assert not (dst / "book").exists()  # emptied folders go too
    assert (dst / ".pinakes" / "index.db").is_file()  # the index is never touched
    assert (dst / "pinakes.toml").is_file() and (dst / ".gitignore").is_file()


def test_a_fresh_postgres_staging_takes_the_sqlite_stagings_ids(tmp_path: Path) -> None:
    # The self-calibration samples by the KB id and the documents' ids: two stagings of one
    # set compare their backends' confidence only with the same ids.
    src, cache = tmp_path / "corpus", tmp_path / "cache"
    src.mkdir()
    (src / "a.md").write_text("# A\n\nalpha\n")
    (src / "b.md").write_text("# B\n\nbeta\n")
    twin, dst = cache / "corpus", cache / "corpus-postgres"
    es.stage(src, twin)
    (twin / "a.md.pnk.yaml").write_text("id: 01JAAAAAAAAAAAAAAAAAAAAAAA\n")  # minted by a sync
    es.share_ids(twin, dst)
    es.stage(src, dst)
    assert (dst / "pinakes.toml").read_text() == (twin / "pinakes.toml").read_text()
    assert (dst / "a.md.pnk.yaml").read_text() == "id: 01JAAAAAAAAAAAAAAAAAAAAAAA\n"
    assert (dst / "b.md").is_file() and not (dst / "b.md.pnk.yaml").exists()
    # A staging that is a KB already keeps its own ids.
    (twin / "b.md.pnk.yaml").write_text("id: 01JBBBBBBBBBBBBBBBBBBBBBBB\n")
    es.share_ids(twin, dst)
    assert not (dst / "b.md.pnk.yaml").exists()
    # No twin: nothing to take, and staging makes a KB of its own.
    alone = cache / "other-postgres"
    es.share_ids(cache / "other", alone)
    assert not alone.exists()


def test_render_of_a_saved_run_names_held_out_sets() -> None:
    classes = {
        "lookup": {
            "questions": 2,
            "recall@1": 0.5,
            "recall@5": 1.0,
            "recall@10": 1.0,
            "mrr": 0.75,
            "ndcg@10": 0.8,
            "abstained": 0.0,
        },
        "offtopic": {
            "questions": 1,
            "recall@1": None,
            "recall@5": None,
            "recall@10": None,
            "mrr": None,
            "ndcg@10": None,
            "abstained": 1.0,
        },
    }
    overall = {
        "questions": 3,
        "false_abstain": 0.0,
        "false_confidence": 0.0,
        "false_confidence_none": 0.0,
        "auroc": 1.0,
        "latency_ms_p50": 12.0,
        "latency_ms_p95": 20.0,
    }
    report = {
        "abstain_below": 0.2,
        "configs": {"hybrid": {"classes": classes, "overall": overall, "reliability": []}},
    }
    run = {
        "command": "uv run python benchmarks/eval_sets.py",
        "date": "today",
        "python": "3.11",
        "sets": [
            {
                "set": "nushell",
                "held_out": True,
                "source": "/corpora/nushell-docs",
                "questions_file": "golden/nushell/questions.jsonl",
                "default": report,
                "matrix": report,
            }
        ],
    }
    text = es.render(run)
    assert "### nushell (held out: never tune on it)" in text
    assert "| lookup | 2 | 0.500 | 1.000 | 1.000 | 0.750 | 0.800 | 0.000 |" in text
    assert "| offtopic | 1 | – | – | – | – | – | 1.000 |" in text
    assert "| hybrid | 0.500 / 1.000 / 0.750 | 1.000 |" in text  # matrix: abstained for offtopic
