"""Human rendering of core results (the ``--json`` form is the model's own ``model_dump``)."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import textwrap

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from pinakes_core import DocumentView, SearchResult, Status, SyncReport
from pinakes_core.eval import CalibrationReport, EvalReport
from pinakes_core.models import DoctorReport, LinksResult

__all__ = [
    "print_json",
    "render_calibration",
    "render_diff",
    "render_doctor",
    "render_document",
    "render_eval",
    "render_links",
    "render_search",
    "render_status",
    "render_sync",
]


def print_json(console: Console, model: BaseModel) -> None:
    """Print a result model as JSON (the same shape the library and MCP return)."""
    console.print_json(json.dumps(model.model_dump(mode="json", by_alias=True)), highlight=False)


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def render_sync(console: Console, report: SyncReport) -> None:
    """One summary line, then skips and warnings."""
    if report.rebuilt:
        console.print(f"[yellow]Rebuilt the index: {report.rebuilt}.[/]")
    rate = f", {report.chunks_per_second:g} chunks/s" if report.chunks_per_second else ""
    console.print(
        f"synced in {report.seconds:.1f}s: {len(report.added)} added, {len(report.changed)} changed, "
        f"{len(report.removed)} removed, {len(report.renamed)} renamed, {report.unchanged} unchanged; "
        f"{report.chunks_embedded} chunks embedded{rate}, {report.chunks_reused} reused"
    )
    for skip in report.skipped:
        console.print(f"[yellow]skipped[/] {skip.path}: {skip.reason}", highlight=False)
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {warning}", highlight=False)


def render_search(console: Console, result: SearchResult, *, explain: bool) -> None:
    """A compact ranked list; with ``explain``, each hit's per-channel ranks and scores."""
    if not result.hits:
        console.print("no hits")
        return
    if result.confidence is not None:
        verdict = " (abstain: the KB may not answer this)" if result.abstain else ""
        console.print(f"confidence {result.confidence:.2f}{verdict}")
    for i, hit in enumerate(result.hits, 1):
        where = " › ".join(hit.heading_path) or hit.title
        console.print(
            f"[bold]{i:>2}. {hit.path}:{hit.lines[0]}-{hit.lines[1]}[/]  [dim]{where}[/]  score {hit.score:.4f}",
            highlight=False,
        )
        if explain:
            parts = []
            for name, rank in hit.ranks.items():
                raw = (hit.channel_scores or {}).get(name)
                parts.append(
                    f"{name} #{rank if rank is not None else '-'}"
                    + (f" ({raw:.3f})" if raw is not None else "")
                )
            console.print("     " + "  ".join(parts), style="cyan", highlight=False)
        snippet = " ".join(hit.text.split())
        console.print(
            textwrap.indent(textwrap.shorten(snippet, 220, placeholder=" …"), "     "),
            highlight=False,
        )


def render_document(console: Console, doc: DocumentView) -> None:
    """Metadata header, then the document text."""
    table = Table.grid(padding=(0, 2))
    for key, value in (
        ("title", doc.title),
        ("id", doc.doc_id),
        ("uri", doc.uri),
        ("path", doc.path),
        ("tags", ", ".join(doc.tags) or "-"),
        ("aliases", ", ".join(doc.aliases) or "-"),
        ("links", "; ".join(f"{link.rel} → {link.target}" for link in doc.links) or "-"),
        ("chunks", str(doc.chunks)),
        ("modified", _when(doc.modified)),
    ):
        table.add_row(f"[bold]{key}[/]", value)
    console.print(table)
    console.rule()
    console.print(doc.text, markup=False, highlight=False)


