"""Run ``pnk eval`` on every labelled question set: golden, nushell and dendron (DESIGN §11).

The three sets and where their documents come from:

- ``golden``:  ``golden/kb`` with ``golden/questions.jsonl`` (our own wiki; tune on this one);
- ``nushell``: ``../shared/corpora/nushell-docs`` with ``golden/nushell/questions.jsonl``;
- ``dendron``: ``../shared/corpora/dendron-site`` with ``golden/dendron/questions.jsonl``;
- ``personal``: ``golden/personal/kb`` with ``golden/personal/questions.jsonl`` (33 personal
  notes; ours, tune on it like golden);
- ``example``: the bundled example KB ``examples/distsys-notes`` with
  ``golden/example/questions.jsonl`` (20 questions; ours).

The nushell and dendron sets are held out: report them, never tune on them.

Each folder is staged as a KB in a cache folder outside the repo (default
``<user cache dir>/pinakes/eval-kbs/<set>``; ``--cache DIR`` or ``PINAKES_EVAL_CACHE`` move it).
Staging mirrors the source: it copies only files whose size or modification time changed and
deletes files the source no longer has, so the following sync is incremental (the first full
sync of nushell or dendron takes minutes; later runs take seconds). The sources are only read.

Usage::

    uv run python benchmarks/eval_sets.py                     # default configuration, all sets
    uv run python benchmarks/eval_sets.py --matrix            # every channel configuration too
    uv run python benchmarks/eval_sets.py --sets nushell --configs bm25,hybrid
    uv run python benchmarks/eval_sets.py --reader on         # the reader on, whatever the KB says
    uv run python benchmarks/eval_sets.py --render FILE       # Markdown of a saved JSON run
    uv run python benchmarks/eval_sets.py --store postgres    # the index in PostgreSQL (issue 38)

With ``--store postgres`` each set is staged in its own folder (``<set>-postgres``) whose
``pinakes.toml`` says ``[store] backend = "postgres"``; the database is
``PINAKES_DATABASE_URL``'s, or a local server started for the run (the dev group's, as the
tests use) whose index is gone after it, so every set is synced (and embedded) in full.
A fresh ``<set>-postgres`` folder takes the KB id and the documents' ids (``pinakes.toml``
and the sidecars) of ``<set>`` when the cache holds it: the self-calibration samples its
pseudo-questions by those ids, so two stagings with ids of their own calibrate on two
samples, and their confidence figures differ for that alone (dendron's false-confidence
.275 on one, .300–.375 on others, on one backend or the other). Run the SQLite form first
with the same ``--cache`` to compare the backends' confidence.

``make eval`` runs the first form (``make eval EVAL_ARGS=--matrix`` the second). Progress goes
to stderr, Markdown tables to stdout, and the whole result as JSON to ``--json`` (default
``benchmarks/.out/eval_sets.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpora import REPO, log, resolve_corpus  # a sibling benchmark script

#: name -> (documents folder, question file); folders relative to the repo root.
SETS: dict[str, tuple[str, str]] = {
    "golden": ("golden/kb", "golden/questions.jsonl"),
    "nushell": ("../shared/corpora/nushell-docs", "golden/nushell/questions.jsonl"),
    "dendron": ("../shared/corpora/dendron-site", "golden/dendron/questions.jsonl"),
    "personal": ("golden/personal/kb", "golden/personal/questions.jsonl"),
    "example": ("examples/distsys-notes", "golden/example/questions.jsonl"),
}
HELD_OUT = ("nushell", "dendron")
#: Never copied from a source nor deleted from a staged copy.
SKIP_DIRS = frozenset({".git", ".pinakes"})
DEFAULT_JSON = REPO / "benchmarks" / ".out" / "eval_sets.json"
METRICS = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "abstained")


def default_cache() -> Path:
    """The folder staged KBs live in: ``$PINAKES_EVAL_CACHE`` or the user cache dir."""
    if os.environ.get("PINAKES_EVAL_CACHE"):
        return Path(os.environ["PINAKES_EVAL_CACHE"]).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("pinakes")) / "eval-kbs"


# -- staging ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Staged:
    """What :func:`stage` did."""

    copied: int
    removed: int
    unchanged: int


def _files(root: Path) -> dict[str, os.stat_result]:
    """Every file under ``root`` by POSIX relative path, outside ``.git`` / ``.pinakes``."""
    found: dict[str, os.stat_result] = {}
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            path = Path(directory, name)
            found[path.relative_to(root).as_posix()] = path.stat()
    return found


def stage(src: Path, dst: Path) -> Staged:
    """Mirror ``src`` into ``dst`` and make ``dst`` a KB (``KB.init``) if it is not one yet.

    Only files whose size or modification time differ are copied; the copy keeps the source's
    modification time (so sync sees an unchanged file as unchanged) but is made writable (the
    shared corpora are read-only). Files ``src`` no longer has are deleted from ``dst``, except
    what Pinakes wrote there itself: the ``pinakes.toml`` / ``.gitignore`` of ``KB.init`` when
    ``src`` has none, the ``.pinakes`` index, and the sidecars sync writes for documents whose
    source has no sidecar (they hold the minted ids; deleting them would re-mint every id).
    """
    from pinakes_core import KB
    from pinakes_core.config import CONFIG_FILE
    from pinakes_core.read.sidecar import SIDECAR_SUFFIX

    dst.mkdir(parents=True, exist_ok=True)
    wanted = _files(src)
    have = _files(dst)
    copied = unchanged = removed = 0
    for rel, st in wanted.items():
        old = have.get(rel)
        if old is not None and old.st_size == st.st_size and old.st_mtime_ns == st.st_mtime_ns:
            unchanged += 1
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.chmod(stat.S_IRUSR | stat.S_IWUSR)
        shutil.copyfile(src / rel, target)
        target.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        copied += 1
    keep = {CONFIG_FILE, ".gitignore"} - wanted.keys()
    keep |= {
        rel
        for rel in have.keys() - wanted.keys()
        if rel.endswith(SIDECAR_SUFFIX) and rel.removesuffix(SIDECAR_SUFFIX) in wanted
    }
    for rel in sorted(have.keys() - wanted.keys() - keep):
        (dst / rel).unlink()
        removed += 1
    for directory, _, _ in sorted(os.walk(dst), key=lambda w: -len(w[0])):
        path = Path(directory)
        if path != dst and not any(path.iterdir()) and not SKIP_DIRS & set(path.parts):
            path.rmdir()
    if not (dst / CONFIG_FILE).exists():
        KB.init(dst, name=dst.name).close()
    return Staged(copied=copied, removed=removed, unchanged=unchanged)


def share_ids(twin: Path, dst: Path) -> None:
    """Give a fresh ``dst`` the KB id and document ids of ``twin``, a staging of the same set.

    ``pinakes.toml`` and every sidecar are copied before ``dst`` is staged (the staging keeps
    them); a ``dst`` that is a KB already, or a ``twin`` that is none, is left as it is.
    """
    from pinakes_core.config import CONFIG_FILE
    from pinakes_core.read.sidecar import SIDECAR_SUFFIX

    if (dst / CONFIG_FILE).exists() or not (twin / CONFIG_FILE).exists():
        return
    for rel in [CONFIG_FILE, *(r for r in _files(twin) if r.endswith(SIDECAR_SUFFIX))]:
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(twin / rel, target)
    log(f"{dst.name}: the KB id and document ids of {twin}")


def use_store(dst: Path, backend: str) -> None:
    """Make the staged KB's ``pinakes.toml`` say ``[store] backend = backend`` (once)."""
    from pinakes_core.config import CONFIG_FILE

    config = dst / CONFIG_FILE
    text = config.read_text(encoding="utf-8")
    if "[store]" not in text:
        config.write_text(f'{text.rstrip()}\n\n[store]\nbackend = "{backend}"\n', encoding="utf-8")


