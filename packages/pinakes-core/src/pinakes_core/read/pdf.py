"""PDF text extraction with page provenance (issue 18), through PDFium (``pypdfium2``).

Each page is read on its own and released before the next, so memory stays bounded whatever
the page count. PDFium gives text *segments* (runs of characters on one line, with their
boxes); the reading order is rebuilt from their geometry rather than taken from the content
stream, which follows whatever order the producing program drew in:

1. Segments on one baseline closer than half an em are merged (words of one line).
2. The page is cut recursively (an XY-cut): a vertical cut at a gap in the x-projection that
   separates two *text columns*, else horizontal cuts at the widest gaps in the
   y-projection. A side is a text column when it is at least six ems and a fifth of the region
   wide and its lines fill it (median line width at least half the side's width). Table
   columns fail that test, so a table is read row by row, cells in order.
3. Lines of a region are read top to bottom, segments left to right; a gap between lines
   larger than the region's usual line gap starts a new paragraph (a blank line).
4. A hyphen PDFium marks as a line-end break (U+0002 / U+FFFE) joins the word's two halves;
   ligatures (U+FB00-FB06) are spelled out; other control characters are dropped.

Tall, narrow segments (rotated text in a margin, such as an arXiv stamp) are read after the
page's body. The order is scored against ground truth in ``tests/fixtures/pdf`` (method and
numbers in ``docs/sources.md``).

Nothing here reads the file system or writes anything: :func:`extract` takes the PDF's bytes
and yields pages; the cache and the worker process around it are in
:mod:`pinakes_core.read.extraction`.
"""

from __future__ import annotations

import itertools
import re
import statistics
import time
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = [
    "EXTRACTOR_VERSION",
    "Page",
    "PdfError",
    "PdfSummary",
    "extract",
    "order_segments",
]

#: Bump when the text this module produces changes; it is part of the extraction cache key, so
#: a new version re-extracts every PDF once.
EXTRACTOR_VERSION = "1"

# A PDF's last "%%EOF" lies within its final 1,024 bytes (the tolerance readers apply under
# ISO 32000-1 §7.5.5); without one the file was cut short.
_EOF_WINDOW = 1024
# Titles in PDF metadata that name nothing (producer defaults) are ignored.
_JUNK_TITLES = re.compile(
    r"^\s*(untitled|unknown|\(?unspecified\)?|title|document\d*|microsoft word - .*|"
    r".*\.(docx?|pdf|tex|dvi|ps|indd|odt|rtf))\s*$",
    re.IGNORECASE,
)
# PDFium marks a hyphen that breaks a word at a line end as U+0002 (U+FFFE in some calls);
# a soft hyphen (U+00AD) ending a segment means the same.
_HYPHEN_MARKS = ("\x02", "\ufffe")
# Control characters other than the hyphen mark U+0002 (tabs and newlines are spaces by then).
_CONTROL = re.compile(r"[\x00\x01\x03-\x1f\x7f\uffff]")
# A line-start title is at least this much larger than the page's body text.
_TITLE_RATIO = 1.25
_MAX_TITLE_CHARS = 300


class PdfError(Exception):
    """The PDF cannot be read at all; ``reason`` is one sentence for the sync report."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Page:
    """The text of one page (1-based ``number``), in reading order; empty without a text layer."""

    number: int
    text: str


@dataclass
class PdfSummary:
    """What an extraction found besides the pages' text.

    Attributes:
        page_count: pages in the document.
        title: the metadata title, else the first large-font line of page 1, else ``None``.
        empty_pages: pages without a text layer (scanned images, blank pages).
        failed_pages: pages PDFium could not load.
        stopped_at: the page after which extraction stopped (page cap or time limit), if it did.
        stop_reason: why it stopped.
    """

    page_count: int = 0
    title: str | None = None
    empty_pages: list[int] = field(default_factory=list)
    failed_pages: list[int] = field(default_factory=list)
    stopped_at: int | None = None
    stop_reason: str | None = None


@dataclass
class _Seg:
    x0: float
    y0: float  # bottom
    x1: float
    y1: float  # top
    text: str
    size: float = 0.0  # font size, where known

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def width(self) -> float:
        return self.x1 - self.x0


def version_fingerprint() -> str:
    """Return the extractor's identity: this module's version and PDFium's build."""
    import pypdfium2

    return f"x{EXTRACTOR_VERSION}-pdfium{pypdfium2.PDFIUM_INFO.build}"


