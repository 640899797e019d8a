"""Compare two ``eval_sets.py`` runs set by set: per class R@1 / R@5 / MRR, then the confidence.

    uv run python benchmarks/eval_compare.py BEFORE.json AFTER.json [--labels off,on]

Both files are ``benchmarks/eval_sets.py --json`` outputs; sets present in both are compared
(each run's default configuration). Markdown goes to stdout.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def _default(result: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = next(iter(result["default"]["configs"].values()))
    return config


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _pair(a: float | None, b: float | None) -> str:
    if a is None and b is None:
        return "–"
    if a is None or b is None:
        return f"{_f(a)} → {_f(b)}"
    delta = b - a
    sign = "+" if delta > 0 else ""
    return f"{_f(a)} → **{_f(b)}** ({sign}{delta:.3f})" if abs(delta) >= 0.0005 else _f(a)


def compare(before: dict[str, Any], after: dict[str, Any], labels: tuple[str, str]) -> str:
    """Markdown tables for every set both runs hold."""
    out = []
    sets_after = {r["set"]: r for r in after["sets"]}
    for old in before["sets"]:
        new = sets_after.get(old["set"])
        if new is None:
            continue
        a, b = _default(old), _default(new)
        names = (next(iter(old["default"]["configs"])), next(iter(new["default"]["configs"])))
        held = " (held out)" if old.get("held_out") else ""
        out += [
            f"#### {old['set']}{held}: {labels[0]} `{names[0]}` → {labels[1]} `{names[1]}`",
            "",
            "| class | n | R@1 | R@5 | MRR | abstained |",
            "|---|---|---|---|---|---|",
        ]
        for cls, m in a["classes"].items():
            n = b["classes"].get(cls)
            if n is None:
                continue
            out.append(
                f"| {cls} | {m['questions']} | {_pair(m['recall@1'], n['recall@1'])} | "
                f"{_pair(m['recall@5'], n['recall@5'])} | {_pair(m['mrr'], n['mrr'])} | "
                f"{_pair(m['abstained'], n['abstained'])} |"
            )
        o, p = a["overall"], b["overall"]
        out += [
            "",
            "| false-abstain | false-confidence | false-conf. (none+offtopic) | AUROC | p50 ms | "
            "p95 ms |",
            "|---|---|---|---|---|---|",
            f"| {_pair(o['false_abstain'], p['false_abstain'])} | "
            f"{_pair(o['false_confidence'], p['false_confidence'])} | "
            f"{_pair(o['false_confidence_none'], p['false_confidence_none'])} | "
            f"{_pair(o['auroc'], p['auroc'])} | {o['latency_ms_p50']} → {p['latency_ms_p50']} | "
            f"{o['latency_ms_p95']} → {p['latency_ms_p95']} |",
            "",
        ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--labels", default="before,after")
    args = parser.parse_args(argv)
    first, second = args.labels.split(",", 1)
    before = json.loads(args.before.read_text(encoding="utf-8"))
    after = json.loads(args.after.read_text(encoding="utf-8"))
    print(compare(before, after, (first, second)))


if __name__ == "__main__":
    main()
