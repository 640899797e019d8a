"""The PDF extraction cache and the worker process that fills it (issue 18, DESIGN §13).

A PDF is untrusted input parsed by C code, so it is never parsed in the sync's own process. A
worker (one per sync, started on the first cache miss) extracts one PDF at a time under an
address-space limit (``[pdf] max_memory_mb``); a PDF that takes longer than
``[pdf] max_seconds`` (plus a grace period for the page in hand), crashes PDFium or exhausts
the memory limit costs that worker, which is killed and replaced, and the PDF is skipped with
one line. The worker loads :mod:`pinakes_core.read.pdf` by file path, so it starts in a fraction of
a second without importing the rest of Pinakes.

The cache lives in ``.pinakes/cache/extract/``, one JSON-lines file per PDF content:
``<content hash>-<extractor fingerprint>-p<max pages>.jsonl`` holding a line per page and a
final summary line (or one ``error`` line for a PDF that can never be read: encrypted,
corrupt, truncated). It sits beside the store, not in it, so ``pnk sync --rebuild`` (which
builds a new store) re-uses every extraction; a new extractor version or PDFium build changes
the fingerprint, and so re-extracts. Files are written to a temporary name and renamed, so a
killed sync never leaves half an entry. Entries no indexed document uses are removed at the end
of a sync (:meth:`Extractor.collect`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["CACHE_DIR", "Extraction", "ExtractionError", "Extractor", "PdfLimits", "pdf_findings"]

log = logging.getLogger(__name__)

#: The cache folder, relative to the store folder ``.pinakes/``.
CACHE_DIR = Path("cache") / "extract"
#: The names :meth:`Extractor.key` makes (and a clock-stopped ``.once``), the only ones
#: :meth:`Extractor.collect` deletes.
_ENTRY = re.compile(r"[0-9a-f]{16,128}-[\w.-]{1,200}-p\d+\.jsonl(?:\.once)?")
# Seconds the worker may overrun ``max_seconds`` (the page in hand finishing) before it is killed.
_GRACE_SECONDS = 15.0
# Seconds to wait for a new worker to say it is ready.
_START_SECONDS = 30.0


@dataclass(frozen=True)
class PdfLimits:
    """``[pdf]`` limits applied to every PDF (see :class:`pinakes_core.config.PdfConfig`)."""

    max_pages: int = 5_000
    max_seconds: float = 120.0
    max_memory_mb: int = 2_048


@dataclass
class Extraction:
    """The text of one PDF, page by page (``pages[0]`` is page 1), and what was left out.

    Attributes:
        pages: text of each page read, in order; a page without a text layer is ``""``.
        page_count: pages in the document (more than ``len(pages)`` when extraction stopped).
        title: the metadata title or the first large-font line of page 1, if any.
        empty_pages: pages without text (scanned images or blank).
        failed_pages: pages PDFium could not load.
        stopped_at: pages read before a cap or time limit stopped the extraction, if one did.
        stop_reason: which limit it was.
        cached: whether this came from the cache.
    """

    pages: list[str]
    page_count: int
    title: str | None = None
    empty_pages: list[int] = field(default_factory=list)
    failed_pages: list[int] = field(default_factory=list)
    stopped_at: int | None = None
    stop_reason: str | None = None
    cached: bool = False


class ExtractionError(Exception):
    """The PDF yields no text; ``reason`` is the sync report's skip line for it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# The worker: reads requests from stdin (a JSON header line, then the PDF's bytes), writes
