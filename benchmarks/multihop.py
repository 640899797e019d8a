"""Multi-hop passage-retrieval benchmark: recall@2 / recall@5 on 2Wiki, MuSiQue and HotpotQA.

Every corpus passage becomes one Markdown document (``# <title>\\n\\n<text>\\n``) in a temporary
knowledge base; each question is run through ``KB.search`` with one channel configuration and the
hits are mapped back to passages (a passage is identified, as in the HippoRAG papers, by
``title + "\\n" + text``). Passages are ranked by the first appearance of their document among the
hits, so several chunks of one document count once.

Recall@k of one question is ``|gold ∩ top-k| / |gold|``; the reported figure is the mean over the
scored questions, as a percentage with one decimal, next to the published baselines of
``../shared/datasets/published-baselines.md`` (Table A, HippoRAG 2 paper).

Gold passages:

* 2Wiki: the corpus passages whose title is in ``gold_titles``. Gold is counted per *title*: a
  title with several passages is one gold unit, satisfied by any of its passages (the shipped
  6,119-passage corpus has unique titles, so this equals passage-level recall there).
  Questions whose ``gold_titles`` is empty have no gold passage in the corpus and cannot be scored;
  they are left out of the mean (and counted as ``unscored``). Recall is reported on all scored
  questions and on the ``complete`` subset (see :data:`COMPLETE_DEFINITION`).
* MuSiQue: the ``paragraphs`` with ``is_supporting`` true.
* HotpotQA: the passages of the titles named in ``supporting_facts``.

A gold unit with no passage in the corpus stays in the denominator (it can never be retrieved) and
is counted in ``gold_missing``.

Typical runs (from the repository root)::

    uv run python benchmarks/multihop.py --dataset musique --limit 20 --configs bm25,dense,hybrid
    uv run python benchmarks/multihop.py --dataset all --markdown
    uv run python benchmarks/multihop.py --questions q.json --corpus c.json --json

The KB is cached under ``--workdir`` (default ``$TMPDIR/pinakes-multihop``) in a folder keyed by a
hash of the corpus file, so re-runs skip writing and embedding the corpus.

Why one script of this length (issue 37): the three data sets' readers, the scoring and the
report against the published baselines are one reproducible command; each reader is short and
sits beside the others so that a reader can check they are scored alike.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinakes_core.manage.eval import matrix_configs

REPO_ROOT = Path(__file__).resolve().parent.parent
DATASETS_DIR = REPO_ROOT.parent / "shared" / "datasets"
BASELINES_FILE = DATASETS_DIR / "published-baselines.md"

#: Built-in datasets: name → (questions file, corpus file, label), relative to DATASETS_DIR.
DATASETS: dict[str, tuple[str, str, str]] = {
    "2wiki": (
        "2wikimultihopqa/questions_dev.json",
        "2wikimultihopqa/corpus.json",
        "2Wiki dev-500",
    ),
    "musique": (
        "musique/questions_train100.json",
        "musique/corpus_train100.json",
        "MuSiQue train-100",
    ),
    "hotpotqa": (
        "hotpotqa/questions_train100.json",
        "hotpotqa/corpus_train100.json",
        "HotpotQA train-100",
    ),
}

#: Column of Table A in published-baselines.md for each question format.
BASELINE_COLUMN = {"2wiki": "2Wiki", "musique": "MuSiQue", "hotpotqa": "HotpotQA"}

#: Table A rows shown beside our numbers: (label, prefix of the row's first cell).
BASELINE_ROWS = [
    ("BM25", "BM25"),
    ("Contriever", "Contriever"),
    ("GTR (T5-base)", "GTR"),
    ("NV-Embed-v2 (7B)", "NV-Embed-v2"),
    ("HippoRAG 2 (Llama-3.3-70B)", "HippoRAG 2 (Llama"),
]

#: Channel configurations: core's evaluation matrix (graph ones only when their plugin is there).
CONFIGS: dict[str, list[str]] = matrix_configs()

COMPLETE_DEFINITION = (
    "2Wiki questions flagged complete=true: every entity the question's evidence triples are "
    "about has its passage in the corpus (equivalently |gold_titles| equals the number of distinct "
    "evidence subjects; that rule is used when the flag is absent)"
)

#: Chunks asked from KB.search per question; doubled until the hits cover enough passages.
DEFAULT_CHUNKS = 20
MAX_CHUNKS = 200
KS = (2, 5)

#: Bump when the document layout changes, so cached KBs are rebuilt.
BUILD_VERSION = "1"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- data -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Passage:
    """One corpus passage."""

    title: str
    text: str

    @property
    def key(self) -> str:
        return passage_key(self.title, self.text)


@dataclass
class Question:
    """One question with its gold units (each a set of acceptable passage keys)."""

    qid: str
    text: str
    gold: list[frozenset[str]]
    complete: bool | None = None
    qtype: str | None = None
    gold_missing: int = 0


def passage_key(title: str, text: str) -> str:
    return f"{title}\n{text}"


def parse_corpus(data: Any) -> list[Passage]:
    """Return the passages of a corpus in any of the supported shapes, first occurrence kept.

    Shapes: a list of ``{"title", "text"}`` (``paragraph_text`` also accepted), or a dict
    ``title → list of sentences`` (HotpotQA; sentences are joined as they are, since they carry
    their own leading spaces) or ``title → text``.
    """
    pairs: list[tuple[str, str]] = []
    if isinstance(data, dict):
        for title, body in data.items():
            text = "".join(body) if isinstance(body, list) else str(body)
            pairs.append((str(title), text))
    elif isinstance(data, list):
        for item in data:
            if not isinstance(item, dict) or "title" not in item:
                raise ValueError(f"corpus items need a 'title' field, got {item!r:.80}")
            raw = item.get("text", item.get("paragraph_text"))
            if raw is None:
                raise ValueError(f"corpus item {item['title']!r} has no 'text'")
            pairs.append((str(item["title"]), "".join(raw) if isinstance(raw, list) else str(raw)))
    else:
        raise ValueError("a corpus is a JSON list of {title, text} or a dict title → sentences")
    seen: set[str] = set()
    passages: list[Passage] = []
    for title, text in pairs:
        passage = Passage(title, text)
        if passage.key not in seen:
            seen.add(passage.key)
            passages.append(passage)
    return passages


def detect_format(questions: Sequence[dict[str, Any]]) -> str:
    """Return ``"2wiki"``, ``"musique"`` or ``"hotpotqa"`` from the fields of the first question."""
    if not questions:
        raise ValueError("the questions file holds no questions")
    first = questions[0]
    if "gold_titles" in first:
        return "2wiki"
    if isinstance(first.get("paragraphs"), list) and any(
        "is_supporting" in p for p in first["paragraphs"]
    ):
        return "musique"
    if "supporting_facts" in first:
        return "hotpotqa"
    raise ValueError(
        "unknown question format: expected 'gold_titles' (2Wiki), 'paragraphs' with "
        f"'is_supporting' (MuSiQue) or 'supporting_facts' (HotpotQA); got fields {sorted(first)}"
    )


def _by_title(passages: Iterable[Passage]) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for passage in passages:
        index.setdefault(passage.title, set()).add(passage.key)
    return index


def _title_units(
    titles: Iterable[str], by_title: dict[str, set[str]]
) -> tuple[list[frozenset[str]], int]:
    units: list[frozenset[str]] = []
    missing = 0
    for title in dict.fromkeys(titles):  # dedupe, keep order
        keys = by_title.get(title)
        if keys:
            units.append(frozenset(keys))
        else:
            units.append(frozenset())  # unretrievable, but still in the denominator
            missing += 1
    return units, missing


def _complete_2wiki(item: dict[str, Any]) -> bool:
    if "complete" in item:
        return bool(item["complete"])
    subjects = {str(triple[0]) for triple in item.get("evidence", []) if triple}
    gold = set(item.get("gold_titles", []))
    return bool(gold) and len(gold) >= len(subjects)


def parse_questions(
    data: Sequence[dict[str, Any]], passages: Sequence[Passage], fmt: str | None = None
) -> tuple[str, list[Question]]:
    """Return the format and the questions with their gold units resolved against ``passages``."""
    fmt = fmt or detect_format(data)
    by_title = _by_title(passages)
    known = {p.key for p in passages}
    questions: list[Question] = []
    for n, item in enumerate(data):
        qid = str(item.get("id", item.get("_id", n)))
        if fmt == "2wiki":
            units, missing = _title_units(item["gold_titles"], by_title)
            complete: bool | None = _complete_2wiki(item)
        elif fmt == "musique":
            keys = [
                passage_key(p["title"], p["paragraph_text"])
                for p in item["paragraphs"]
                if p.get("is_supporting")
            ]
            keys = list(dict.fromkeys(keys))
            units = [frozenset({key}) for key in keys]
            missing = sum(1 for key in keys if key not in known)
            complete = None
        elif fmt == "hotpotqa":
            units, missing = _title_units((fact[0] for fact in item["supporting_facts"]), by_title)
            complete = None
        else:
            raise ValueError(f"unknown format {fmt!r}")
        questions.append(
            Question(
                qid=qid,
                text=str(item["question"]),
                gold=units,
                complete=complete,
                qtype=item.get("question_type", item.get("type")),
                gold_missing=missing,
            )
        )
    return fmt, questions


def load_json(path: Path) -> Any:
    """Load a JSON file, or a JSON-lines file (one object per line)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


