"""``pnk show``, ``pnk links`` and ``pnk link``: reading a document, its links, adding one.

Each command parses its arguments, calls one core function and renders its result; the engine
loads inside the command (``pnk --help`` never pays for it).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.root import cli, kb_option, open_kb
from pinakes_cli.root import err as _err
from pinakes_cli.root import out as _out

if TYPE_CHECKING:
    from pinakes_core import KB

__all__ = ["link", "links", "show"]


class _LineRange(click.ParamType[tuple[int, int]]):
    """``A-B`` (1-based, inclusive), ``A-`` (to the end) or ``A`` (one line)."""

    name = "A-B"
    _RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d*)\s*)?$")

    def __init__(self, what: str = "line") -> None:
        self.what = what

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> tuple[int, int]:
        if isinstance(value, tuple):
            return value
        match = self._RANGE.match(str(value))
        if not match:
            self.fail(f"{value!r} is not a {self.what} range; use A-B, e.g. 10-40.", param, ctx)
        first = int(match.group(1))
        last = int(match.group(3)) if match.group(3) else (sys.maxsize if match.group(2) else first)
        return first, last


@cli.command()
@kb_option
@click.argument("doc")
@click.option("--lines", "lines", type=_LineRange(), help="Only lines A-B of the file (1-based).")
@click.option("--section", help="Only this heading's section (its text or 'A › B' path).")
@click.option(
    "--page",
    "pages",
    type=_LineRange("page"),
    help="Only pages N-M of a PDF (N, N-M or N-; 1-based), each under a [page N] line.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1, None),
    help="Cut the text to about N tokens (characters / 4) at a paragraph break.",
)
@click.option(
    "--body", is_flag=True, help="Print only the text (or the slice asked for), for piping."
)
@json_option("Print the document as JSON.")
@click.pass_context
def show(
    ctx: click.Context,
    doc: str,
    lines: tuple[int, int] | None,
    section: str | None,
    pages: tuple[int, int] | None,
    max_tokens: int | None,
    body: bool,
    as_json: bool,
) -> None:
    """Print a document with its metadata.

    DOC is a ULID, a pnk:// URI, a path, or a note's name as its wikilinks write it.
    """
    view = open_kb(ctx).read(doc, lines=lines, section=section, pages=pages, max_tokens=max_tokens)
    if as_json:
        render.print_json(_out(), view)
    elif body:
        render.render_body(_out(), view)
    else:
        render.render_document(_out(), view)


@cli.command()
@kb_option
@click.argument("doc")
@click.option("--rel", help="Only this relation; free text is matched to the KB's relations.")
@click.option(
    "--direction", type=click.Choice(["out", "in", "both"]), default="both", show_default=True
)
@click.option(
    "--depth",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Hops (served at most 3).",
)
@click.option("--query", help="Rank neighbours by similarity to this text and report a confidence.")
@json_option()
@click.pass_context
def links(
    ctx: click.Context,
    doc: str,
    rel: str | None,
    direction: str,
    depth: int,
    query: str | None,
    as_json: bool,
) -> None:
    """Show the documents DOC links to and that link to it (needs pinakes-graph)."""
    result = open_kb(ctx).links(doc, rel=rel, direction=direction, depth=depth, query=query)
    if as_json:
        render.print_json(_out(), result)
    else:
        render.render_links(_out(), result)


@cli.command()
@kb_option
@click.argument("src")
@click.argument("dst")
@click.option(
    "--rel",
    required=True,
    help="The relation, e.g. depends-on; free text is matched to the schema's relation types.",
)
@click.option("--note", help="A free-text note stored with the link.")
@click.option(
    "--to-kb", "to_kb", help="The fleet KB holding DST (a name or KB id), when not this one."
)
@json_option("Print the sidecar path and its text before and after as JSON.")
@click.pass_context
def link(
    ctx: click.Context,
    src: str,
    dst: str,
    rel: str,
    note: str | None,
    to_kb: str | None,
    as_json: bool,
) -> None:
    """Add a typed link SRC → DST to SRC's sidecar (comments and order kept) and show the diff.

    DST may be in another KB of the fleet: a pnk://<kb>/<doc> URI, or any reference with --to-kb.
    """
    kb = open_kb(ctx)
    path, before, after = kb.add_link(src, dst, rel, note, dst_kb=to_kb)
    if as_json:
        render.print_data(_out(), {"sidecar": path, "before": before, "after": after})
        return
    render.render_diff(_out(), path, before, after)
    _relation_note(kb, rel)
    _err().print(render.line(("Run `pnk sync` to index the new link.", "dim")))


def _relation_note(kb: KB, rel: str) -> None:
    """After ``pnk link``: say how ``rel`` matched the schema (stderr, one line)."""
    from pinakes_core.manage.schema import GENERIC_REL, match_relation

    match = match_relation(kb.config.schema_, lambda: kb.embedder, rel)
    if match.via in ("alias", "inverse", "embedding"):
        how = {"alias": "an alias", "inverse": "the inverse", "embedding": "closest in meaning"}
        _note(f"{rel!r} matched the schema relation {match.rel} ({how[match.via]}).")
    elif not match.in_schema and match.rel != GENERIC_REL:
        _note(
            f"{match.rel!r} is not in [schema] relation_types: written as is, and noted for "
            "`pnk schema review`."
        )


def _note(text: str) -> None:
    """One line on stderr that may hold user data: never through Rich markup or highlighting."""
    render.console(stderr=True, soft_wrap=True).print(text, markup=False, highlight=False)