# the cache entry, answers one JSON line on stdout. Loaded with pdf.py by path, not by import.
_WORKER = r"""
import importlib.util, json, os, resource, sys, time
memory = int(sys.argv[2]) * 1024 * 1024
try:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
except (ValueError, OSError):
    pass
spec = importlib.util.spec_from_file_location("_pinakes_pdf", sys.argv[1])
pdf = sys.modules["_pinakes_pdf"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pdf)
out = sys.stdout
out.write(json.dumps({"ready": pdf.version_fingerprint()}) + "\n")
out.flush()
for header in sys.stdin.buffer:
    request = json.loads(header)
    data = sys.stdin.buffer.read(request["size"])
    temp = request["path"] + ".tmp"
    summary = pdf.PdfSummary()
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            try:
                for page in pdf.extract(
                    data,
                    max_pages=request["max_pages"],
                    max_seconds=request["max_seconds"],
                    summary=summary,
                ):
                    handle.write(json.dumps({"page": page.number, "text": page.text}) + "\n")
            except pdf.PdfError as exc:
                handle.write(json.dumps({"error": exc.reason}) + "\n")
            else:
                handle.write(json.dumps({"summary": summary.__dict__}) + "\n")
        keep = summary.stop_reason is None or "time" not in summary.stop_reason
        os.replace(temp, request["path"] if keep else request["path"] + ".once")
        reply = {"ok": request["path"] if keep else request["path"] + ".once"}
    except MemoryError:
        reply = {"failed": "PDF needs more memory than [pdf] max_memory_mb allows; it was not indexed"}
    except Exception as exc:
        reply = {"failed": f"PDF could not be extracted ({type(exc).__name__}); it was not indexed"}
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    del data
    out.write(json.dumps(reply) + "\n")
    out.flush()
"""


class _Worker:
    """One extraction worker process and its pipes."""

    def __init__(self, memory_mb: int) -> None:
        script = Path(__file__).with_name("pdf.py")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _WORKER, str(script), str(memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        ready = self.reply(_START_SECONDS)
        if ready is None or "ready" not in ready:
            self.kill()
            raise ExtractionError("PDF was not indexed: the PDF worker did not start")
        self.fingerprint = str(ready["ready"])

    def reply(self, timeout: float) -> dict[str, Any] | None:
        stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            return None
        line = stdout.readline()
        if not line:
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, request: dict[str, Any], data: bytes, timeout: float) -> dict[str, Any] | None:
        stdin: IO[bytes] = self.proc.stdin  # type: ignore[assignment]
        try:
            stdin.write(json.dumps({**request, "size": len(data)}).encode() + b"\n")
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, OSError):
            return None
        return self.reply(timeout)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class Extractor:
    """PDF text for one sync: from the cache when it has the file's content, else a worker.

    Use as a context manager (or call :meth:`close`) so the worker process ends with the sync.
    """

    def __init__(self, store_dir: Path, limits: PdfLimits) -> None:
        self.folder = store_dir / CACHE_DIR
        self.limits = limits
        self._worker: _Worker | None = None
        self._fingerprint: str | None = None
        #: extractions served from the cache / made by the worker during this sync.
        self.hits = 0
        self.misses = 0
        #: content hashes asked for during this sync (their entries survive :meth:`collect`).
        self.seen: set[str] = set()

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the worker process, if one was started."""
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    @property
    def fingerprint(self) -> str:
        """The extractor's identity (module version and PDFium build), part of every cache key."""
        if self._fingerprint is None:
            from pinakes_core.read.pdf import version_fingerprint

            self._fingerprint = version_fingerprint()
        return self._fingerprint

    def key(self, content_hash: str) -> str:
        """The cache file name for a PDF whose content hash is ``content_hash``."""
        return f"{content_hash}-{self.fingerprint}-p{self.limits.max_pages}.jsonl"

    def extract(self, content_hash: str, data: bytes) -> Extraction:
        """Return the text of the PDF ``data`` (whose content hash is ``content_hash``).

        Raises:
            ExtractionError: the PDF is encrypted, corrupt or truncated, or the worker failed
                on it (time limit, memory limit, crash).
        """
        self.seen.add(content_hash)
        path = self.folder / self.key(content_hash)
        try:
            found = _load(path)
        except ExtractionError:  # a PDF known to be unreadable: known without a worker
            self.hits += 1
            raise
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._worker is None or self._worker.proc.poll() is not None:
            self._worker = _Worker(self.limits.max_memory_mb)
            if self._worker.fingerprint != self.fingerprint:  # pragma: no cover - a mixed install
                log.warning("Pinakes: the PDF worker runs another PDFium build than this process.")
        request = {
            "path": str(path),
            "max_pages": self.limits.max_pages,
            "max_seconds": self.limits.max_seconds,
        }
        started = time.monotonic()
        answer = self._worker.ask(request, data, self.limits.max_seconds + _GRACE_SECONDS)
        if answer is None:
            self._worker.kill()
            self._worker = None
            if time.monotonic() - started >= self.limits.max_seconds:
                raise ExtractionError(
                    f"PDF took over [pdf] max_seconds = {self.limits.max_seconds:g}; it was not indexed"
                )
            raise ExtractionError(
                "PDF crashed the PDF reader (a malformed file); it was not indexed"
            )
        if "failed" in answer:
            self._worker.kill()  # a MemoryError may leave it in a bad state
            self._worker = None
            raise ExtractionError(str(answer["failed"]))
        written = Path(str(answer["ok"]))
        result = _load(written, cached=False)
        if written.suffix == ".once":  # stopped by the clock: not cached, it may finish next time
            written.unlink(missing_ok=True)
        if result is None:
            raise ExtractionError("PDF was not indexed: its extraction could not be read back")
        return result

    def collect(self, keep: set[str]) -> int:
        """Delete cache entries whose content hash is not in ``keep`` or whose key is stale.

        Returns:
            The number of files removed.
        """
        if not self.folder.is_dir():
            return 0
        wanted = {self.key(h) for h in keep}
        removed = 0
        # Only names this cache makes, and never through a link (the folder is checked by
        # `derived.store_dir`; a link that is the folder itself is refused here too).
        if self.folder.is_symlink():
            return 0
        for entry in self.folder.iterdir():
            if entry.name not in wanted and _ENTRY.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    entry.unlink()
                    removed += 1
        return removed


