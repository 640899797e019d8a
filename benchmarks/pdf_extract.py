"""PDF extraction: reading-order quality on the fixtures, then pages/s and peak RSS.

    uv run python benchmarks/pdf_extract.py              # quality + speed (fixtures, 2,000 pages)
    uv run python benchmarks/pdf_extract.py --quality    # quality table only

Quality (method in docs/sources.md): every fixture in tests/fixtures/pdf with a
``*.truth.json`` is extracted twice, by Pinakes (geometric reading order) and by PDFium's own
text order (``get_text_range``, the content-stream order), and scored against the truth:

- ``char_recall``: characters of the truth's words found, in order, in the extraction
  (difflib matching blocks over word sequences) / characters of the truth's words;
- ``sentences_whole``: truth sentences found as one contiguous run in the extraction /
  truth sentences;
- ``order``: consecutive truth sentence pairs (both found, each at least 20 characters long)
  that appear in the same order / such pairs;
- ``page_accuracy``: truth sentences found on their own page / truth sentences.

Speed: each measurement runs in a fresh subprocess that extracts one file page by page (as
sync's worker does) and reports pages/s and its peak RSS (``ru_maxrss``); the 2,000-page PDF is
built from the two-column fixture's pages with PDFium's page import.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import json
import re
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "pdf"

_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def normalise(text: str) -> str:
    """NFKC, lower case, typographic quotes and table bars dropped, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace(" | ", " ")
    return " ".join(text.split())


def _words(text: str) -> list[str]:
    return _WORD.findall(normalise(text))


def score(pages: list[str], truth: dict[str, Any]) -> dict[str, float]:
    """Score extracted page texts against a fixture's ``*.truth.json`` (see the module doc)."""
    truth_pages = [" ".join(p["blocks"]) for p in truth["pages"]]
    whole_truth = _words(" ".join(truth_pages))
    whole_got = _words(" ".join(pages))
    matcher = difflib.SequenceMatcher(None, whole_truth, whole_got, autojunk=False)
    matched = sum(
        sum(len(w) for w in whole_truth[b.a : b.a + b.size]) for b in matcher.get_matching_blocks()
    )
    recall = matched / max(sum(len(w) for w in whole_truth), 1)
    joined = normalise(" ".join(pages))
    page_texts = [normalise(p) for p in pages]
    sentences: list[tuple[int, str]] = []
    for number, page in enumerate(truth["pages"]):
        for block in page["blocks"]:
            sentences += [(number, normalise(s)) for s in _SENTENCE.split(block) if s.strip()]
    whole = sum(1 for _, s in sentences if s in joined)
    on_page = sum(
        1 for number, s in sentences if number < len(page_texts) and s in page_texts[number]
    )
    # Short sentences (a page number, "1 Introduction") occur more than once; they say
    # nothing about order.
    positions = [joined.find(s) for _, s in sentences if len(s) >= 20]
    pairs = [(a, b) for a, b in itertools.pairwise(positions) if a >= 0 and b >= 0]
    ordered = sum(1 for a, b in pairs if a < b)
    return {
        "char_recall": round(recall, 3),
        "sentences_whole": round(whole / max(len(sentences), 1), 3),
        "order": round(ordered / max(len(pairs), 1), 3),
        "page_accuracy": round(on_page / max(len(sentences), 1), 3),
        "sentences": len(sentences),
    }


def pinakes_pages(path: Path) -> list[str]:
    """Page texts as Pinakes extracts them (in this process, without the cache)."""
    from pinakes_core.read.pdf import PdfSummary, extract

    summary = PdfSummary()
    pages = extract(path.read_bytes(), max_pages=10_000, max_seconds=600, summary=summary)
    return [page.text for page in pages]


def pdfium_pages(path: Path) -> list[str]:
    """Page texts in PDFium's own order (the content stream's), the baseline."""
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(path)
    try:
        return [document[i].get_textpage().get_text_range() for i in range(len(document))]
    finally:
        document.close()


def quality() -> list[str]:
    rows = [
        "| fixture | extractor | char_recall | sentences_whole | order | page_accuracy | sentences |",
        "|---|---|---|---|---|---|---|",
    ]
    for truth_file in sorted(FIXTURES.glob("*.truth.json")):
        name = truth_file.name.removesuffix(".truth.json")
        truth = json.loads(truth_file.read_text("utf-8"))
        pdf = FIXTURES / f"{name}.pdf"
        for label, pages in (("pinakes", pinakes_pages(pdf)), ("pdfium order", pdfium_pages(pdf))):
            s = score(pages, truth)
            rows.append(
                f"| {name}.pdf | {label} | {s['char_recall']:.3f} | {s['sentences_whole']:.3f} "
                f"| {s['order']:.3f} | {s['page_accuracy']:.3f} | {s['sentences']} |"
            )
    return rows


_CHILD = """
import resource, sys, time
from pinakes_core.read.pdf import PdfSummary, extract
data = open(sys.argv[1], "rb").read()
start = time.perf_counter()
summary = PdfSummary()
chars = sum(len(p.text) for p in extract(data, max_pages=100_000, max_seconds=3600, summary=summary))
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(summary.page_count, chars, seconds, rss)
"""


def measure(path: Path) -> tuple[int, float, float, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], check=True, capture_output=True, text=True
    ).stdout.split()
    pages, chars, seconds, rss = int(out[0]), int(out[1]), float(out[2]), float(out[3])
    return pages, pages / seconds, rss, chars / seconds


def build_long(path: Path, pages: int) -> None:
    """Write a ``pages``-page PDF that cycles through the two-column fixture's pages."""
    import pypdfium2 as pdfium

    source = pdfium.PdfDocument(FIXTURES / "two-column.pdf")
    target = pdfium.PdfDocument.new()
    # One import call: the pages share one copy of the fonts.
    target.import_pages(source, [i % len(source) for i in range(pages)])
    target.save(path)


def speed() -> list[str]:
    rows = [
        "| file | size | pages | pages/s | characters/s | peak RSS (MB) |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        long_pdf = Path(tmp) / "long-2000.pdf"
        build_long(long_pdf, 2000)
        largest = max(FIXTURES.glob("*.pdf"), key=lambda p: p.stat().st_size)
        candidates = [p for p in FIXTURES.glob("*.pdf") if p.name not in ("encrypted.pdf",)]
        most_text = max(candidates, key=lambda p: len(" ".join(pinakes_pages(p))))
        for path in dict.fromkeys([largest, most_text, long_pdf]):
            runs = [measure(path) for _ in range(3)]
            pages = runs[0][0]
            rate = sorted(r[1] for r in runs)[1]
            chars = sorted(r[3] for r in runs)[1]
            rss = max(r[2] for r in runs)
            size = path.stat().st_size / 1024
            rows.append(
                f"| {path.name} | {size:.0f} KB | {pages} | {rate:.1f} | {chars:,.0f} | {rss:.0f} |"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", action="store_true", help="only the quality table")
    args = parser.parse_args()
    print("\n".join(quality()))
    if not args.quality:
        print()
        print("\n".join(speed()))


if __name__ == "__main__":
    main()