# -- metric ---------------------------------------------------------------------------------------


def recall_at_k(ranked: Sequence[str], gold: Sequence[frozenset[str]], k: int) -> float | None:
    """Return ``|gold ∩ top-k| / |gold|`` in [0, 1], or ``None`` when there is no gold.

    ``ranked`` is a list of passage keys, best first; each gold unit is a set of keys any of
    which satisfies it.
    """
    if not gold:
        return None
    top = set(ranked[:k])
    return sum(1 for unit in gold if unit & top) / len(gold)


def mean_recall(per_question: Sequence[float | None]) -> float | None:
    """Average the scored questions, as a percentage rounded to one decimal."""
    scored = [r for r in per_question if r is not None]
    if not scored:
        return None
    return round(100.0 * sum(scored) / len(scored), 1)


def rank_passages(paths: Iterable[str], path_to_key: dict[str, str]) -> list[str]:
    """Map hit paths to passage keys, keeping each passage at its first appearance."""
    ranked: dict[str, None] = {}
    for path in paths:
        key = path_to_key.get(path)
        if key is not None:
            ranked.setdefault(key)
    return list(ranked)


# -- knowledge base -------------------------------------------------------------------------------


def slug(title: str, limit: int = 60) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    cleaned = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return cleaned[:limit].rstrip("-") or "passage"