def _load(path: Path, *, cached: bool = True) -> Extraction | None:
    """Read a cache entry; ``None`` when it is missing or unreadable (it is then rebuilt).

    Raises:
        ExtractionError: the entry records a PDF that can never be read.
    """
    try:
        handle = path.open(encoding="utf-8")
    except OSError:
        return None
    pages: list[str] = []
    with handle:
        try:
            for line in handle:
                record = json.loads(line)
                if "error" in record:
                    raise ExtractionError(str(record["error"]))
                if "summary" in record:
                    s = record["summary"]
                    return Extraction(
                        pages=pages,
                        page_count=int(s["page_count"]),
                        title=s.get("title"),
                        empty_pages=list(s.get("empty_pages", [])),
                        failed_pages=list(s.get("failed_pages", [])),
                        stopped_at=s.get("stopped_at"),
                        stop_reason=s.get("stop_reason"),
                        cached=cached,
                    )
                pages.extend([""] * (int(record["page"]) - 1 - len(pages)))
                pages.append(str(record["text"]))
        except (ValueError, KeyError, TypeError):
            pass
    log.warning("Pinakes: the extraction cache entry %s is damaged; extracting again.", path.name)
    path.unlink(missing_ok=True)
    return None


def pdf_findings(rel: str, extraction: Extraction, warnings: list[str]) -> str | None:
    """Why a PDF yields nothing (the skip reason), else ``None``; partial losses are warnings."""
    read = len(extraction.pages)
    empty = extraction.empty_pages
    if not read:
        return f"no page could be read ({extraction.stop_reason or 'every page failed'})"
    if len(empty) == read:
        return f"no text layer (scanned?); {read} pages skipped"
    if empty:
        warnings.append(
            f"{rel}: no text layer (scanned?) on page(s) {_page_list(empty)}; "
            f"{len(empty)} pages skipped"
        )
    if extraction.failed_pages:
        warnings.append(
            f"{rel}: page(s) {_page_list(extraction.failed_pages)} could not be read and were "
            "skipped"
        )
    if extraction.stopped_at is not None:
        warnings.append(
            f"{rel}: only the first {extraction.stopped_at} of {extraction.page_count} pages "
            f"were indexed ({extraction.stop_reason})"
        )
    return None


def _page_list(pages: list[int], limit: int = 12) -> str:
    """``[3, 4, 5, 9]`` → ``"3-5, 9"`` (at most ``limit`` ranges, then "…")."""
    ranges: list[str] = []
    start = prev = pages[0]
    for page in [*pages[1:], None]:
        if page is not None and page == prev + 1:
            prev = page
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        if page is not None:
            start = prev = page
    return ", ".join(ranges[:limit]) + (", …" if len(ranges) > limit else "")
