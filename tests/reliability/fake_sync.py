"""Sync a KB in its own process with the FAKE hash embedder (a child of the reliability tests).

Usage: fake_sync.py ROOT [--rebuild] [--delay SECONDS]. Prints the JSON sync report, or
``LockError: ...`` and exits 3 when another sync holds the lock.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rel_helpers import SlowFakeEmbedder

from pinakes_core import KB, LockError


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    with KB.open(args.root, embedder=SlowFakeEmbedder(args.delay)) as kb:
        try:
            report = kb.sync(rebuild=args.rebuild)
        except LockError as exc:
            print(f"LockError: {exc}", flush=True)
            sys.exit(3)
    print(report.model_dump_json(), flush=True)


if __name__ == "__main__":
    main()