def document_text(passage: Passage) -> str:
    return f"# {passage.title}\n\n{passage.text}\n"


@dataclass
class BuiltKB:
    """A synced benchmark KB and how it was built."""

    root: Path
    path_to_key: dict[str, str]
    sync: dict[str, Any] = field(default_factory=dict)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256(BUILD_VERSION.encode())
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _sync_figures(report: Any) -> dict[str, Any]:
    """The timing figures of a sync report, rounded for the output."""
    rate = report.chunks_per_second
    return {
        "seconds": round(report.seconds, 2),
        "embed_seconds": round(report.embed_seconds, 2),
        "chunks_embedded": report.chunks_embedded,
        "chunks_per_second": round(rate, 1) if rate else None,
    }


def build_kb(corpus_file: Path, passages: Sequence[Passage], workdir: Path) -> BuiltKB:
    """Return the KB of ``passages``, writing and syncing it unless a cached build exists."""
    from pinakes_core import KB

    stem = slug(f"{corpus_file.parent.name}-{corpus_file.stem}", 60)
    root = workdir / f"kb-{stem}-{_file_hash(corpus_file)}"
    mapping_file = root / "passages.json"
    build_file = root / "build.json"
    if root.exists() and not (mapping_file.is_file() and build_file.is_file()):
        log(f"removing the unfinished KB at {root}")
        shutil.rmtree(root)

    if not root.exists():
        KB.init(root, name="multihop")
        config = root / "pinakes.toml"
        # Sidecars only carry document ids; 6k extra files would just slow the build down.
        config.write_text(
            config.read_text(encoding="utf-8").replace(
                "[sync]\n", "[sync]\nwrite_sidecars = false\n", 1
            ),
            encoding="utf-8",
        )
        docs = root / "docs"
        docs.mkdir()
        path_to_key: dict[str, str] = {}
        for n, passage in enumerate(passages):
            rel = f"docs/{n:05d}-{slug(passage.title)}.md"
            (root / rel).write_text(document_text(passage), encoding="utf-8")
            path_to_key[rel] = passage.key
        log(f"syncing {len(passages):,} passages into {root} ...")
        with KB.open(root) as kb:
            report = kb.sync(progress=_sync_progress())
        sync = {
            **_sync_figures(report),
            "documents": len(report.added),
            "warnings": len(report.warnings),
            "skipped": len(report.skipped),
        }
        if report.skipped:
            log(f"warning: sync skipped {len(report.skipped)} files, e.g. {report.skipped[0]}")
        mapping_file.write_text(json.dumps(path_to_key, ensure_ascii=False), encoding="utf-8")
        build_file.write_text(json.dumps(sync, indent=1), encoding="utf-8")
        log(
            f"sync: {sync['seconds']} s, {sync['chunks_embedded']:,} chunks embedded, "
            f"{sync['chunks_per_second']} chunks/s"
        )
        return BuiltKB(root, path_to_key, {**sync, "cached": False})

    path_to_key = json.loads(mapping_file.read_text(encoding="utf-8"))
    sync = json.loads(build_file.read_text(encoding="utf-8"))
    with KB.open(root) as kb:
        report = kb.sync()  # a no-op unless the store went stale (e.g. another model)
    if report.chunks_embedded:
        log(f"cached KB re-synced: {report.chunks_embedded:,} chunks embedded")
        sync = {**sync, **_sync_figures(report)}
        build_file.write_text(json.dumps(sync, indent=1), encoding="utf-8")
        return BuiltKB(root, path_to_key, {**sync, "cached": False})
    log(f"using the cached KB at {root} (built in {sync['seconds']} s)")
    return BuiltKB(root, path_to_key, {**sync, "cached": True})


