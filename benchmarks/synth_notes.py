"""Write a folder of SYNTHETIC Markdown notes for sync-at-scale benchmarks (issue 38).

Each note is small, as a team's notes are: YAML frontmatter (title, tags, a status and a
number), a title heading, two or three sections under headings, paragraphs of words drawn from
a fixed vocabulary (with a Zipf-like skew, so some words are common and most are rare), and
links to other notes (a wiki link and a Markdown link). The same ``--count`` and ``--seed``
always give the same folder, byte for byte. The text means nothing: it measures what a store
costs per document, chunk and posting, not retrieval quality.

Usage::

    uv run python benchmarks/synth_notes.py --count 10000 --out /tmp/notes10k
    uv run python benchmarks/pg_sync.py --folder /tmp/notes10k --rounds 1
"""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

_SYLLABLES = (
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "gu", "ba", "fe", "zo", "ve", "xi",
    "qua", "ter", "mon", "las", "ver", "dil", "nor", "sca", "pen", "tro",
)  # fmt: skip
_TAGS = ("ops", "design", "incident", "meeting", "howto", "research", "team/a", "team/b")
_STATUSES = ("draft", "review", "done")
_SECTIONS = ("Context", "Steps", "Decision", "Follow-up", "Notes", "Links")


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    """``size`` distinct made-up words of two to four syllables."""
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(seen)


def note(n: int, count: int, words: list[str], weights: list[float], rng: random.Random) -> str:
    """The text of note ``n`` of ``count``; ``weights``: the words' cumulative weights."""

    def sentence() -> str:
        picked = rng.choices(words, cum_weights=weights, k=rng.randint(6, 14))
        return " ".join(picked).capitalize() + "."

    title = " ".join(rng.choice(words) for _ in range(3)).title()
    tags = sorted(rng.sample(_TAGS, rng.randint(1, 3)))
    lines = [
        "---",
        f"title: {title} {n}",
        f"tags: [{', '.join(tags)}]",
        f"status: {rng.choice(_STATUSES)}",
        f"priority: {rng.randint(1, 5)}",
        "---",
        "",
        f"# {title} {n}",
        "",
    ]
    for heading in rng.sample(_SECTIONS, rng.randint(2, 3)):
        lines += [f"## {heading}", ""]
        for _ in range(rng.randint(1, 2)):
            lines += [" ".join(sentence() for _ in range(rng.randint(2, 4))), ""]
    other, third = rng.randrange(count), rng.randrange(count)
    lines += [
        f"See [[note-{other:06d}]] and [the other note](../d{third // 100:04d}/note-{third:06d}.md).",
        "",
    ]
    return "\n".join(lines)


def write(out: Path, count: int, seed: int = 38) -> None:
    """Write ``count`` notes into ``out`` (100 to a subfolder)."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    # Zipf-like: the word of rank r weighs 1 / (r + 10).
    weights = list(itertools.accumulate(1.0 / (r + 10) for r in range(len(words))))
    for n in range(count):
        folder = out / f"d{n // 100:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note-{n:06d}.md").write_text(
            note(n, count, words, weights, rng), encoding="utf-8"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty: give a new folder")
    write(args.out, args.count, args.seed)
    print(f"{args.count} notes in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
