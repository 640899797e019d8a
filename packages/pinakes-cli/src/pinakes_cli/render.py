"""Human rendering of core results (the ``--json`` form is the model's own ``model_dump``)."""

from __future__ import annotations

import datetime as dt
import json
import textwrap

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from pinakes_core import DocumentView, SearchResult, Status, SyncReport

__all__ = ["print_json", "render_document", "render_search", "render_status", "render_sync"]


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