def extract(
    data: bytes, *, max_pages: int, max_seconds: float, summary: PdfSummary
) -> Iterator[Page]:
    """Yield the pages of the PDF ``data`` in order, one at a time (memory bounded per page).

    ``summary`` is filled in as pages are read (title after page 1, counts at the end).
    Extraction stops after ``max_pages`` pages or once ``max_seconds`` have passed, and says so
    in ``summary.stopped_at`` / ``stop_reason``.

    Raises:
        PdfError: the document is encrypted, corrupt or truncated (nothing is yielded then).
    """
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    if b"%%EOF" not in data[-_EOF_WINDOW:]:
        raise PdfError("PDF is truncated (no %%EOF marker at its end); it was not indexed")
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code in (raw.FPDF_ERR_PASSWORD, raw.FPDF_ERR_SECURITY):
            raise PdfError("PDF is encrypted (it needs a password); it was not indexed") from None
        raise PdfError("PDF is corrupt (PDFium cannot parse it); it was not indexed") from None
    started = time.monotonic()
    try:
        summary.page_count = len(document)
        summary.title = _metadata_title(document)
        for index in range(summary.page_count):
            number = index + 1
            if number > max_pages:
                summary.stopped_at, summary.stop_reason = index, f"the {max_pages}-page cap"
                return
            if time.monotonic() - started > max_seconds:
                summary.stopped_at = index
                summary.stop_reason = f"the {max_seconds:g}-second time limit"
                return
            try:
                page = document[index]
            except pdfium.PdfiumError:
                summary.failed_pages.append(number)
                continue
            try:
                segments = _segments(page, with_sizes=number == 1)
            finally:
                page.close()
            if number == 1 and summary.title is None:
                summary.title = _large_font_title(segments)
            text = order_segments(segments)
            if not text.strip():
                summary.empty_pages.append(number)
            yield Page(number, text)
    finally:
        document.close()


def _metadata_title(document: object) -> str | None:
    try:
        title = str(document.get_metadata_value("Title"))  # type: ignore[attr-defined]
    except Exception:  # a broken info dictionary is no reason to lose the text
        return None
    title = " ".join(_clean(title).split())
    if not title or _JUNK_TITLES.match(title):
        return None
    return title[:_MAX_TITLE_CHARS]


def _clean(text: str) -> str:
    for mark in _HYPHEN_MARKS:
        text = text.replace(mark, "\x02")
    text = text.rstrip()
    if text.endswith("\u00ad"):
        text = text[:-1] + "\x02"
    text = text.replace("\u00ad", "")
    text = "".join(
        unicodedata.normalize("NFKC", ch) if "\ufb00" <= ch <= "\ufb06" else ch for ch in text
    )
    return _CONTROL.sub("", text)


def _segments(page: object, *, with_sizes: bool) -> list[_Seg]:
    import pypdfium2.raw as raw

    textpage = page.get_textpage()  # type: ignore[attr-defined]
    try:
        segments: list[_Seg] = []
        for index in range(textpage.count_rects()):
            x0, y0, x1, y1 = textpage.get_rect(index)
            text = textpage.get_text_bounded(x0, y0, x1, y1)
            text = _clean(text.replace("\r", " ").replace("\n", " "))
            if not text.strip():
                continue
            seg = _Seg(x0, y0, x1, y1, text)
            if with_sizes:
                char = raw.FPDFText_GetCharIndexAtPos(
                    textpage.raw, x0 + min(2.0, seg.width / 2), (y0 + y1) / 2, 2.0, 2.0
                )
                if char >= 0:
                    seg.size = float(raw.FPDFText_GetFontSize(textpage.raw, char))
            segments.append(seg)
        return segments
    finally:
        textpage.close()


