"""Choose the reader's rule (issue 36): ranking figures per class for each weight, N and window.

For every question of a set, on a synced KB, the default pipeline runs with the reader at each
``--windows`` value of ``reading.WINDOW_CHARS``, each ``--top-n`` (``[retrieval]
reader_top_n``) and each ``--weights`` value (``[retrieval] reader_weight``); the reader's
scores are cached per (query, passage), so each pair is read once whatever the grid (the int8
model's scores move by ~0.02 logits with the batch a pair is read in, so a cell can differ from
a plain search by a near tie). Reported per cell:
R@1 / R@5 / MRR per answerable class and their mean over classes. Confidence is not looked at
here (it depends on a self-calibration refit per setting; ``eval_sets.py --reader on`` measures
it). Choose on sets we may tune on (golden, personal); on a held-out set run only the rule
already chosen, to measure it.

    uv run python benchmarks/reader_rule.py --kb KB --questions FILE [--weights 0.2,0.35,0.5]
        [--top-n 5,10] [--windows 160,320]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def log(message: str) -> None:
    print(f"[reader-rule {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--weights", default="0.3,0.5,0.7")
    parser.add_argument("--top-n", default="10")
    parser.add_argument(
        "--windows", default="", help="comma-separated reading.WINDOW_CHARS values (default: as is)"
    )
    args = parser.parse_args(argv)

    from pinakes_core import KB
    from pinakes_core.manage.eval import UNANSWERABLE, load_questions, run_questions, score
    from pinakes_core.search import reading
    from pinakes_core.search.reader import Reader

    cache: dict[tuple[str, str], float] = {}
    plain = Reader.logits

    def cached(self: Reader, query: str, passages: Any) -> Any:
        todo = [p for p in passages if (query, p) not in cache]
        if todo:
            for p, v in zip(todo, plain(self, query, todo), strict=True):
                cache[(query, p)] = float(v)
        return np.array([cache[(query, p)] for p in passages], dtype=np.float32)

    Reader.logits = cached  # type: ignore[method-assign]
    questions = load_questions(args.questions)
    rows = []
    with KB.open(args.kb) as kb:
        base = run_questions(kb, questions, None)  # the KB's default, reader off
        rows.append(("off", "-", score(base, [])))
        windows = [int(w) for w in args.windows.split(",") if w] or [reading.WINDOW_CHARS]
        for chars in windows:
            reading.WINDOW_CHARS = chars
            for top_n in [int(n) for n in args.top_n.split(",")]:
                for weight in [float(w) for w in args.weights.split(",")]:
                    retrieval = kb.config.retrieval.model_copy(
                        update={"reader": True, "reader_top_n": top_n, "reader_weight": weight}
                    )
                    kb.config = kb.config.model_copy(update={"retrieval": retrieval})
                    report = score(run_questions(kb, questions, None), [])
                    rows.append((f"{top_n} @{chars}", f"{weight:g}", report))
                    log(f"window {chars} N={top_n} w={weight:g}: {len(cache)} pairs read")
    classes = [c for c in rows[0][2].classes if c not in UNANSWERABLE]
    print(f"`{' '.join(['uv run python benchmarks/reader_rule.py', *(argv or sys.argv[1:])])}`\n")
    print("| N @window | weight | " + " | ".join(classes) + " | mean R@1 / R@5 / MRR |")
    print("|---|---|" + "---|" * (len(classes) + 1))
    for top_n, weight, report in rows:
        cells = []
        means = np.zeros(3)
        for cls in classes:
            m = report.classes[cls]
            values = [m.recall_1 or 0.0, m.recall_5 or 0.0, m.mrr or 0.0]
            means += np.array(values) / len(classes)
            cells.append(" / ".join(f"{v:.3f}" for v in values))
        print(
            f"| {top_n} | {weight} | "
            + " | ".join(cells)
            + f" | {' / '.join(f'{v:.3f}' for v in means)} |"
        )


if __name__ == "__main__":
    main()
