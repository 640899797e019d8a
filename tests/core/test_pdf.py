"""PDF sources (issue 18): reading order, page citations, the extraction cache, bad PDFs."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import FakeHashEmbedder, db, make_kb, set_config
from pinakes_core import KB, PinakesError
from pinakes_core.read import extraction as extraction_module
from pinakes_core.read.extraction import ExtractionError, Extractor, PdfLimits
from pinakes_core.read.pdf import PdfSummary, extract
from pinakes_core.read.sections import SliceError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pdf"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "pdf_extract.py"
PAGE_3_PHRASE = "lighthouse keeper"


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("pdf_extract_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages(name: str) -> tuple[list[str], PdfSummary]:
    summary = PdfSummary()
    data = (FIXTURES / name).read_bytes()
    pages = [p.text for p in extract(data, max_pages=100, max_seconds=60, summary=summary)]
    return pages, summary


def _content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# -- extraction ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["two-column", "two-column-interleaved", "table"])
def test_reading_order_keeps_sentences_whole(name: str) -> None:
    bench = _bench()
    truth = json.loads((FIXTURES / f"{name}.truth.json").read_text("utf-8"))
    pages, _ = _pages(f"{name}.pdf")
    scores = bench.score(pages, truth)
    assert scores["char_recall"] >= 0.99, scores
    assert scores["sentences_whole"] == 1.0, scores
    assert scores["order"] == 1.0, scores
    assert scores["page_accuracy"] == 1.0, scores


def test_the_interleaved_fixture_defeats_stream_order() -> None:
    # The fixture really tests column handling: read in content-stream order it is garbled.
    bench = _bench()
    truth = json.loads((FIXTURES / "two-column-interleaved.truth.json").read_text("utf-8"))
    stream = bench.score(bench.pdfium_pages(FIXTURES / "two-column-interleaved.pdf"), truth)
    assert stream["sentences_whole"] < 0.5


def test_a_table_is_read_row_by_row() -> None:
    pages, summary = _pages("table.pdf")
    rows = pages[0].split("\n")
    assert "SQLite FTS5 | 41 MB | 180 ms | 2.1 ms | 0.71" in rows
    assert "Engine | Index size | Cold start | Warm p50 | Recall@10" in rows
    assert summary.title == "Cold-Start Latency of Embedded Search Engines"  # metadata


def test_titles_come_from_metadata_then_the_largest_first_line() -> None:
    _, paper = _pages("two-column.pdf")  # no metadata title: the 15 pt line
    assert paper.title == "Anti-Entropy Repair in Leaderless Replicated Stores"
    _, plain = _pages("two-column-interleaved.pdf")  # one font size: no title
    assert plain.title is None


def test_hyphenated_line_ends_are_joined() -> None:
    pages, _ = _pages("two-column.pdf")
    text = " ".join(pages)
    assert "replicas at once" in " ".join(text.split())  # "repli-" + "cas" on the next line
    assert "\x02" not in text and "\ufffe" not in text


def test_pages_are_streamed_one_at_a_time() -> None:
    summary = PdfSummary()
    pages = extract(
        (FIXTURES / "two-column.pdf").read_bytes(), max_pages=100, max_seconds=60, summary=summary
    )
    first = next(pages)
    assert first.number == 1 and summary.page_count == 4
    assert summary.title is not None  # known after page 1, before page 2 is read
    pages.close()


def test_the_page_cap_stops_extraction() -> None:
    summary = PdfSummary()
    data = (FIXTURES / "two-column.pdf").read_bytes()
    pages = list(extract(data, max_pages=2, max_seconds=60, summary=summary))
    assert [p.number for p in pages] == [1, 2]
    assert summary.stopped_at == 2 and "2-page cap" in (summary.stop_reason or "")


# -- the extractor (worker + cache) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda data: (FIXTURES / "encrypted.pdf").read_bytes(), "PDF is encrypted"),
        (lambda data: data[: len(data) * 9 // 10], "PDF is truncated"),
        (lambda data: data[:2000] + b"\x00garbage" * 50 + b"\n%%EOF\n", "PDF is corrupt"),
    ],
)
def test_unreadable_pdfs_raise_one_clear_reason(tmp_path: Path, make: Any, message: str) -> None:
    bad = make((FIXTURES / "two-column.pdf").read_bytes())
    with Extractor(tmp_path, PdfLimits()) as extractor:
        with pytest.raises(ExtractionError, match=message) as caught:
            extractor.extract(_content_hash(bad), bad)
        assert "not indexed" in caught.value.reason
        # Permanent failures are cached: asking again starts no worker.
        extractor.close()
        with pytest.raises(ExtractionError, match=message):
            extractor.extract(_content_hash(bad), bad)
        assert extractor._worker is None


def test_the_cache_is_hit_and_a_new_extractor_version_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (FIXTURES / "table.pdf").read_bytes()
    key = _content_hash(data)
    with Extractor(tmp_path, PdfLimits()) as extractor:
        first = extractor.extract(key, data)
        second = extractor.extract(key, data)
    assert not first.cached and second.cached
    assert second.pages == first.pages and second.title == first.title
    monkeypatch.setattr("pinakes_core.read.pdf.EXTRACTOR_VERSION", "test-next")
    with Extractor(tmp_path, PdfLimits()) as extractor:
        assert not extractor.extract(key, data).cached
        assert extractor.collect({key}) == 1  # the old version's entry goes
        assert [p.name for p in extractor.folder.iterdir()] == [extractor.key(key)]


def test_a_crashed_worker_costs_one_pdf_and_is_replaced(tmp_path: Path) -> None:
    data = (FIXTURES / "table.pdf").read_bytes()
    with Extractor(tmp_path, PdfLimits()) as extractor:
        extractor.extract("warm-up", data)
        assert extractor._worker is not None
        extractor._worker.proc.kill()  # as if PDFium had crashed on the next file
        extractor._worker.proc.wait()
        extractor._worker.proc.poll = lambda: None  # type: ignore[method-assign]
        with pytest.raises(ExtractionError, match="crashed the PDF reader"):
            extractor.extract("victim", data)
        assert extractor.extract("next", data).pages[0].startswith("Cold-Start Latency")


def test_the_time_limit_stops_a_pdf_and_is_not_cached(tmp_path: Path) -> None:
    data = (FIXTURES / "two-column.pdf").read_bytes()
    with Extractor(tmp_path, PdfLimits(max_seconds=1e-9)) as extractor:
        result = extractor.extract(_content_hash(data), data)
        assert result.stopped_at == 0 and "time limit" in (result.stop_reason or "")
        assert not any(extractor.folder.iterdir())  # a clock-bound result may finish next time


# -- a KB with PDFs --------------------------------------------------------------------------


@pytest.fixture
def pdf_kb(tmp_path: Path, fake_embedder: FakeHashEmbedder) -> KB:
    root = make_kb(tmp_path / "papers", {"notes.md": "# Reading list\n\nPapers to read.\n"})
    for name in ("two-column", "two-column-interleaved", "table", "scanned", "encrypted"):
        shutil.copy(FIXTURES / f"{name}.pdf", root / f"{name}.pdf")
    return KB.open(root, embedder=fake_embedder)


def test_sync_indexes_pdfs_and_skips_bad_ones_with_their_reason(pdf_kb: KB) -> None:
    report = pdf_kb.sync()
    assert sorted(report.added) == [
        "notes.md",
        "table.pdf",
        "two-column-interleaved.pdf",
        "two-column.pdf",
    ]
    skipped = {s.path: s.reason for s in report.skipped}
    assert skipped == {
        "encrypted.pdf": "PDF is encrypted (it needs a password); it was not indexed",
        "scanned.pdf": "no text layer (scanned?); 2 pages skipped",
    }
    assert report.pdfs_extracted == 5 and report.pdfs_from_cache == 0
    # Sidecars are minted for indexed PDFs only.
    assert (pdf_kb.root / "two-column.pdf.pnk.yaml").exists()
    assert not (pdf_kb.root / "encrypted.pdf.pnk.yaml").exists()
    titles = dict(db(pdf_kb.root).execute("SELECT path, title FROM documents").fetchall())
    assert titles["two-column.pdf"] == "Anti-Entropy Repair in Leaderless Replicated Stores"
    assert titles["table.pdf"] == "Cold-Start Latency of Embedded Search Engines"
    assert titles["two-column-interleaved.pdf"] == "two-column-interleaved"  # the file name


def test_a_phrase_on_page_3_is_cited_as_page_3(pdf_kb: KB) -> None:
    pdf_kb.sync()
    result = pdf_kb.search(PAGE_3_PHRASE, source_type="pdf", channels=["bm25"], k=10)
    hit = next(h for h in result.hits if h.path == "two-column.pdf")
    assert PAGE_3_PHRASE in hit.text
    assert (hit.page_start, hit.page_end, hit.source_type) == (3, 3, "pdf")
    # Every PDF chunk is on one page, and the page's marker line is in no chunk.
    rows = db(pdf_kb.root).execute(
        "SELECT c.text, c.page_start, c.page_end FROM chunks c JOIN documents d USING (doc_id) "
        "WHERE d.source_type = 'pdf'"
    )
    for text, start, end in rows:
        assert start == end and start is not None and "[page " not in text


def test_read_serves_pages_from_the_index(pdf_kb: KB) -> None:
    pdf_kb.sync()
    view = pdf_kb.read("two-column.pdf", pages=(3, 3))
    assert view.text.startswith("[page 3]\n3 Evaluation")
    assert PAGE_3_PHRASE in view.text and "[page 4]" not in view.text
    assert (view.pages, view.page_count, view.source_type) == ((3, 3), 4, "pdf")
    whole = pdf_kb.read("two-column.pdf")
    assert [f"[page {n}]" in whole.text for n in range(1, 5)] == [True] * 4
    assert whole.pages == (1, 4)
    both = pdf_kb.read("two-column.pdf", pages=(2, 99))  # a last page past the end is clamped
    assert both.pages == (2, 4) and both.text.startswith("[page 2]")
    hits = pdf_kb.search(PAGE_3_PHRASE, channels=["bm25"]).hits
    hit = next(h for h in hits if h.path == "two-column.pdf")
    lines = pdf_kb.read(hit.doc_id, lines=hit.lines)
    assert hit.text.split("\n")[0] in lines.text and lines.pages == (3, 3)


@pytest.mark.parametrize(
    ("doc", "pages", "message"),
    [
        ("two-column.pdf", (5, 6), "has 4 pages"),
        ("two-column.pdf", (3, 2), "not valid"),
        ("notes.md", (1, 1), "has no pages"),
    ],
)
def test_bad_page_ranges_are_one_clear_error(
    pdf_kb: KB, doc: str, pages: tuple[int, int], message: str
) -> None:
    pdf_kb.sync()
    with pytest.raises(SliceError, match=message):
        pdf_kb.read(doc, pages=pages)


def test_the_cache_is_hit_on_rebuild(pdf_kb: KB, monkeypatch: pytest.MonkeyPatch) -> None:
    pdf_kb.sync()
    chunks_before = db(pdf_kb.root).execute("SELECT COUNT(*) FROM chunks").fetchone()[0]

    def no_worker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a rebuild must not parse a PDF again")

    monkeypatch.setattr(extraction_module, "_Worker", no_worker)
    report = pdf_kb.sync(rebuild=True)
    assert report.rebuilt == "rebuild requested"
    assert report.pdfs_extracted == 0 and report.pdfs_from_cache == 5
    assert db(pdf_kb.root).execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == chunks_before
    assert len(report.skipped) == 2  # the bad PDFs are still reported, from the cache too


def test_cache_entries_of_removed_pdfs_are_collected(pdf_kb: KB) -> None:
    pdf_kb.sync()
    folder = pdf_kb.root / ".pinakes" / "cache" / "extract"
    assert len(list(folder.iterdir())) == 5
    (pdf_kb.root / "table.pdf").unlink()
    report = pdf_kb.sync()
    assert report.removed == ["table.pdf"]
    assert len(list(folder.iterdir())) == 4


def test_a_sidecar_titles_and_tags_a_pdf(pdf_kb: KB) -> None:
    (pdf_kb.root / "table.pdf.pnk.yaml").write_text(
        "id: 01JAXR3T5W6Z8Q9N0P1R2S3T4V\ntitle: Search engine cold starts\ntags: [benchmarks]\n",
        encoding="utf-8",
    )
    pdf_kb.sync()
    hits = pdf_kb.search("cold start", tags=["benchmarks"], channels=["bm25"]).hits
    assert {h.path for h in hits} == {"table.pdf"}
    assert hits[0].title == "Search engine cold starts" and hits[0].doc_id.startswith("01JAXR")


def test_the_source_type_filter(pdf_kb: KB) -> None:
    pdf_kb.sync()
    pdfs = pdf_kb.search("replicas", source_type="pdf", channels=["bm25"], k=20).hits
    assert pdfs and {h.source_type for h in pdfs} == {"pdf"}
    both = pdf_kb.search("read", source_type=["markdown", "pdf"], channels=["bm25"], k=20).hits
    assert "markdown" in {h.source_type for h in both}
    with pytest.raises(PinakesError, match="source type 'word' is not one of"):
        pdf_kb.search("replicas", source_type="word")


def test_a_pdf_that_became_unreadable_leaves_the_index(pdf_kb: KB) -> None:
    pdf_kb.sync()
    shutil.copy(FIXTURES / "encrypted.pdf", pdf_kb.root / "table.pdf")
    report = pdf_kb.sync()
    assert "table.pdf" in {s.path for s in report.skipped}
    paths = {r[0] for r in db(pdf_kb.root).execute("SELECT path FROM documents")}
    assert "table.pdf" not in paths


def test_pdf_limits_come_from_the_config(pdf_kb: KB, fake_embedder: FakeHashEmbedder) -> None:
    set_config(pdf_kb.root, "pdf", "max_pages = 2")
    kb = KB.open(pdf_kb.root, embedder=fake_embedder)
    report = kb.sync()
    assert "two-column.pdf: only the first 2 of 4 pages were indexed (the 2-page cap)" in (
        report.warnings
    )
    with pytest.raises(SliceError, match="has 2 pages"):
        kb.read("two-column.pdf", pages=(3, 3))


@pytest.mark.slow
def test_a_2000_page_pdf_is_indexed_page_by_page(
    tmp_path: Path, fake_embedder: FakeHashEmbedder
) -> None:
    bench = _bench()
    root = make_kb(tmp_path / "long", {})
    bench.build_long(root / "long.pdf", 2000)
    kb = KB.open(root, embedder=fake_embedder)
    report = kb.sync()
    assert report.added == ["long.pdf"] and not report.skipped
    view = kb.read("long.pdf", pages=(1999, 2000))
    assert view.page_count == 2000 and view.pages == (1999, 2000)
    # Page 1999 is the fixture's page 3 again (the fixture's four pages repeat).
    assert view.text.startswith("[page 1999]\n3 Evaluation")
    pages = {
        h.page_start
        for h in kb.search(PAGE_3_PHRASE, channels=["bm25"], k=50).hits
        if h.page_start is not None
    }
    assert pages and all(page % 4 == 3 for page in pages)


def test_a_note_write_never_replaces_a_pdf(pdf_kb: KB) -> None:
    from pinakes_core.manage.writing import PathError, write_note

    pdf_kb.sync()
    before = (pdf_kb.root / "table.pdf").read_bytes()
    with pytest.raises(PathError, match="is a pdf file, not a note"):
        write_note(pdf_kb, "table.pdf", "oops", overwrite=True)
    assert (pdf_kb.root / "table.pdf").read_bytes() == before
