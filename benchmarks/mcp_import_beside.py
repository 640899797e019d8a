"""Does importing fastmcp beside the first search save time? (issue 37: it does not.)

One process opens a synced copy of ``examples/distsys-notes`` as ``pinakes-mcp`` does, waits
for the warm-up and runs one search, either with ``import fastmcp`` in a thread started at
the beginning ("beside") or after the search ("after"). Printed: when the search finished and
when fastmcp was imported, wall seconds from the start, and the process's CPU seconds at the
search. Both need the one interpreter lock, so "beside" delays the search by about what the
import costs; the stdio front therefore imports fastmcp only once it has nothing to do.

    uv run python benchmarks/mcp_import_beside.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import startup

_ONE = """
import json, sys, threading, time
t0 = time.perf_counter()
c0 = time.process_time()
done = {}

def load():
    import fastmcp  # noqa: F401
    done["fastmcp"] = time.perf_counter() - t0

beside = sys.argv[2] == "beside"
thread = threading.Thread(target=load) if beside else None
if thread:
    thread.start()
from pinakes_mcp.served import Registry, open_kbs

registry = Registry(open_kbs([sys.argv[1]]), watching=False)
for warmer in registry.start_warming():
    warmer.join()
served = next(iter(registry))
with registry.using(served) as kb:
    kb.search("leader election", k=8)
done["search"] = time.perf_counter() - t0
done["search_cpu"] = time.process_time() - c0
if thread:
    thread.join()
else:
    load()
print(json.dumps(done))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, list[dict[str, float]]] = {"after": [], "beside": []}
    with tempfile.TemporaryDirectory(prefix="pinakes-beside-") as tmp:
        kb = Path(tmp) / "kb"
        shutil.copytree(startup.EXAMPLE, kb, ignore=shutil.ignore_patterns(".pinakes"))
        pnk = str(startup.BIN / "pnk")
        startup.timed([pnk, "--kb", str(kb), "sync", "--json"])
        startup.timed([pnk, "--kb", str(kb), "sync", "--json"])
        for _ in range(args.rounds):
            for mode in ("after", "beside"):
                done = subprocess.run(
                    [sys.executable, "-c", _ONE, str(kb), mode],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=startup.ENV,
                )
                out[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    summary = {
        mode: {key: round(statistics.median(r[key] for r in rows), 3) for key in rows[0]}
        for mode, rows in out.items()
    }
    print(json.dumps({"rounds": out, "median": summary}, indent=2))


if __name__ == "__main__":
    main()
