"""MCP server start-up, before and after, in one run (issue 37): ``initialize`` and first search.

``benchmarks/startup.py``'s MCP figure (wall time from spawning the server to its
``initialize`` reply and to its first ``pinakes_search`` reply, and the server's own CPU time
at each moment; with ``--tools-list`` a host's ``tools/list`` comes between the two), measured
on a synced copy of ``examples/distsys-notes`` for this tree's
installed ``pinakes-mcp`` and, with ``--before DIR``, for another tree's packages started
through their own entry point, in alternating blocks so both see the same load. Then what the
imports under it cost, each in a fresh process: wall and CPU time, and ``-X importtime``'s
cumulative figure for the statement.

    mkdir -p /tmp/before/pp && git archive BASE packages | tar -x -C /tmp/before
    ln -s /tmp/before/packages/*/src/* /tmp/before/pp/
    uv run python benchmarks/mcp_startup.py --before /tmp/before/pp \\
        --before-entry pinakes_mcp.server:main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import startup

PIECES = (
    "pass",
    "import pinakes_mcp.launch",
    "import fastmcp",
    "from fastmcp import FastMCP",
    "import mcp",
    "import pinakes_core",
    "import pinakes_mcp.server",
)


def piece(statement: str, runs: int) -> dict[str, float]:
    """Median wall, CPU and ``-X importtime`` cumulative ms of ``python -c statement``."""
    walls, cpus, cumulative = [], [], []
    for _ in range(runs):
        wall, cpu, done = startup.run_timed([sys.executable, "-X", "importtime", "-c", statement])
        walls.append(wall)
        cpus.append(cpu)
        top = 0  # the sum of the top-level imports' cumulative times
        for line in done.stderr.splitlines():
            parts = line[12:].split("|")
            top_level = len(parts) == 3 and not parts[2].startswith("   ")  # children indent
            if line.startswith("import time:") and top_level and parts[1].strip().isdigit():
                top += int(parts[1])
        cumulative.append(top / 1000)
    return {
        "wall": round(statistics.median(walls), 3),
        "cpu": round(statistics.median(cpus), 3),
        "importtime_ms": round(statistics.median(cumulative)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="servers started per block")
    parser.add_argument("--blocks", type=int, default=2, help="alternating before/after blocks")
    parser.add_argument("--before", type=Path, help="a folder holding the packages to compare")
    parser.add_argument(
        "--before-entry",
        default="pinakes_mcp.launch:main",
        help="MODULE:FUNCTION that starts the server in --before (its console script)",
    )
    parser.add_argument(
        "--tools-list",
        action="store_true",
        help="ask tools/list before the search, as a host does (after its initialize reply)",
    )
    parser.add_argument(
        "--no-kept",
        action="store_true",
        help="keep no tools/list (PINAKES_MCP_FRONT_CACHE=''): a first start after an upgrade",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    out: dict[str, Any] = {"before": [], "after": []}
    module, function = args.before_entry.split(":")
    old = [sys.executable, "-c", f"import sys; from {module} import {function} as m; sys.exit(m())"]
    with tempfile.TemporaryDirectory(prefix="pinakes-mcp-startup-") as tmp:
        # pinakes-mcp's kept tools/list in this run's own folder (each mcp_ready's untimed
        # first server fills it), never the user's.
        startup.ENV["PINAKES_MCP_FRONT_CACHE"] = (
            "" if args.no_kept else str(Path(tmp) / "mcp-front")
        )
        kb = Path(tmp) / "kb"
        shutil.copytree(startup.EXAMPLE, kb, ignore=shutil.ignore_patterns(".pinakes"))
        pnk = str(startup.BIN / "pnk")
        startup.timed([pnk, "--kb", str(kb), "sync", "--json"])
        startup.timed([pnk, "--kb", str(kb), "sync", "--json"])  # the first may calibrate
        for block in range(args.blocks):
            if args.before:
                startup.ENV["PYTHONPATH"] = str(args.before.resolve())
                startup.log(f"block {block + 1}: before")
                out["before"].append(startup.mcp_ready(kb, args.runs, old, listing=args.tools_list))
                startup.ENV.pop("PYTHONPATH", None)
            startup.log(f"block {block + 1}: after")
            out["after"].append(startup.mcp_ready(kb, args.runs, listing=args.tools_list))
    startup.log("imports")
    out["pieces"] = {statement: piece(statement, 3) for statement in PIECES}
    out["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.json:
        print(json.dumps(out, indent=2))
        return

    def cell(s: dict[str, float]) -> str:
        return f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f}) / {s['cpu_median']:.2f} s"

    print(f"{out['date']}, load average (1 min) before/after: {out['load_1min']}\n")
    print(
        "| block | tree | `initialize` wall (min–max) / CPU | first search wall (min–max) / CPU |"
    )
    print("|---|---|--:|--:|")
    for block in range(args.blocks):
        for tree in ("before", "after"):
            if out[tree]:
                r = out[tree][block]
                print(
                    f"| {block + 1} | {tree} | {cell(r['initialize'])} | {cell(r['first_search'])} |"
                )
    print("\n| statement | wall | CPU | `-X importtime` cumulative |\n|---|--:|--:|--:|")
    for statement, p in out["pieces"].items():
        print(f"| `{statement}` | {p['wall']:.3f} s | {p['cpu']:.3f} s | {p['importtime_ms']} ms |")


if __name__ == "__main__":
    main()
