"""What NER costs at sync: full sync with and without it, no-change re-sync, peak memory.

For a corpus folder (default ``../shared/corpora/nushell-docs``), each measurement runs in a
fresh subprocess on its own temporary copy of the corpus:

1. full sync, ``[ner] enabled = false``: wall time and peak RSS;
2. full sync, ``[ner] enabled = true`` (embedding, then extraction and the entity layer):
   wall time, the NER phase's own time split into extraction and label embedding, entities,
   peak RSS;
3. five no-change re-syncs of each KB, in-process medians.

Peak RSS is the process's own ``VmHWM`` (see benchmarks/README.md for why not ``ru_maxrss``)::

    uv run python benchmarks/ner_sync.py                     # nushell-docs
    uv run python benchmarks/ner_sync.py --corpus PATH --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpora" / "nushell-docs"


def _peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(root: Path, ner: bool) -> dict[str, Any]:
    """One full sync of the KB at ``root`` (run in a fresh process), then no-change re-syncs."""
    from pinakes_core import KB

    timers = _time_ner_steps() if ner else {}

    config = root / "pinakes.toml"
    config.write_text(
        config.read_text(encoding="utf-8") + f"\n[ner]\nenabled = {'true' if ner else 'false'}\n",
        encoding="utf-8",
    )
    with KB.open(root) as kb:
        t0 = time.perf_counter()
        report = kb.sync()
        wall = time.perf_counter() - t0
        split = dict(timers)  # the full sync's; the re-syncs below must not add to it
        status = kb.status()
        resyncs = []
        for _ in range(5):
            t1 = time.perf_counter()
            kb.sync()
            resyncs.append(time.perf_counter() - t1)
    return {
        "ner": ner,
        "documents": status.documents,
        "chunks": status.chunks,
        "sync_seconds": round(wall, 1),
        "embed_seconds": report.embed_seconds,
        "ner_seconds": round(split["phase_seconds"], 1) if ner else None,
        "ner_steps": {k: round(v, 1) for k, v in split.items() if k != "phase_seconds"},
        "entities": status.entities,
        "mentions": status.mentions,
        "resync_median": round(statistics.median(resyncs), 3),
        "resync_range": [round(min(resyncs), 3), round(max(resyncs), 3)],
        "peak_rss_mb": round(_peak_rss_mb()),
    }


def _time_ner_steps() -> dict[str, float]:
    """Time the NER phase and its two costly steps (a benchmark's wrappers around the code).

    ``phase_seconds``: the plugin's whole ``after_sync`` work; ``extract_seconds``: the spaCy
    pipeline over new chunk texts (loading it included); ``label_seconds``: embedding entity
    labels (``labels`` of them asked for). The rest of the phase is reading extractions, the
    near-duplicate merge and the store writes.
    """
    from pinakes_ner import layer

    split: dict[str, float] = {
        "phase_seconds": 0.0,
        "extract_seconds": 0.0,
        "label_seconds": 0.0,
        "labels": 0,
    }
    derive, extract_new, label_vectors = (
        layer.derive_layer,
        layer._extract_new,
        layer._label_vectors,
    )

    def timed_derive(*args: Any) -> None:
        t0 = time.perf_counter()
        try:
            derive(*args)
        finally:
            split["phase_seconds"] += time.perf_counter() - t0

    def timed_extract(*args: Any) -> int:
        t0 = time.perf_counter()
        try:
            return extract_new(*args)
        finally:
            split["extract_seconds"] += time.perf_counter() - t0

    def timed_labels(conn: Any, labels: list[str], embedder: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return label_vectors(conn, labels, embedder)
        finally:
            split["label_seconds"] += time.perf_counter() - t0
            split["labels"] += len(labels)

    layer.derive_layer = timed_derive  # type: ignore[assignment]
    layer._extract_new = timed_extract  # type: ignore[assignment]
    layer._label_vectors = timed_labels  # type: ignore[assignment]
    return split


def measure(corpus: Path, ner: bool, keep: bool) -> dict[str, Any]:
    from pinakes_core import KB

    tmp = Path(tempfile.mkdtemp(prefix="pinakes-ner-sync-"))
    root = tmp / corpus.name
    shutil.copytree(corpus, root, ignore=shutil.ignore_patterns(".git", ".pinakes"))
    if not (root / "pinakes.toml").exists():  # a corpus folder, not a KB already
        KB.init(root, name="nerbench")
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", str(root), "--ner", "on" if ner else "off"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    if not keep:
        shutil.rmtree(tmp)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def markdown(corpus: Path, off: dict[str, Any], on: dict[str, Any], load: list[float]) -> str:
    added = on["sync_seconds"] - off["sync_seconds"]
    lines = [
        f"- Command: `uv run python benchmarks/ner_sync.py --corpus {corpus}`",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average (1 min) "
        f"before/after: {load[0]:.2f} / {load[1]:.2f}",
        f"- {off['documents']:,} documents, {off['chunks']:,} chunks; with NER "
        f"{on['entities']:,} entities, {on['mentions']:,} mention edges",
        "",
        "| | full sync | of which NER | no-change re-sync, median (min–max) | peak RSS |",
        "|---|--:|--:|--:|--:|",
        f"| NER off | {off['sync_seconds']} s | – | {off['resync_median']} "
        f"({off['resync_range'][0]}–{off['resync_range'][1]}) s | {off['peak_rss_mb']} MB |",
        f"| NER on | {on['sync_seconds']} s | {on['ner_seconds']} s | {on['resync_median']} "
        f"({on['resync_range'][0]}–{on['resync_range'][1]}) s | {on['peak_rss_mb']} MB |",
        "",
        f"NER adds {added:.1f} s to the full sync ({100 * added / off['sync_seconds']:.0f} %; its "
        f"own phase is {on['ner_seconds']} s = {100 * on['ner_seconds'] / off['sync_seconds']:.0f} % "
        "of the sync without it).",
    ]
    steps = on.get("ner_steps") or {}
    if steps:
        lines.append(
            f"Within it: extraction {steps['extract_seconds']} s, label embedding "
            f"{steps['label_seconds']} s ({int(steps['labels']):,} labels); the embedding "
            f"build of the same sync took {on['embed_seconds']:.1f} s."
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep-tmp", action="store_true")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ner", choices=["on", "off"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.ner == "on")))
        return 0
    load = [os.getloadavg()[0]]
    off = measure(args.corpus, False, args.keep_tmp)
    print(f"NER off: {off}", file=sys.stderr)
    on = measure(args.corpus, True, args.keep_tmp)
    print(f"NER on: {on}", file=sys.stderr)
    load.append(os.getloadavg()[0])
    if args.json:
        print(json.dumps({"off": off, "on": on, "load": load}))
    else:
        print(markdown(args.corpus, off, on, load))
    return 0


if __name__ == "__main__":
    sys.exit(main())
