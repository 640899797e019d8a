"""What the YAML pre-scan (intake.check_yaml) costs on real frontmatter and sidecars.

Every frontmatter block and sidecar is scanned as parser events before it is composed (issue 12:
alias bombs, deep nests). This measures that scan against the load it protects, on the YAML of
real corpora (every frontmatter block found) and on generated sidecars (a skeleton, and sidecars
with 10, 100 and 1,000 links), plus how fast the scan refuses the hostile inputs.

    uv run python benchmarks/yaml_guard.py                      # the shared corpora
    uv run python benchmarks/yaml_guard.py --corpus PATH ...    # other folders

Prints Markdown for docs/benchmarks.md (medians of --repeat runs).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML

from pinakes_core.intake import YamlLimitError, check_yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPORA = [
    ROOT.parent / "shared/corpora/nushell-docs",
    ROOT.parent / "shared/corpora/dendron-site",
]


def frontmatter_blocks(folder: Path) -> list[str]:
    blocks = []
    for path in sorted(folder.rglob("*.md")):
        lines = path.read_text("utf-8", errors="replace").split("\n")
        if not lines or lines[0].rstrip() != "---":
            continue
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
        if end is not None:
            blocks.append("\n".join(lines[1:end]))
    return blocks


def sidecar(links: int) -> str:
    text = "id: 01ARZ3NDEKTSV4RRFFQ69G5FAV\ntitle: A note\ntags: [a, b, c]\n"
    if links:
        text += "links:\n" + "".join(
            f"  - to: pnk://01ARZ3NDEKTSV4RRFFQ69G5FA{i % 10}/01ARZ3NDEKTSV4RRFFQ69G5F{i:02d}\n"
            "    rel: cites\n"
            for i in range(links)
        )
    return text


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def row(name: str, texts: list[str], repeat: int, loader: str) -> str:
    def load() -> None:
        for text in texts:
            YAML(typ=loader, pure=True).load(text)

    def scan() -> None:
        for text in texts:
            check_yaml(text)

    load_s, scan_s = median_seconds(load, repeat), median_seconds(scan, repeat)
    per = 1e6 / max(len(texts), 1)
    return (
        f"| {name} | {len(texts):,} | {sum(map(len, texts)) / 1024:,.0f} KB | "
        f"{load_s * per:,.0f} µs | {scan_s * per:,.0f} µs | {scan_s / load_s:.0%} |"
    )


def refusal(name: str, text: str, repeat: int) -> str:
    def scan() -> None:
        try:
            check_yaml(text)
        except YamlLimitError:
            return
        raise AssertionError(f"{name} was not refused")

    return f"| {name} | {len(text):,} B | {median_seconds(scan, repeat) * 1000:,.1f} ms |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", action="append", type=Path, help="a folder (repeatable)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    corpora = args.corpus or DEFAULT_CORPORA
    print(
        "Command: `uv run python benchmarks/yaml_guard.py`; "
        f"Python {platform.python_version()}, {platform.machine()}, medians of {args.repeat} runs.\n"
    )
    print("| YAML | texts | size | load (per text) | pre-scan (per text) | pre-scan / load |")
    print("|---|---:|---:|---:|---:|---:|")
    for corpus in corpora:
        blocks = frontmatter_blocks(corpus)
        if blocks:
            print(row(f"frontmatter of {corpus.name}", blocks, args.repeat, "safe"))
    for links in (0, 10, 100, 1_000):
        print(row(f"sidecar with {links:,} links", [sidecar(links)], args.repeat, "rt"))
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    print("\n| hostile YAML | size | refused after |")
    print("|---|---:|---:|")
    print(refusal("alias bomb (9^9 nodes expanded)", bomb, args.repeat))
    print(refusal("10,000 nested flow lists", "[" * 10_000, args.repeat))
    print(refusal("250 KB of nested flow lists", "[" * 250_000, args.repeat))
    print(
        refusal(
            "30,000-item list with an anchor",
            "a: &a x\nb: [" + "x," * 30_000 + "*a]",
            args.repeat,
        )
    )
    print(refusal("a 300 KB sidecar", "tags:\n" + "  - tag\n" * 40_000, args.repeat))


if __name__ == "__main__":
    main()