@contextlib.contextmanager
def database(store: str) -> Iterator[None]:
    """For ``postgres`` without ``PINAKES_DATABASE_URL``: a local server for the run."""
    if store != "postgres" or os.environ.get("PINAKES_DATABASE_URL"):
        yield
        return
    sys.path.insert(0, str(REPO / "tests" / "core"))
    from pg_server import PgServer

    server = PgServer().start()
    os.environ["PINAKES_DATABASE_URL"] = server.url
    try:
        yield
    finally:
        del os.environ["PINAKES_DATABASE_URL"]
        server.remove()


# -- running ----------------------------------------------------------------------------------


def run_set(
    name: str,
    cache: Path,
    *,
    matrix: bool,
    configs: list[str] | None,
    reader: bool | None = None,
    reader_weight: float | None = None,
    store: str = "sqlite",
) -> dict[str, Any]:
    """Stage, sync and evaluate one set; return its JSON-ready result.

    ``store`` is the index backend of the staged KB (``"postgres"``: its own staging folder).

    ``reader`` sets ``[retrieval] reader`` for the run (``None``: the staged KB's own setting);
    the sync then refits the self-calibration with (or without) the reader, as a user's would.
    """
    from pinakes_core import KB
    from pinakes_core.manage.eval import evaluate, matrix_configs, select_configs

    folder, questions = SETS[name]
    src = resolve_corpus(folder)
    dst = cache / (name if store == "sqlite" else f"{name}-{store}")
    started = time.perf_counter()
    if store != "sqlite":
        share_ids(cache / name, dst)
    staged = stage(src, dst)
    log(f"{name}: staged {src} -> {dst} ({staged.copied} copied, {staged.removed} removed)")
    if store != "sqlite":
        use_store(dst, store)
    with KB.open(dst) as kb:
        if reader is not None or reader_weight is not None:
            update: dict[str, Any] = {} if reader is None else {"reader": reader}
            if reader_weight is not None:
                update["reader_weight"] = reader_weight
            retrieval = kb.config.retrieval.model_copy(update=update)
            kb.config = kb.config.model_copy(update={"retrieval": retrieval})
        t0 = time.perf_counter()
        report = kb.sync()
        sync_s = time.perf_counter() - t0
        log(
            f"{name}: synced in {sync_s:.1f} s: {len(report.added)} added, "
            f"{len(report.changed)} changed, {len(report.removed)} removed, "
            f"{report.unchanged} unchanged, {report.chunks_embedded} chunks embedded"
        )
        result: dict[str, Any] = {
            "set": name,
            "held_out": name in HELD_OUT,
            "source": str(src),
            "kb": str(dst),
            "questions_file": questions,
            "staged": staged.__dict__,
            "reader": kb.config.retrieval.reader,
            "reader_weight": kb.config.retrieval.reader_weight,
            "sync_seconds": round(sync_s, 1),
            "store": store,
        }
        t0 = time.perf_counter()
        default = evaluate(kb, REPO / questions)
        result["default"] = default.model_dump(mode="json", by_alias=True)
        if matrix or configs:
            chosen = select_configs(kb, matrix=matrix, names=configs) or matrix_configs()
            log(f"{name}: evaluating {len(chosen)} configurations")
            full = evaluate(kb, REPO / questions, chosen)
            result["matrix"] = full.model_dump(mode="json", by_alias=True)
        log(f"{name}: evaluated in {time.perf_counter() - t0:.1f} s")
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