def _large_font_title(segments: list[_Seg]) -> str | None:
    """The first line of page 1 set clearly larger than its body text (joined with its run)."""
    sized = [s for s in segments if s.size > 0 and s.text.strip()]
    if not sized:
        return None
    body = statistics.median(s.size for s in sized)
    top = max(s.y1 for s in sized)
    bottom = min(s.y0 for s in sized)
    upper = [s for s in sized if s.y1 >= bottom + (top - bottom) / 2]
    large = [s for s in upper if s.size >= body * _TITLE_RATIO]
    if not large:
        return None
    biggest = max(s.size for s in large)
    # The title is the largest text in the upper half; consecutive lines of that size join.
    run = sorted((s for s in large if s.size >= biggest * 0.9), key=lambda s: (-s.y1, s.x0))
    lines: list[str] = []
    last: _Seg | None = None
    for seg in run:
        if last is not None and last.y0 - seg.y1 > seg.height * 1.5:
            break
        lines.append(seg.text.strip().replace("\x02", ""))
        last = seg
    title = " ".join(" ".join(lines).split())
    return title[:_MAX_TITLE_CHARS] or None


# -- reading order ---------------------------------------------------------------------------


def _em(segments: list[_Seg]) -> float:
    return max(statistics.median(s.height for s in segments), 1.0)


def _merge_words(segments: list[_Seg], em: float) -> list[_Seg]:
    """Merge segments of one baseline that are closer than half an em."""
    ordered = sorted(segments, key=lambda s: (-round((s.y0 + s.y1) / 2 / (em / 2)), s.x0))
    merged: list[_Seg] = []
    for seg in ordered:
        last = merged[-1] if merged else None
        if last is not None and _same_line(last, seg) and -em / 4 <= seg.x0 - last.x1 < em / 2:
            joiner = "" if last.text.endswith(" ") or seg.text.startswith(" ") else " "
            merged[-1] = _Seg(
                last.x0,
                min(last.y0, seg.y0),
                seg.x1,
                max(last.y1, seg.y1),
                last.text + joiner + seg.text,
                max(last.size, seg.size),
            )
        else:
            merged.append(seg)
    return merged


def _same_line(a: _Seg, b: _Seg) -> bool:
    mid = (b.y0 + b.y1) / 2
    amid = (a.y0 + a.y1) / 2
    return a.y0 <= mid <= a.y1 or b.y0 <= amid <= b.y1


