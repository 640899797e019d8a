"""Where a cold search's time goes, phase by phase, in fresh interpreters (issue 37).

Each run is a new process that marks wall and CPU time (``perf_counter``, ``process_time``)
after each phase of what ``pnk search`` does: import numpy and pydantic (the yardstick's own
work), import the engine, open the KB, load the model's runtime, build the embedder (tokenizer),
build the one-query session, embed the query once, then search with BM25 + dense (which embeds
the query again, a few ms once the session is warm, and runs BM25, fusion and hits). Figures are
medians of ``--runs`` processes, on a synced copy of ``examples/distsys-notes``.

    uv run python benchmarks/search_phases.py --runs 7
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "distsys-notes"
QUERY = "how does leader election work"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

PROBE = """
import json, sys, time
marks = []
def mark(label):
    marks.append((label, time.perf_counter(), time.process_time()))
mark("start")
import numpy, pydantic
mark("import numpy, pydantic")
from pinakes_core import KB
mark("import the engine (pinakes_core.kb)")
kb = KB.open(sys.argv[1])
mark("KB.open")
import onnxruntime, tokenizers
mark("import onnxruntime, tokenizers")
from pinakes_core.index.embedding import OnnxEmbedder
embedder = kb.embedder
mark("the embedder (model folder, tokenizer)")
if isinstance(embedder, OnnxEmbedder):
    embedder._session(True)
mark("the one-query ONNX session")
embedder.embed_query(sys.argv[2])
mark("embed the query")
kb.search(sys.argv[2], channels=["bm25", "dense"])
mark("KB.search (BM25, dense, fusion, hits)")
print(json.dumps(marks))
"""


def one(python: str, kb: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU milliseconds of each phase in one fresh process."""
    done = subprocess.run(
        [python, "-c", PROBE, str(kb), QUERY], capture_output=True, text=True, env=ENV, check=True
    )
    marks = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        label: (1000 * (wall - marks[i][1]), 1000 * (cpu - marks[i][2]))
        for i, (label, wall, cpu) in enumerate(marks[1:])
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--kb", type=Path, default=EXAMPLE)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="pinakes-phases-") as tmp:
        kb = Path(tmp) / "kb"
        shutil.copytree(args.kb, kb, ignore=shutil.ignore_patterns(".pinakes"))
        pnk = str(Path(sys.executable).parent / "pnk")
        for _ in range(2):  # the second sync sees everything current (and calibrated)
            subprocess.run([pnk, "--kb", str(kb), "sync"], env=ENV, check=True, capture_output=True)
        one(sys.executable, kb)  # untimed: page cache, bytecode
        runs = [one(sys.executable, kb) for _ in range(args.runs)]
    print(f"load average (1 min) before/after: {load:.2f} / {os.getloadavg()[0]:.2f}\n")
    print("| phase | wall ms | CPU ms |\n|---|--:|--:|")
    for label in runs[0]:
        wall = statistics.median(run[label][0] for run in runs)
        cpu = statistics.median(run[label][1] for run in runs)
        print(f"| {label} | {wall:.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