# -- rendering --------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render_set(result: dict[str, Any]) -> str:
    """Markdown for one set: per-class table, whole-set figures, reliability, matrix."""
    default = result["default"]
    (config_name, config), *_ = default["configs"].items()
    held = " (held out: never tune on it)" if result["held_out"] else " (tune on this one)"
    lines = [
        f"### {result['set']}{held}",
        "",
        f"`{result['questions_file']}` on `{result['source']}`, default configuration "
        f"**{config_name}** (`abstain_below` {default['abstain_below']:g}"
        f"{', reader on' if result.get('reader') else ''}).",
        "",
        "| class | n | R@1 | R@5 | R@10 | MRR | nDCG@10 | abstained |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cls, m in config["classes"].items():
        lines.append(
            f"| {cls} | {m['questions']} | " + " | ".join(_f(m[k]) for k in METRICS) + " |"
        )
    o = config["overall"]
    lines += [
        "",
        "| questions | false-abstain | false-confidence | false-conf. (none+offtopic) | AUROC "
        "| p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|",
        f"| {o['questions']} | {_f(o['false_abstain'])} | {_f(o['false_confidence'])} | "
        f"{_f(o['false_confidence_none'])} | {_f(o['auroc'])} | {_f(o['latency_ms_p50'], 1)} | "
        f"{_f(o['latency_ms_p95'], 1)} |",
    ]
    if config.get("reliability"):
        lines += [
            "",
            "Reliability of `confidence` (top document right?):",
            "",
            "| bin | n | mean confidence | observed |",
            "|---|---|---|---|",
        ]
        for b in config["reliability"]:
            lines.append(
                f"| {b['lower']:.1f}–{b['upper']:.1f} | {b['count']} | "
                f"{_f(b['mean_confidence'])} | {_f(b['observed'])} |"
            )
    if "matrix" in result:
        classes = [c for c in next(iter(result["matrix"]["configs"].values()))["classes"]]
        answerable = [c for c in classes if c not in ("none", "offtopic")]
        lines += [
            "",
            "Matrix — cells are R@1 / R@5 / MRR; abstained for none / offtopic:",
            "",
            "| config | "
            + " | ".join(classes)
            + " | false-abstain | false-conf. | AUROC | p50 ms |",
            "|---|" + "---|" * (len(classes) + 4),
        ]
        for name, cfg in result["matrix"]["configs"].items():
            cells = []
            for cls in classes:
                m = cfg["classes"][cls]
                cells.append(
                    " / ".join(_f(m[k]) for k in ("recall@1", "recall@5", "mrr"))
                    if cls in answerable
                    else _f(m["abstained"])
                )
            ov = cfg["overall"]
            lines.append(
                f"| {name} | "
                + " | ".join(cells)
                + f" | {_f(ov['false_abstain'])} | {_f(ov['false_confidence'])} | "
                f"{_f(ov['auroc'])} | {_f(ov['latency_ms_p50'], 1)} |"
            )
    return "\n".join(lines)


def render(run: dict[str, Any]) -> str:
    """Markdown for a whole run."""
    head = [
        f"`{run['command']}` — {run['date']}, Python {run['python']}",
        "",
    ]
    return "\n".join(head) + "\n\n".join(render_set(r) for r in run["sets"]) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sets", default=",".join(SETS), help=f"comma-separated, from {', '.join(SETS)}"
    )
    parser.add_argument("--matrix", action="store_true", help="every channel configuration too")
    parser.add_argument("--configs", help="named configurations instead of the whole matrix")
    parser.add_argument("--cache", type=Path, help="folder for the staged KBs")
    parser.add_argument(
        "--reader", choices=("on", "off"), help="set [retrieval] reader (default: the KB's own)"
    )
    parser.add_argument(
        "--reader-weight",
        type=float,
        help="set [retrieval] reader_weight (0: the reader only judges)",
    )
    parser.add_argument(
        "--store",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="where the staged KBs keep their index (postgres: PINAKES_DATABASE_URL or a local server)",
    )
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    parser.add_argument("--render", type=Path, help="print the Markdown of a saved JSON run")
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8"))), end="")
        return
    names = [n.strip() for n in args.sets.split(",") if n.strip()]
    unknown = [n for n in names if n not in SETS]
    if unknown:
        raise SystemExit(f"unknown set {unknown[0]!r}; choose from {', '.join(SETS)}")
    cache = (args.cache or default_cache()).expanduser().resolve()
    configs = args.configs.split(",") if args.configs else None
    run = {
        "command": "uv run python benchmarks/eval_sets.py " + " ".join(argv or sys.argv[1:]),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": sys.version.split()[0],
        "cache": str(cache),
        "sets": [],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    with database(args.store):
        for name in names:
            reader = None if args.reader is None else args.reader == "on"
            run["sets"].append(
                run_set(
                    name,
                    cache,
                    matrix=args.matrix,
                    configs=configs,
                    reader=reader,
                    reader_weight=args.reader_weight,
                    store=args.store,
                )
            )
            # written after every set, so a long run's finished sets survive an interruption
            args.json.write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {args.json}")
    print(render(run), end="")


if __name__ == "__main__":
    main()
