"""Run the reliability suite and print docs/reliability.md's table.

Usage (from the repository root)::

    uv run python tests/reliability/report.py              # the CI-sized suite, slow parts too
    uv run python tests/reliability/report.py --scale 10   # 10x the random kills and fuzzing

Every test records what it tried into a ledger (rel_ledger.py); this script runs pytest over
tests/reliability with the ledger on, sums it per area, and prints the Markdown table plus
pytest's own verdict. A non-zero cell is also a failed test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = [
    ("tried", "tried"),
    ("inconsistent", "inconsistent stores"),
    ("hangs", "hangs"),
    ("over_memory", "runs over 1.5 GB"),
    ("foreign_exceptions", "foreign exceptions"),
    ("escapes", "escapes"),
    ("changed_bytes", "user files changed"),
    ("outside_changed", "files changed outside the KB"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", type=int, default=1, help="multiply random kills and fuzzing")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Path(tmp) / "ledger.jsonl"
        environment = {
            **os.environ,
            "PINAKES_RELIABILITY_LEDGER": str(ledger),
            "PINAKES_RELIABILITY_SCALE": str(args.scale),
        }
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(HERE),
                "-q",
                "-p",
                "no:cacheprovider",
                *args.pytest_args,
            ],
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        minutes = (time.perf_counter() - started) / 60
        rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        peak = 0
        for line in ledger.read_text().splitlines() if ledger.exists() else []:
            entry = json.loads(line)
            area = entry.pop("area")
            peak = max(peak, entry.pop("peak_rss", 0))
            for key, value in entry.items():
                rows[area][key] += value
    print("| area | " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    totals: dict[str, int] = defaultdict(int)
    for area in sorted(rows):
        cells = [rows[area][key] for key, _ in COLUMNS]
        for (key, _), value in zip(COLUMNS, cells, strict=True):
            totals[key] += value
        print(f"| {area} | " + " | ".join(f"{v:,}" for v in cells) + " |")
    print("| **all** | " + " | ".join(f"**{totals[key]:,}**" for key, _ in COLUMNS) + " |")
    print()
    print(
        f"Highest peak RSS of a guarded run: {peak / 2**20:.0f} MB. Scale {args.scale}; {minutes:.1f} min."
    )
    print("pytest: " + (result.stdout.strip().splitlines() or ["(no output)"])[-1])
    if result.returncode != 0:
        print(result.stdout[-5000:], file=sys.stderr)
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