def _sync_progress() -> Any:
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == "embed" and (now - last[0] > 15 or done == total):
            last[0] = now
            log(f"  embedded {done:,}/{total:,} chunks")

    return progress


# -- evaluation -----------------------------------------------------------------------------------


def available_configs() -> list[str]:
    """Return the configuration names whose channels are all registered."""
    return list(CONFIGS)


def retrieve(kb: Any, query: str, channels: list[str], path_to_key: dict[str, str]) -> list[str]:
    """Return the passage keys for ``query``, best first, covering at least max(KS) passages."""
    want = max(KS)
    k = DEFAULT_CHUNKS
    while True:
        result = kb.search(query, k=k, channels=channels)
        ranked = rank_passages((hit.path for hit in result.hits), path_to_key)
        if len(ranked) >= want or len(result.hits) < k or k >= MAX_CHUNKS:
            return ranked
        k = min(2 * k, MAX_CHUNKS)


def scores(
    runs: Sequence[list[str]], questions: Sequence[Question], keep: Sequence[bool] | None = None
) -> dict[str, float | None]:
    chosen = [
        (ranked, q)
        for n, (ranked, q) in enumerate(zip(runs, questions, strict=True))
        if keep is None or keep[n]
    ]
    return {
        f"recall@{k}": mean_recall([recall_at_k(ranked, q.gold, k) for ranked, q in chosen])
        for k in KS
    }