def _gaps(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Gaps (start, end) between the union of ``intervals``, in ascending order."""
    gaps: list[tuple[float, float]] = []
    ordered = sorted(intervals)
    reach = ordered[0][1]
    for lo, hi in ordered[1:]:
        if lo > reach:
            gaps.append((reach, lo))
        reach = max(reach, hi)
    return gaps


def _is_column(side: list[_Seg], em: float, region_width: float) -> bool:
    width = max(s.x1 for s in side) - min(s.x0 for s in side)
    if width < max(6 * em, region_width / 5):
        return False
    return statistics.median(s.width for s in side) >= width / 2


def _vertical_cut(segments: list[_Seg], em: float) -> tuple[float, list[_Seg], list[_Seg]] | None:
    """The widest x-gap that separates two text columns: (gap width, left, right)."""
    gaps = [g for g in _gaps([(s.x0, s.x1) for s in segments]) if g[1] - g[0] >= em / 2]
    region_width = max(s.x1 for s in segments) - min(s.x0 for s in segments)
    for lo, hi in sorted(gaps, key=lambda g: g[0] - g[1]):
        cut = (lo + hi) / 2
        left = [s for s in segments if s.x1 <= cut]
        right = [s for s in segments if s.x0 >= cut]
        if _is_column(left, em, region_width) and _is_column(right, em, region_width):
            return hi - lo, left, right
    return None


def _lines(segments: list[_Seg]) -> list[list[_Seg]]:
    """Group segments into lines (top to bottom), each sorted left to right."""
    lines: list[list[_Seg]] = []
    for seg in sorted(segments, key=lambda s: -(s.y0 + s.y1) / 2):
        if lines and _same_line(lines[-1][0], seg):
            lines[-1].append(seg)
        else:
            lines.append([seg])
    return [sorted(line, key=lambda s: s.x0) for line in lines]


_Line = list[_Seg]


def _order(
    segments: list[_Seg], em: float, out: list[tuple[tuple[int, ...], _Line]], flow: tuple[int, ...]
) -> None:
    """XY-cut: append the lines of ``segments`` to ``out`` in reading order.

    Each line carries its *flow*: the path of vertical cuts that led to it, so lines of one
    column share a flow and paragraph gaps are measured within it.
    """
    if len(segments) > 1:
        cut = _vertical_cut(segments, em)
        gaps = _gaps([(-s.y1, -s.y0) for s in segments])
        widest = max((hi - lo for lo, hi in gaps), default=0.0)
        # The wider of the two separations wins: a footer under two columns is cut off first,
        # a gutter beats the gaps between the lines of the columns.
        if cut is not None and cut[0] >= widest:
            _order(cut[1], em, out, (*flow, 0))
            _order(cut[2], em, out, (*flow, 1))
            return
        if widest >= em / 4:
            cuts = [(lo + hi) / 2 for lo, hi in gaps if hi - lo >= widest * 0.8]
            bands: list[list[_Seg]] = [[] for _ in range(len(cuts) + 1)]
            for seg in segments:
                bands[sum(1 for c in cuts if -seg.y1 > c)].append(seg)
            if sum(1 for band in bands if band) > 1:
                for band in bands:
                    if band:
                        _order(band, em, out, flow)
                return
    out.extend((flow, line) for line in _lines(segments))


def _line_text(line: _Line, em: float) -> str:
    parts: list[str] = []
    for index, seg in enumerate(line):
        text = seg.text.strip()
        if index and text:
            gap = seg.x0 - line[index - 1].x1
            parts.append(" | " if gap >= 1.5 * em and text != "\x02" else " ")
        parts.append(text)
    return "".join(parts).replace(" \x02", "\x02")


def _top(line: _Line) -> float:
    return max(s.y1 for s in line)


def _bottom(line: _Line) -> float:
    return min(s.y0 for s in line)


def order_segments(segments: list[_Seg]) -> str:
    """Return a page's text in reading order from its segments (see the module docstring).

    Paragraphs are separated by a blank line; lines of a paragraph by a newline, except that a
    line ending in a marked hyphen is joined to the next without it.
    """
    segments = [s for s in segments if s.text.strip()]
    if not segments:
        return ""
    em = _em(segments)
    margin = [s for s in segments if s.height > 3 * em and s.width < s.height]
    body = [s for s in segments if not (s.height > 3 * em and s.width < s.height)]
    lines: list[tuple[tuple[int, ...], _Line]] = []
    if body:
        _order(_merge_words(body, em), em, lines, ())
    # The usual gap between consecutive lines of each flow (column).
    gaps: dict[tuple[int, ...], list[float]] = {}
    for (flow, above), (next_flow, below) in itertools.pairwise(lines):
        if flow == next_flow and _bottom(above) > _top(below):
            gaps.setdefault(flow, []).append(_bottom(above) - _top(below))
    usual = {flow: statistics.median(values) for flow, values in gaps.items()}
    paragraphs: list[list[str]] = []
    previous: tuple[tuple[int, ...], _Line] | None = None
    for flow, line in lines:
        text = _line_text(line, em)
        new = previous is None
        if previous is not None:
            if previous[0] == flow:
                gap = _bottom(previous[1]) - _top(line)
                new = gap > usual.get(flow, 0.0) + em / 2
            else:  # a new column: a paragraph ends where a sentence does
                new = paragraphs[-1][-1].rstrip().endswith((".", "!", "?", ":"))
        if new:
            paragraphs.append([text])
        else:
            paragraphs[-1].append(text)
        previous = (flow, line)
    if margin:
        paragraphs.append([_clean(s.text).strip() for s in margin])
    return "\n\n".join(p for p in (_join(lines) for lines in paragraphs) if p)


def _join(lines: list[str]) -> str:
    out = ""
    for line in lines:
        if out.endswith("\x02"):
            out = out[:-1] + line.lstrip()
        else:
            out = f"{out}\n{line}" if out else line
    return out.replace("\x02", "-").strip()