def render_status(console: Console, status: Status) -> None:
    """Key facts about the KB and its index."""
    table = Table.grid(padding=(0, 2))
    stale = status.stale
    rows = [
        ("kb", f"{status.name} ({status.kb_id})"),
        ("root", status.root),
        ("synced", _when(status.last_sync) if status.synced else "never (run `pnk sync`)"),
        ("documents", str(status.documents)),
        ("chunks", str(status.chunks)),
        ("vectors", str(status.vectors)),
        ("model", f"{status.model} ({status.dim} dims)" if status.model else "-"),
        ("schema", str(status.schema_version or "-")),
        ("store", f"{status.store_bytes / 1048576:.1f} MB"),
        (
            "stale",
            f"{stale['new']} new, {stale['changed']} changed, {stale['removed']} removed since last sync",
        ),
    ]
    for key, value in rows:
        table.add_row(f"[bold]{key}[/]", value)
    console.print(table)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render_eval(console: Console, report: EvalReport) -> None:
    """Per-class metrics, one row per class and configuration, then the whole-set figures."""
    metrics = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10")
    table = Table(title=f"pnk eval — {report.questions_file}", title_justify="left")
    for column in ("config", "class", "n", *metrics):
        table.add_column(column, justify="left" if column in ("config", "class") else "right")
    for name, config in report.configs.items():
        for cls, m in config.classes.items():
            values = m.model_dump(by_alias=True)
            table.add_row(name, cls, str(m.questions), *(_fmt(values[k]) for k in metrics))
        table.add_section()
    console.print(table)
    overall = Table(
        title=f"whole set (abstain below {report.abstain_below:g})", title_justify="left"
    )
    for column in (
        "config",
        "questions",
        "false-abstain",
        "false-confidence",
        "false-conf. (none)",
        "p50 ms",
        "p95 ms",
    ):
        overall.add_column(column, justify="left" if column == "config" else "right")
    for name, config in report.configs.items():
        o = config.overall
        overall.add_row(
            name,
            str(o.questions),
            _fmt(o.false_abstain),
            _fmt(o.false_confidence),
            _fmt(o.false_confidence_none),
            _fmt(o.latency_ms_p50, 1),
            _fmt(o.latency_ms_p95, 1),
        )
    console.print(overall)


def render_calibration(console: Console, report: CalibrationReport) -> None:
    """The cross-validated calibration figures and reliability curve."""
    console.print(
        f"calibration fitted on {report.questions} questions ({report.positives} with a correct top hit); "
        f"{report.folds}-fold held-out: Brier {report.brier:.3f}, log loss {report.log_loss:.3f}, "
        f"AUC {_fmt(report.auc)}. Stored in the index; searches use it from now on."
    )
    table = Table(title="reliability (held-out)", title_justify="left")
    for column in ("confidence bin", "questions", "mean confidence", "observed correct"):
        table.add_column(column, justify="right")
    for b in report.reliability:
        table.add_row(
            f"{b.lower:.1f}-{b.upper:.1f}", str(b.count), _fmt(b.mean_confidence), _fmt(b.observed)
        )
    console.print(table)


def render_links(console: Console, result: LinksResult) -> None:
    """Neighbours by distance, then frontier and unresolved links."""
    depth = f"depth {result.depth}" + (
        f" (asked {result.depth_asked}, capped)" if result.depth_asked > result.depth else ""
    )
    rel = (
        f", rel {result.matched_rel}"
        + (f" (matched from {result.rel!r})" if result.rel != result.matched_rel else "")
        if result.rel
        else ""
    )
    console.print(f"[bold]{result.title}[/] ({result.doc_id}) — {depth}{rel}", highlight=False)
    if result.confidence is not None:
        console.print(f"confidence {result.confidence:.2f}")
    if not result.neighbours:
        console.print("no linked documents")
    for n in result.neighbours:
        arrow = "→" if n.direction == "out" else "←"
        console.print(
            f"  {n.distance} {arrow} {n.rel:<14} {n.path}  [dim]{n.title} · {n.score:g}[/]",
            highlight=False,
        )
    if result.frontier:
        console.print(
            f"frontier ({len(result.frontier)} not expanded): "
            + ", ".join(f"{f.doc_id} ({f.reason})" for f in result.frontier[:10]),
            highlight=False,
        )
    for u in result.unresolved:
        console.print(f"[yellow]unresolved[/] {u.target}: {u.reason}", highlight=False)
    if result.truncated:
        console.print(
            "[yellow]truncated[/]: more neighbours than the row or token budget; see the frontier."
        )


def render_diff(console: Console, path: str, before: str, after: str) -> None:
    """A unified diff of a sidecar write."""
    diff = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
    )
    for line in diff:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else None
        console.print(line.rstrip("\n"), style=style, markup=False, highlight=False)


def render_doctor(console: Console, report: DoctorReport) -> None:
    """Findings by severity, then what --fix did."""
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    for f in report.findings:
        console.print(
            f"[{colours.get(f.severity, 'white')}]{f.severity:<7}[/] {f.check}: {f.message}",
            highlight=False,
        )
        for item in f.items:
            console.print(f"          {item}", markup=False, highlight=False)
    for line in report.fixed:
        console.print(f"[green]fixed[/]   {line}", highlight=False)