def run_dataset(
    name: str,
    label: str,
    questions_file: Path,
    corpus_file: Path,
    configs: Sequence[str] | None,
    limit: int | None,
    workdir: Path,
    ner_modes: Sequence[str] = ("off",),
) -> dict[str, Any]:
    """Build (or reuse) the KB of one dataset, run every config and return the result object.

    ``ner_modes`` lists the :data:`NER_MODES` to run every config under; a config run with
    NER is labelled ``<config>+<mode>``.
    """
    from pinakes_core import KB

    started = time.perf_counter()
    passages = parse_corpus(load_json(corpus_file))
    fmt, questions = parse_questions(load_json(questions_file), passages)
    if limit is not None:
        questions = questions[:limit]
    scored = [bool(q.gold) for q in questions]
    log(
        f"{label}: {len(questions)} questions ({fmt} format), {len(passages):,} passages "
        f"from {corpus_file}"
    )
    built = build_kb(corpus_file, passages, workdir)

    names = list(configs) if configs else available_configs()
    out: dict[str, Any] = {
        "dataset": name,
        "label": label,
        "format": fmt,
        "questions": len(questions),
        "scored": sum(scored),
        "unscored": len(questions) - sum(scored),
        "gold_missing": sum(q.gold_missing for q in questions),
        "passages": len(passages),
        "configs": {},
        "sync": built.sync,
    }
    complete = [bool(q.complete) for q in questions]
    has_complete = fmt == "2wiki"
    if has_complete:
        out["subsets"] = {
            "complete": {
                "definition": COMPLETE_DEFINITION,
                "questions": sum(c and s for c, s in zip(complete, scored, strict=True)),
                "configs": {},
            }
        }

    for mode in ner_modes:
        settings = NER_MODES[mode]
        out["ner_sync"] = {**out.get("ner_sync", {}), **set_ner(built.root, **settings)}
        with KB.open(built.root) as kb:
            for config in names:
                channels = CONFIGS[config]
                label_ = config if mode == "off" else f"{config}+{mode}"
                if settings.get("auto_entities") and len(channels) > 1:
                    # As the default search then does: the query's entities become a list.
                    channels = [*channels, "entities"]
                kb.search("warm up", k=1, channels=channels)  # load the model / matrix untimed
                t0 = time.perf_counter()
                runs = [retrieve(kb, q.text, channels, built.path_to_key) for q in questions]
                seconds = time.perf_counter() - t0
                result: dict[str, Any] = {
                    **scores(runs, questions),
                    "seconds": round(seconds, 2),
                    "ms_per_query": round(1000 * seconds / max(len(questions), 1), 1),
                }
                out["configs"][label_] = result
                if has_complete:
                    sub = scores(runs, questions, complete)
                    out["subsets"]["complete"]["configs"][label_] = sub
                    extra = f"; complete R@2 {sub['recall@2']} R@5 {sub['recall@5']}"
                else:
                    extra = ""
                log(
                    f"  {label_:<18} R@2 {result['recall@2']}  R@5 {result['recall@5']}  "
                    f"({result['seconds']} s{extra})"
                )
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out


#: ``--ner`` modes: without the entity layer; with it at the [ner] defaults (graph edges and
#: links only); with query entities too (PPR seeds and the automatic entities= list).
NER_MODES: dict[str, dict[str, Any]] = {
    "off": {"enabled": False},
    "ner": {"enabled": True},
    "ner-seeds": {"enabled": True, "seed_mass": 0.3, "auto_entities": True},
}


