r"""Human rendering of core results (the ``--json`` form is the model's own ``model_dump``).

Everything a user's files can influence — titles, paths, snippets, tags, link targets, error
messages that quote them — is printed as data, never as Rich markup: lines are built as
:class:`rich.text.Text` (whose plain strings are literal), tables get ``Text`` cells, and raw
text goes through ``markup=False, highlight=False``. A title such as ``[red]x[/red]`` or a
snippet holding ``[/etc/hosts]`` prints exactly as written (issue 11). Control characters
(an escape sequence in a title, a bell in a passage) never reach the terminal as such: the
consoles :func:`console` makes print them as ``\\xNN`` escapes, whatever renders them.

Why one module of this length (issue 37): every text rendering of a result model is here, so
the rule above (user text is data, never markup; control characters escaped) is applied by one
set of helpers rather than re-learnt per command module.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import sys
import textwrap
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pydantic import BaseModel
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from pinakes_core import DocumentView, Hit, SearchResult, Status, SyncReport
    from pinakes_core.manage.eval import CalibrationReport, EvalReport
    from pinakes_core.models import DoctorReport, LinksResult, Passage

# rich is imported only when something is drawn: ``--json`` output goes straight to the stream
# (issue 14, start-up cost). Functions that build Text or Table import them locally.

__all__ = [
    "FORMATS",
    "LazyConsole",
    "cite",
    "console",
    "line",
    "one_line",
    "print_json",
    "render_calibration",
    "render_diff",
    "render_doctor",
    "render_document",
    "render_error",
    "render_eval",
    "render_links",
    "render_search",
    "render_status",
    "render_sync",
    "say",
    "visible",
]

#: the output formats of ``pnk search --format``.
FORMATS = ("table", "json", "files", "md")

Part = str | tuple[str, str]

_SNIPPET_CHARS = 220


# C0 controls but tab and newline, DEL and C1: a terminal acts on them (ESC starts a
# sequence that can clear the screen or retitle the window; U+009B is a one-byte CSI). Also
# the bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder the
# rest of the line as displayed, so a title could show other text than it holds; right-to-left
# scripts display correctly without them.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_C1 = re.compile("[\x7f-\x9f]")


def visible(text: str) -> str:
    r"""``text`` with its control characters (but tab and newline) written as ``\xNN``.

    The bidi controls are written ``\u202e``.
    """
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    r"""``text`` on one line: a line break in it (a file name may hold one) written as ``\n``.

    For the line-per-item outputs (``--format files``, Markdown headings), where a raw break
    would split one path into two.
    """
    return text.replace("\r", "\\r").replace("\n", "\\n")


def console(**options: Any) -> Console:
    """A :class:`rich.console.Console` that shows control characters in what it prints.

    Every segment of text it renders (a ``Text``, a table cell, ``out()``, a rule) passes
    through :func:`visible`; only rich's own control segments (cursor moves, styles) reach
    the terminal as codes. Use it for every console that may print text from the user's files.

    Written to a pipe or a file (no terminal, no ``COLUMNS``), it is :data:`PIPE_WIDTH` wide
    rather than rich's 80 columns, so a table in a log keeps its headers and values whole.
    """
    if "width" not in options and "COLUMNS" not in os.environ:
        stream = options.get("file") or (sys.stderr if options.get("stderr") else sys.stdout)
        if not _is_terminal(stream):
            options["width"] = PIPE_WIDTH
    return cast("Console", _visible_console()(**options))


#: Columns of a console that writes to a pipe or a file.
PIPE_WIDTH = 160


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


@functools.cache
def _visible_console() -> type:
    from rich.console import Console
    from rich.segment import Segment

    class VisibleConsole(Console):
        def render(self, renderable: Any, options: Any = None) -> Iterator[Segment]:
            for segment in super().render(renderable, options):
                if segment.control is None and _CONTROL.search(segment.text):
                    yield Segment(visible(segment.text), segment.style)
                else:
                    yield segment

    return VisibleConsole


def line(*parts: Part) -> Text:
    """One output line from literal strings and ``(text, style)`` pairs; never parses markup."""
    from rich.text import Text

    return Text.assemble(*parts)


def say(console: Console, *parts: Part) -> None:
    """Print literal text (never parsed as markup); a ``(text, style)`` part is styled."""
    console.print(line(*parts), soft_wrap=True)


def _grid(rows: Iterable[tuple[str, str]]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table.grid(padding=(0, 2))
    for key, value in rows:
        table.add_row(Text(key, style="bold"), Text(value))
    return table


def print_json(console: Console, model: BaseModel) -> None:
    """Print a result model as JSON (the same shape the library and MCP return)."""
    print_data(console, model.model_dump(mode="json", by_alias=True))


def print_data(console: Console, data: object) -> None:
    """Print JSON-ready data as indented JSON, byte for byte (no markup, no highlighting)."""
    text = json.dumps(data, indent=2, ensure_ascii=False)  # escapes C0 controls itself
    # DEL and C1 only occur inside strings here; as \u escapes they are the same JSON.
    text = _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if isinstance(console, LazyConsole):
        console.plain(text)
    else:
        console.out(text, highlight=False)


class LazyConsole:
    """A :class:`rich.console.Console` built (and rich imported) on first use.

    Plain output (:meth:`plain`, which :func:`print_data` uses) goes straight to the stream, so
    a ``--json`` command never imports rich. Any other attribute is the real console's.
    """

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    @classmethod
    def make(cls, **options: Any) -> Console:
        """A lazy console typed as the console it stands for."""
        return cast("Console", cls(**options))

    def plain(self, text: str) -> None:
        """Write ``text`` and a newline as they are, as ``Console.out`` would."""
        if self._console is not None:
            self._console.out(text, highlight=False)
            return
        stream = sys.stderr if self._options.get("stderr") else sys.stdout
        stream.write(text + "\n")
        stream.flush()

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = console(**self._options)
        return getattr(self._console, name)


def render_error(console: Console, message: str, hint: str | None) -> None:
    """The one-sentence error and its hint (both may quote user text: printed literally)."""
    say(console, ("error:", "red"), " ", message)
    if hint:
        say(console, ("hint:", "dim"), " ", hint)


def _when(ts: float | None) -> str:
    if ts is None:
        return "never"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def render_sync(console: Console, report: SyncReport) -> None:
    """One summary line, then skips and warnings."""
    if report.rebuilt:
        say(console, (f"Rebuilt the index: {report.rebuilt}.", "yellow"))
    rate = f", {report.chunks_per_second:g} chunks/s" if report.chunks_per_second else ""
    say(
        console,
        f"synced in {report.seconds:.1f}s{_parts(report.parts_s)}: {len(report.added)} added, {len(report.changed)} changed, "
        f"{len(report.removed)} removed, {len(report.renamed)} renamed, {report.unchanged} unchanged; "
        f"{report.chunks_embedded} chunks embedded{rate}, {report.chunks_reused} reused",
    )
    for skip in report.skipped:
        say(console, ("skipped", "yellow"), f" {skip.path}: {skip.reason}")
    for warning in report.warnings:
        say(console, ("warning", "yellow"), f" {warning}")


def _parts(parts: dict[str, float]) -> str:
    """`` (index 6.1s, self-calibration 5.3s, …)``: the parts of a sync that took a tenth or more."""
    shown = [f"{name} {secs:.1f}s" for name, secs in parts.items() if secs >= 0.05]
    return f" ({', '.join(shown)})" if len(shown) > 1 else ""


def _terms(query: str) -> re.Pattern[str] | None:
    # The words search itself drops (issue 35: "should", "we", "use" were highlighted).
    from pinakes_core.index.query import STOPWORDS

    words = sorted(
        {w.lower() for w in re.findall(r"\w{2,}", query) if w.lower() not in STOPWORDS},
        key=len,
        reverse=True,
    )
    if not words:
        return None
    return re.compile(r"\b(?:" + "|".join(map(re.escape, words[:32])) + r")\w*", re.IGNORECASE)


def _snippet(text: str) -> str:
    return textwrap.shorten(" ".join(text.split()), _SNIPPET_CHARS, placeholder=" …")


def _pages(start: int, end: int | None) -> str:
    end = end or start
    return f"p. {start}" if end == start else f"pp. {start}-{end}"


def cite(hit: Hit) -> str:
    r"""Where a hit is: ``path:10-20``, or for a PDF ``path p. 3`` (``pp. 3-4``).

    A line break in the path is written ``\n``: one hit, one line.
    """
    path = one_line(hit.path)
    if hit.page_start is not None:
        return f"{path} {_pages(hit.page_start, hit.page_end)}"
    return f"{path}:{hit.lines[0]}-{hit.lines[1]}"


def write_raw(console: Console, text: str) -> None:
    """Write ``text`` to the console's stream as it is, for another program to read (``-0``).

    No escaping, no wrapping; names held as surrogate escapes go out as their bytes.
    """
    stream = console.file
    buffer = getattr(stream, "buffer", None)
    data = text.encode("utf-8", "surrogateescape")
    if buffer is not None:
        stream.flush()
        buffer.write(data)
        buffer.flush()
    else:
        stream.write(data.decode("utf-8", "replace"))
        stream.flush()


def _where(passage: Passage) -> str:
    """Where a further passage of a hit is: ``lines 10-20``, or for a PDF ``p. 3``."""
    if passage.page_start is not None:
        return _pages(passage.page_start, passage.page_end)
    return f"lines {passage.lines[0]}-{passage.lines[1]}"


def render_search(
    console: Console, result: SearchResult, *, explain: bool = False, fmt: str = "table"
) -> None:
    """Print a search result as ``table`` (ranked list), ``files``, ``md`` or ``json``.

    In ``table`` form the query's words are highlighted in each snippet (styles only show on a
    terminal; in a pipe the text is plain).
    """
    if fmt == "json":
        print_json(console, result)
        return
    if fmt == "files":
        for path in dict.fromkeys(hit.path for hit in result.hits):
            console.out(one_line(path), highlight=False)
        return
    if fmt == "files0":  # -0: NUL-ended, byte for byte, past the escaping console
        paths = dict.fromkeys(hit.path for hit in result.hits)
        write_raw(console, "".join(f"{path}\0" for path in paths))
        return
    from rich.text import Text

    if fmt == "md":
        _render_search_md(console, result)
        return
    if not result.hits:
        say(console, "no hits" + (f": {result.note}" if result.note else ""))
        return
    if result.confidence is not None:
        verdict = " (abstain: the KB may not answer this)" if result.abstain else ""
        say(console, f"confidence {result.confidence:.2f}{verdict}")
    pattern = _terms(result.query)
    for i, hit in enumerate(result.hits, 1):
        where = hit.location
        say(
            console,
            (f"{i:>2}. {cite(hit)}", "bold"),
            "  ",
            (where, "dim"),
            f"  score {hit.score:.4f}",
        )
        if explain:
            parts = []
            for name, rank in hit.ranks.items():
                raw = (hit.channel_scores or {}).get(name)
                parts.append(
                    f"{name} #{rank if rank is not None else '-'}"
                    + (f" ({raw:.3f})" if raw is not None else "")
                )
            if hit.reader is not None:
                parts.append(f"reader p={hit.reader:.3f}")
            say(console, ("     " + "  ".join(parts), "cyan"))
        snippet = Text("     " + _snippet(hit.text))
        if pattern is not None:
            snippet.highlight_regex(pattern, style="bold yellow")
        console.print(snippet, soft_wrap=True)
        for passage in hit.passages or ():
            say(
                console,
                (
                    f"     + {' › '.join(passage.heading_path) or '(top)'}  "
                    f"{_where(passage)}  score {passage.score:.4f}",
                    "dim",
                ),
            )
        if hit.duplicates:
            say(console, ("     same text in: " + ", ".join(hit.duplicates), "dim"))
    if explain and result.ranking is not None:
        weights = ", ".join(f"{n} {w:.2f}" for n, w in result.ranking.weights.items())
        stages = "; ".join(
            f"{n}: {why}" + (f" ({result.timings_ms[n]:.1f} ms)" if n == "reader" else "")
            for n, why in result.ranking.stages.items()
        )
        say(console, ("ranking: weights " + weights + (f"; {stages}" if stages else ""), "cyan"))


def _render_search_md(console: Console, result: SearchResult) -> None:
    out = [f"# Search: {one_line(result.query)}", ""]
    if result.confidence is not None:
        out += [
            f"confidence {result.confidence:.2f}" + (" (abstain)" if result.abstain else ""),
            "",
        ]
    if not result.hits:
        out.append(f"No hits. {result.note or ''}".rstrip())
    for i, hit in enumerate(result.hits, 1):
        where = hit.location
        out += [f"## {i}. {one_line(cite(hit))} — {one_line(where)}", ""]
        out += ["> " + row if row else ">" for row in hit.text.strip("\n").split("\n")]
        out.append("")
    console.out("\n".join(out).rstrip("\n"), highlight=False)


def render_document(console: Console, doc: DocumentView) -> None:
    """Metadata header, then the document text (or the slice asked for)."""
    rows = [
        ("title", doc.title),
        ("id", doc.doc_id),
        ("uri", doc.uri),
        ("path", doc.path),
        ("tags", ", ".join(doc.tags) or "-"),
        ("aliases", ", ".join(doc.aliases) or "-"),
        ("links", "; ".join(f"{link.rel} → {link.target}" for link in doc.links) or "-"),
        ("chunks", str(doc.chunks)),
        ("modified", _when(doc.modified)),
    ]
    if doc.meta:
        rows.append(("fields", "; ".join(f"{k}: {v}" for k, v in doc.meta.items())))
    if doc.section:
        rows.append(("section", doc.section))
    if doc.pages is not None:
        rows.append(("pages", f"{doc.pages[0]}-{doc.pages[1]} of {doc.page_count}"))
    if doc.lines is not None:
        rows.append(("lines", f"{doc.lines[0]}-{doc.lines[1]}"))
    if doc.truncated:
        rows.append(("truncated", f"~{doc.tokens} of ~{doc.total_tokens} tokens shown"))
    console.print(_grid(rows))
    console.rule()
    console.print(doc.text, markup=False, highlight=False, emoji=False, soft_wrap=True)


def render_body(console: Console, doc: DocumentView) -> None:
    """The document text (or the slice asked for) alone, as the file holds it: for a pipe."""
    console.out(doc.text.rstrip("\n"), highlight=False)


def render_status(console: Console, status: Status) -> None:
    """Key facts about the KB and its index."""
    stale = status.stale
    rows = [
        ("kb", f"{status.name} ({status.kb_id})"),
        ("root", status.root),
        ("synced", _when(status.last_sync) if status.synced else "never (run `pnk sync`)"),
        ("documents", str(status.documents)),
        ("chunks", str(status.chunks)),
        # Not one per chunk (issue 35): chunks of the same text share one, and the graph
        # plugin embeds its tag and heading labels beside them.
        ("vectors", f"{status.vectors} (one per distinct chunk text, and per graph label)"),
        ("model", f"{status.model} ({status.dim} dims)" if status.model else "-"),
        ("schema", str(status.schema_version or "-")),
        ("store", f"{status.store_bytes / 1048576:.1f} MB"),
        (
            "stale",
            f"{stale['new']} new, {stale['changed']} changed, {stale['removed']} removed since last sync",
        ),
    ]
    if status.entities is not None:
        rows.append(("entities", f"{status.entities} ({status.mentions} mentions)"))
    console.print(_grid(rows))


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _table(title: str, columns: Iterable[str], left: Iterable[str]) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title), title_justify="left")
    lefts = set(left)
    for column in columns:
        table.add_column(Text(column), justify="left" if column in lefts else "right")
    return table


def render_eval(console: Console, report: EvalReport) -> None:
    """Per-class metrics, one row per class and configuration, then the whole-set figures."""
    from rich.text import Text

    metrics = ("recall@1", "recall@5", "recall@10", "mrr", "ndcg@10", "abstained")
    table = _table(
        f"pnk eval — {report.questions_file}",
        ("config", "class", "n", *metrics),
        ("config", "class"),
    )
    for name, config in report.configs.items():
        for cls, m in config.classes.items():
            values = m.model_dump(by_alias=True)
            cells = (name, cls, str(m.questions), *(_fmt(values[k]) for k in metrics))
            table.add_row(*map(Text, cells))
        table.add_section()
    console.print(table)
    overall = _table(
        f"whole set (abstain below {report.abstain_below:g})",
        (
            "config",
            "questions",
            "false-abstain",
            "false-confidence",
            "false-conf. (none)",
            "AUROC",
            "p50 ms",
            "p95 ms",
        ),
        ("config",),
    )
    for name, config in report.configs.items():
        o = config.overall
        cells = (
            name,
            str(o.questions),
            _fmt(o.false_abstain),
            _fmt(o.false_confidence),
            _fmt(o.false_confidence_none),
            _fmt(o.auroc),
            _fmt(o.latency_ms_p50, 1),
            _fmt(o.latency_ms_p95, 1),
        )
        overall.add_row(*map(Text, cells))
    console.print(overall)


def render_calibration(console: Console, report: CalibrationReport) -> None:
    """The cross-validated calibration figures and reliability curve."""
    from rich.text import Text

    say(
        console,
        f"calibration fitted on {report.questions} questions ({report.positives} with a correct top hit); "
        f"{report.folds}-fold held-out: Brier {report.brier:.3f}, log loss {report.log_loss:.3f}, "
        f"AUC {_fmt(report.auc)}. Stored in the index; searches use it from now on.",
    )
    table = _table(
        "reliability (held-out)",
        ("confidence bin", "questions", "mean confidence", "observed correct"),
        (),
    )
    for b in report.reliability:
        cells = (
            f"{b.lower:.1f}-{b.upper:.1f}",
            str(b.count),
            _fmt(b.mean_confidence),
            _fmt(b.observed),
        )
        table.add_row(*map(Text, cells))
    console.print(table)


#: Unresolved links ``pnk links`` prints (a note can hold thousands); ``--json`` has them all.
_UNRESOLVED_SHOWN = 20


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
    say(console, (result.title, "bold"), f" ({result.doc_id}) — {depth}{rel}")
    if result.confidence is not None:
        say(console, f"confidence {result.confidence:.2f}")
    if not result.neighbours:
        say(console, "no linked documents")
    for n in result.neighbours:
        arrow = {"out": "→", "in": "←", "both": "↔"}.get(n.direction, "←")
        where = f"[{n.kb}] {n.path}" if n.kb else n.path  # a neighbour in another KB
        say(
            console,
            f"  {n.distance} {arrow} {n.rel:<14} {where}  ",
            (f"{n.title} · score {n.score:g}", "dim"),
        )
    if result.frontier:
        say(
            console,
            f"frontier ({len(result.frontier)} not expanded): "
            + ", ".join(
                f"{f'[{f.kb}] ' if f.kb else ''}{f.path or f.doc_id} ({f.reason})"
                for f in result.frontier[:10]
            ),
        )
    if result.entity_neighbours:
        say(console, "documents naming the same entities:")
    for e in result.entity_neighbours:
        say(
            console,
            f"  ≈ {e.path}  ",
            (f"{e.title} · score {e.score:g}", "dim"),
            " · ",
            ", ".join(e.entities),
        )
    from pinakes_core.intake import clip  # core is loaded: it made ``result``

    for u in result.unresolved[:_UNRESOLVED_SHOWN]:
        say(console, ("unresolved", "yellow"), f" {clip(u.target, 200)}: {clip(u.reason, 200)}")
    if len(result.unresolved) > _UNRESOLVED_SHOWN:
        more = len(result.unresolved) - _UNRESOLVED_SHOWN
        say(console, ("unresolved", "yellow"), f" … and {more} more (--json lists them all)")
    if result.truncated:
        say(
            console,
            ("truncated", "yellow"),
            ": more neighbours than the row or token budget; see the frontier.",
        )


def render_diff(console: Console, path: str, before: str, after: str) -> None:
    """A unified diff of a sidecar write."""
    import difflib

    diff = difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"
    )
    for row in diff:
        style = "green" if row.startswith("+") else "red" if row.startswith("-") else ""
        say(console, (row.rstrip("\n"), style))


def render_doctor(console: Console, report: DoctorReport) -> None:
    """Findings by severity, then what --fix did."""
    colours = {"error": "red", "warning": "yellow", "info": "cyan"}
    for f in report.findings:
        say(
            console,
            (f"{f.severity:<7}", colours.get(f.severity, "white")),
            f" {f.check}: {f.message}",
        )
        for item in f.items:
            say(console, f"          {item}")
    for fixed in report.fixed:
        say(console, ("fixed", "green"), f"   {fixed}")
