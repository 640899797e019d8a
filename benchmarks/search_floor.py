"""The floor under a cold ``pnk search`` (issue 37): what any process doing its work must pay.

Issue 37 asks for a cold ``pnk search`` (BM25 + dense) within 2× of ``python -c "import numpy,
pydantic"``. Two things such a search cannot skip cost more than ``import pydantic`` does:

1. **one pydantic model validated**: ``import pydantic`` is lazy, so the yardstick loads none of
   pydantic's model machinery (``pydantic.main``, ``fields``, ``types``, the schema generator),
   and building a model's first validator also imports ``importlib.metadata`` and scans every
   installed distribution's entry points for pydantic plugins. A search validates its config
   and returns a ``SearchResult``, so it pays all of it;
2. **the embedding model ready to run one query**: importing onnxruntime and tokenizers, loading
   the tokenizer file and starting a one-query session on the graph Pinakes saved (optimised,
   weights prepacked and mapped; the session options ``OnnxEmbedder`` gives a query), without
   running it.

Each round runs the yardstick, then (1), then (1) + (2), then the cold search, each once, in
fresh processes (as ``benchmarks/startup.py`` does); figures are medians over the rounds, and
ratios the medians of the per-round ratios (wall / CPU), so load that comes and goes weighs on
both sides alike. What the search costs above row (1) + (2) is everything Pinakes itself does:
the CLI, the engine's modules, the config, the store, BM25, the graph, fusion, hits, output.

    uv run python benchmarks/search_floor.py --runs 10              # the workspace venv
    uv run python benchmarks/search_floor.py --runs 10 --installed  # a fresh venv from wheels
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import startup

#: (1): the first pydantic model a process builds and validates.
ONE_MODEL = """
import numpy, pydantic
from pydantic import BaseModel

class One(BaseModel):
    x: int

One(x=1).model_dump_json()
"""

#: (2), after (1): the default embedding model ready for one query, as OnnxEmbedder starts it.
MODEL_READY = """
import onnxruntime as ort
import tokenizers

tokenizers.Tokenizer.from_file({tokenizer!r})
options = ort.SessionOptions()
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
options.intra_op_num_threads = options.inter_op_num_threads = {threads}
options.add_session_config_entry("session.intra_op.allow_spinning", "0")
ort.InferenceSession({graph!r}, options, providers=["CPUExecutionProvider"])
"""


def model_files(python: str) -> tuple[str, str]:
    """The tokenizer file and the saved, optimised graph the default model runs from.

    Found (and made, the first time) by Pinakes itself in ``python``'s environment.
    """
    code = (
        "import onnxruntime as ort\n"
        "from pinakes_core.index.embedding import _optimized_model, assemble_default_model\n"
        "folder, _ = assemble_default_model()\n"
        "print(folder / 'tokenizer.json')\n"
        "print(_optimized_model(ort, folder))\n"
    )
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, env=startup.ENV
    )
    tokenizer, graph = done.stdout.split()
    return tokenizer, graph


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kb", type=Path, default=startup.EXAMPLE)
    parser.add_argument(
        "--installed", action="store_true", help="in a fresh venv from freshly built wheels"
    )
    args = parser.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="pinakes-floor-") as tmp:
        bin_dir = startup.installed_venv(Path(tmp)) if args.installed else startup.BIN
        python, pnk = str(bin_dir / "python"), str(bin_dir / "pnk")
        kb = Path(tmp) / "kb"
        shutil.copytree(args.kb, kb, ignore=shutil.ignore_patterns(".pinakes"))
        for _ in range(2):  # the second sync sees everything current (and calibrated)
            startup.timed([pnk, "--kb", str(kb), "sync", "--json"])
        tokenizer, graph = model_files(python)
        threads = (
            max(1, len(os.sched_getaffinity(0)) - 1) if hasattr(os, "sched_getaffinity") else 1
        )
        ready = MODEL_READY.format(tokenizer=tokenizer, graph=graph, threads=threads)
        rows = startup.against_yardstick(
            {
                "one_model": [python, "-c", ONE_MODEL],
                "model_ready": [python, "-c", ONE_MODEL + ready],
                "cold_search": [pnk, "--kb", str(kb), "search", startup.QUERY, "--json"],
            },
            args.runs,
            python,
        )
        distributions = startup.distribution_count(python)
    where = "a fresh venv from wheels" if args.installed else "the workspace venv"
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {where} ({distributions} "
        f"distributions), load average (1 min) before/after: {load:.2f} / "
        f"{os.getloadavg()[0]:.2f}, {args.runs} rounds\n"
    )
    print("| figure | median | CPU median | × yardstick (wall / CPU) |\n|---|--:|--:|--:|")
    labels = {
        "yardstick": '`python -c "import numpy, pydantic"`',
        "one_model": "yardstick + (1) one pydantic model validated",
        "model_ready": "yardstick + (1) + (2) the embedding model ready for one query",
        "cold_search": "cold `pnk search --json`",
    }
    for name, row in rows.items():
        print(
            f"| {labels[name]} | {row['median']:.3f} s | {row['cpu_median']:.3f} s | "
            f"{row['ratio']:.2f} / {row['cpu_ratio']:.2f} |"
        )
    search, floor = rows["cold_search"], rows["model_ready"]
    print(
        f"\nAbove the floor, Pinakes' own work: {search['cpu_median'] - floor['cpu_median']:.3f} s "
        f"CPU ({search['cpu_ratio'] - floor['cpu_ratio']:.2f}× of the yardstick's CPU)."
    )


if __name__ == "__main__":
    main()