def set_ner(root: Path, enabled: bool, **settings: Any) -> dict[str, Any]:
    """Turn the KB's NER layer on or off (``[ner]`` in its pinakes.toml) and sync.

    Only the entity layer changes: chunks and vectors stay, and entities already extracted are
    kept in the store, so switching back costs no model run. Returns the sync's NER figures.
    """
    from pinakes_core import KB

    config = root / "pinakes.toml"
    text = config.read_text(encoding="utf-8").split("\n[ner]\n", 1)[0].rstrip("\n")
    lines = [f"enabled = {'true' if enabled else 'false'}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in settings.items()]
    config.write_text(text + "\n\n[ner]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    with KB.open(root) as kb:
        t0 = time.perf_counter()
        kb.sync()
        seconds = time.perf_counter() - t0
        status = kb.status()
    if enabled:
        log(
            f"NER on: sync {seconds:.1f} s, {status.entities:,} entities, {status.mentions:,} mentions"
        )
        return {
            "seconds": round(seconds, 2),
            "entities": status.entities,
            "mentions": status.mentions,
        }
    return {}


# -- reporting ------------------------------------------------------------------------------------


def parse_baselines(text: str) -> dict[str, dict[str, tuple[float, float]]]:
    """Return ``{dataset column: {row label: (R@2, R@5)}}`` from Table A of the baselines file."""
    section = text.split("## Table A", 1)
    if len(section) < 2:
        return {}
    body = section[1].split("\n## ", 1)[0]
    rows = [line for line in body.splitlines() if line.strip().startswith("|")]
    if not rows:
        return {}
    header = [cell.strip() for cell in rows[0].strip().strip("|").split("|")]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for line in rows[1:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        first = cells[0].strip("*").strip()
        label = next((lab for lab, prefix in BASELINE_ROWS if first.startswith(prefix)), None)
        if label is None:
            continue
        for column, cell in zip(header[1:], cells[1:], strict=False):
            match = re.fullmatch(r"([\d.]+)\s*/\s*([\d.]+)", cell)
            if match:
                table.setdefault(column, {}).setdefault(
                    label, (float(match.group(1)), float(match.group(2)))
                )
    return table


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def markdown(result: dict[str, Any], baselines: dict[str, dict[str, tuple[float, float]]]) -> str:
    """Render one dataset's result as a Markdown table beside the published baselines."""
    complete = result.get("subsets", {}).get("complete")
    lines = [
        f"### {result['label']} — {result['questions']} questions "
        f"({result['scored']} scored), {result['passages']:,} passages",
        "",
    ]
    head = "| Retriever | R@2 | R@5 |"
    rule = "|---|---|---|"
    if complete:
        head += f" R@2 complete ({complete['questions']}) | R@5 complete |"
        rule += "---|---|"
    head += " wall s | ms/query |"
    rule += "---|---|"
    lines += [head, rule]
    for config, scores_ in result["configs"].items():
        row = f"| Pinakes {config} | {_fmt(scores_['recall@2'])} | {_fmt(scores_['recall@5'])} |"
        if complete:
            sub = complete["configs"][config]
            row += f" {_fmt(sub['recall@2'])} | {_fmt(sub['recall@5'])} |"
        row += f" {scores_['seconds']:.1f} | {scores_['ms_per_query']:.1f} |"
        lines.append(row)
    published = baselines.get(BASELINE_COLUMN.get(result["format"], ""), {})
    for label, _ in BASELINE_ROWS:
        if label not in published:
            continue
        r2, r5 = published[label]
        row = f"| {label} (published) | {r2:.1f} | {r5:.1f} |"
        if complete:
            row += " – | – |"
        row += " – | – |"
        lines.append(row)
    sync = result["sync"]
    cached = " (cached build; these are the original build's figures)" if sync["cached"] else ""
    lines += [
        "",
        f"Wall time {result['seconds']:.1f} s. Sync {sync['seconds']} s, "
        f"{sync['chunks_embedded']:,} chunks embedded in {sync['embed_seconds']} s, "
        f"{sync['chunks_per_second']} chunks/s{cached}.",
    ]
    notes = []
    if result["unscored"]:
        notes.append(
            f"{result['unscored']} questions have no gold passage in the corpus and are not scored"
        )
    if result["gold_missing"]:
        notes.append(f"{result['gold_missing']} gold passages are absent from the corpus")
    if complete:
        notes.append(f"complete = {complete['definition']}")
    notes.append(
        "published rows: HippoRAG 2 paper, Table 9 (1,000 questions over the pooled corpora: "
        "MuSiQue 11,656, 2Wiki 6,119, HotpotQA 9,811 passages), so only the 2Wiki corpus size matches"
    )
    lines += ["", *[f"* {note}." for note in notes], ""]
    return "\n".join(lines)


# -- command line ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Passage recall@2/@5 of Pinakes retrieval configs on multi-hop QA datasets."
    )
    parser.add_argument(
        "--dataset",
        choices=[*DATASETS, "all"],
        default="all",
        help="built-in dataset from ../shared/datasets (default: all)",
    )
    parser.add_argument("--questions", type=Path, help="a questions file (format auto-detected)")
    parser.add_argument("--corpus", type=Path, help="the corpus file that goes with --questions")
    parser.add_argument(
        "--configs",
        help=f"comma-separated configs from {', '.join(CONFIGS)} (default: all available)",
    )
    parser.add_argument("--limit", type=int, help="only the first N questions (smoke runs)")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "pinakes-multihop",
        help="where the KBs are built and cached (default: %(default)s)",
    )
    parser.add_argument(
        "--ner",
        default="off",
        help="comma-separated NER modes to run every config under: off (no entity layer), ner "
        "(the [ner] defaults), ner-seeds (plus query entities as PPR seeds and entities=); "
        "'all' for the three (needs pinakes-ner)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per dataset")
    parser.add_argument(
        "--markdown", action="store_true", help="print Markdown tables (the default output)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if (args.questions is None) != (args.corpus is None):
        parser.error("--questions and --corpus go together")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    available = available_configs()
    configs: list[str] | None = None
    if args.configs:
        configs = [c.strip() for c in args.configs.split(",") if c.strip()]
        unknown = [c for c in configs if c not in CONFIGS]
        if unknown:
            parser.error(f"unknown configs {unknown}; choose from {', '.join(CONFIGS)}")
        missing = [c for c in configs if c not in available]
        if missing:
            parser.error(
                f"configs {missing} need channels that are not registered "
                f"(available: {', '.join(available)}); install pinakes-graph"
            )

    modes = list(NER_MODES) if args.ner == "all" else args.ner.split(",")
    if any(m not in NER_MODES for m in modes):
        parser.error(f"--ner takes modes from {', '.join(NER_MODES)} (or all)")
    jobs: list[tuple[str, str, Path, Path]] = []
    if args.questions is not None:
        jobs.append(("custom", args.questions.name, args.questions, args.corpus))
    else:
        names = list(DATASETS) if args.dataset == "all" else [args.dataset]
        for name in names:
            questions, corpus, label = DATASETS[name]
            jobs.append((name, label, DATASETS_DIR / questions, DATASETS_DIR / corpus))
    for _, _, questions_file, corpus_file in jobs:
        for path in (questions_file, corpus_file):
            if not path.is_file():
                parser.error(f"{path} does not exist")

    args.workdir.mkdir(parents=True, exist_ok=True)
    baselines = (
        parse_baselines(BASELINES_FILE.read_text(encoding="utf-8"))
        if BASELINES_FILE.is_file()
        else {}
    )
    for name, label, questions_file, corpus_file in jobs:
        result = run_dataset(
            name, label, questions_file, corpus_file, configs, args.limit, args.workdir, modes
        )
        if args.json:
            print(json.dumps(result, ensure_ascii=False), flush=True)
        if args.markdown or not args.json:
            print(markdown(result, baselines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
