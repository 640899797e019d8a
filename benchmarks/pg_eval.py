"""``pnk eval`` on a KB whose index lives in PostgreSQL (issue 38): the whole pipeline.

The KB (default ``golden/kb``) is copied without its ``.pinakes/`` into a temporary folder,
``[store] backend = "postgres"`` is added to its ``pinakes.toml``, a PostgreSQL of its own
starts (``tests/core/pg_server.py``, or ``--url``), and ``pnk eval`` runs on the copy with
``PINAKES_DATABASE_URL`` set: sync into PostgreSQL with the configured model, then every
question through search as on SQLite (with ``--url``, that server's schema of the KB's id
is written). Run ``uv run pnk eval --kb golden/kb`` for the SQLite
figures to set beside it.

Usage::

    uv run python benchmarks/pg_eval.py                        # golden
    uv run python benchmarks/pg_eval.py -- --matrix            # arguments after -- go to pnk eval
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: Sequence[str] | None = None) -> int:
    """Copy the KB, point it at PostgreSQL, run ``pnk eval`` on it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, default=ROOT / "golden" / "kb")
    parser.add_argument("--questions", type=Path, default=ROOT / "golden" / "questions.jsonl")
    parser.add_argument("--url", help="an existing PostgreSQL with pgvector (default: start one)")
    parser.add_argument("rest", nargs="*", help="more arguments for pnk eval (after --)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "tests"))
    sys.path.insert(0, str(ROOT / "tests" / "core"))
    from pg_server import PgServer

    from conftest import set_config

    server = None if args.url else PgServer().start()
    url = args.url or server.url  # type: ignore[union-attr]
    try:
        with tempfile.TemporaryDirectory(prefix="pnk-pg-eval-") as tmp:
            kb = Path(tmp) / "kb"
            shutil.copytree(args.kb, kb, ignore=shutil.ignore_patterns(".pinakes"))
            set_config(kb, "store", 'backend = "postgres"')
            done = subprocess.run(
                ["pnk", "eval", "--kb", str(kb), "--questions", str(args.questions), *args.rest],
                env={**os.environ, "PINAKES_DATABASE_URL": url},
                check=False,
            )
    finally:
        if server is not None:
            server.remove()
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
