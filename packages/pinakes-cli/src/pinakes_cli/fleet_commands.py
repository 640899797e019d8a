"""``pnk fleet`` (registry, sync, list) and ``pnk adopt`` (DESIGN §10).

Searching the fleet is ``pnk search --fleet`` (:mod:`pinakes_cli.search_commands`).

Every command parses its arguments, calls one core function and renders its result; text that
came from a user's files is printed with Rich markup off.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.root import cli, err, out, progress_bar

if TYPE_CHECKING:
    from rich.console import Console

    from pinakes_core.manage.adopt import AdoptReport
    from pinakes_core.manage.fleet import FleetKbStatus, FleetSyncReport

# rich and the fleet/adopt modules load inside the commands that use them (issue 14).

__all__ = ["adopt_command", "fleet"]


def _consoles() -> tuple[Console, Console]:
    return out(), err()


@cli.group()
def fleet() -> None:
    """Several KBs as one: register them, sync them, search them with `pnk search --fleet`.

    The registry is $XDG_CONFIG_HOME/pinakes/fleet.toml (or the file $PINAKES_FLEET names).
    """


@fleet.command("add")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="The KB's name in the fleet [default: its [kb] name].")
@json_option("Print the entry as JSON.")
def fleet_add(path: Path, name: str | None, as_json: bool) -> None:
    """Register the KB at PATH; a KB already registered (moved folder) is updated, not doubled."""
    from pinakes_core.manage.registry import FleetRegistry

    registry = FleetRegistry.load()
    before = {e.kb_id: e.name for e in registry.entries}
    entry, action = registry.add(path, name=name)
    registry.save()
    previous = before.get(entry.kb_id)
    renamed = previous is not None and previous != entry.name
    out, err = _consoles()
    if as_json:
        data = {"name": entry.name, "kb_id": entry.kb_id, "path": str(entry.path), "action": action}
        if renamed and previous is not None:
            data["previous_name"] = previous
        render.print_data(out, data)
        return
    if renamed:
        # A KB registered already is renamed, not added twice (issue 35: it said only "renamed").
        render.say(
            err,
            (
                f"Renamed the fleet's KB {previous!r} to {entry.name!r}: `--kb {previous}` and "
                f"links through pnk://{previous}/… no longer name it.",
                "yellow",
            ),
        )
    verbs = {
        "added": "added",
        "moved": "found again at its new folder",
        "renamed": "renamed",
        "unchanged": "already registered",
    }
    render.say(out, f"{entry.name} ({entry.kb_id}) {verbs[action]}: {entry.path}")


@fleet.command("remove")
@click.argument("name")
@json_option("Print the removed entry as JSON.")
def fleet_remove(name: str, as_json: bool) -> None:
    """Forget the KB NAME (a name, KB id or folder); its files are not touched."""
    from pinakes_core.manage.registry import FleetRegistry

    registry = FleetRegistry.load()
    entry = registry.remove(name)
    registry.save()
    out, _ = _consoles()
    if as_json:
        render.print_data(out, {"name": entry.name, "kb_id": entry.kb_id, "path": str(entry.path)})
    else:
        render.say(out, f"removed {entry.name} ({entry.path}); its files are untouched")


@fleet.command("list")
@json_option("Print the list as JSON.")
def fleet_list(as_json: bool) -> None:
    """Each registered KB with its documents, chunks and how fresh its index is."""
    from pinakes_core.manage.fleet import registry_status
    from pinakes_core.manage.registry import FleetRegistry

    statuses = registry_status()
    out, _ = _consoles()
    if as_json:
        render.print_data(out, [s.model_dump(mode="json") for s in statuses])
        return
    render_fleet_list(out, statuses, FleetRegistry.load().path)


def render_fleet_list(console: Console, statuses: list[FleetKbStatus], where: Path) -> None:
    """A table: name, state, documents, chunks, last sync, files changed since, folder."""
    from rich.table import Table
    from rich.text import Text

    if not statuses:
        render.say(console, f"No KB in the fleet registry {where}. Add one: pnk fleet add PATH")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("name", "state", "docs", "chunks", "last sync", "stale", "path"):
        table.add_column(
            column,
            justify="right" if column in ("docs", "chunks") else "left",
            overflow="fold",
        )
    for item in statuses:
        status = item.status
        state = item.state if status is None or status.synced else "never synced"
        stale = "-"
        if status is not None and status.synced:
            pending = sum(status.stale.values())
            stale = "fresh" if not pending else f"{pending} file(s)"
        table.add_row(
            Text(item.name),
            Text(state),
            str(status.documents) if status else "-",
            str(status.chunks) if status else "-",
            render._when(status.last_sync) if status else "-",
            stale,
            Text(item.path),
        )
    console.print(table)
    for item in statuses:
        if item.error:
            render.say(console, (f"{item.name}: ", "yellow"), item.error)


@fleet.command("sync")
@click.argument("names", nargs=-1)
@click.option("--rebuild", is_flag=True, help="Rebuild each index from its files.")
@json_option("Print the reports as JSON.")
def fleet_sync(names: tuple[str, ...], rebuild: bool, as_json: bool) -> None:
    """Sync every registered KB (or NAMES), each under its own lock; one failing stops no other.

    Exits 1 when any KB failed.
    """
    from pinakes_core.manage.fleet import Fleet

    out, err = _consoles()
    with Fleet.open(list(names) or None) as members:

        def announce(name: str) -> None:
            if not as_json:
                render.say(err, (f"syncing {name}", "dim"))

        with progress_bar(not as_json) as progress:
            report = members.sync(rebuild=rebuild, progress=progress, announce=announce)
    if as_json:
        render.print_json(out, report)
    else:
        render_fleet_sync(out, report)
    if report.failed:
        sys.exit(1)


def render_fleet_sync(console: Console, report: FleetSyncReport) -> None:
    """One line per KB: its sync summary, or its error."""
    if not report.kbs:
        render.say(console, "No KB to sync. Add one: pnk fleet add PATH")
    for item in report.kbs:
        if item.report is None:
            render.say(console, (f"{item.name}: failed: ", "red"), item.error or "")
            continue
        r = item.report
        render.say(
            console,
            (f"{item.name}: ", "bold"),
            f"{len(r.added)} added, {len(r.changed)} changed, {len(r.removed)} removed, "
            f"{r.unchanged} unchanged in {r.seconds:.1f}s",
        )
        for skip in r.skipped:
            render.say(console, ("  skipped ", "yellow"), f"{skip.path}: {skip.reason}")
        for warning in r.warnings:
            render.say(console, ("  warning ", "yellow"), warning)


@cli.command("adopt")
@click.argument("path", type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="The KB name [default: the folder name].")
@click.option("--dry-run", is_flag=True, help="Analyse and report only; write nothing.")
@click.option("--sync", "then_sync", is_flag=True, help="Sync the new KB right away.")
@json_option("Print the report as JSON.")
def adopt_command(
    path: Path, name: str | None, dry_run: bool, then_sync: bool, as_json: bool
) -> None:
    """Make an existing vault (Obsidian, Dendron, Foam, Hugo, Logseq) a KB, keeping its metadata.

    Reads ids, titles, tags and aliases from frontmatter (and a tag vocabulary file) and maps
    them into the KB without touching a document; reports what it mapped and what it could not.
    """
    from pinakes_core import KB
    from pinakes_core.manage.adopt import adopt

    report = adopt(path, name=name, dry_run=dry_run)
    out, err = _consoles()
    sync_report = None
    if then_sync and not dry_run:
        with KB.open(report.root) as kb, progress_bar(not as_json) as progress:
            sync_report = kb.sync(progress=progress)
    if as_json:
        data = report.model_dump(mode="json")
        if sync_report is not None:
            data["sync"] = sync_report.model_dump(mode="json", by_alias=True)
        render.print_data(out, data)
        return
    render_adopt(out, report)
    if sync_report is not None:
        render.render_sync(out, sync_report)
    elif report.wrote_config:
        render.say(err, (f"Next: pnk sync --kb {report.root}", "dim"))


def render_adopt(console: Console, report: AdoptReport) -> None:
    """What was found, the settings chosen, what was mapped and what could not be."""
    if report.already_kb:
        head = f"{report.root} is a KB already ({report.name}); its pinakes.toml is unchanged."
    elif report.wrote_config:
        head = f"Adopted {report.root} as KB {report.name!r} ({report.kb_id})."
    else:
        head = f"Dry run: {report.root} would become KB {report.name!r}; nothing written."
    render.say(console, (head, "bold"))
    render.say(
        console,
        f"{report.flavour} vault, {report.documents} documents, "
        f"{report.sidecars} sidecars already there; no document is changed.",
    )
    if report.config:
        render.say(console, ("settings:", "bold"))
        for line in report.config:
            render.say(console, f"  {line}")
    for title, items, style in (
        ("mapped", report.mapped, "green"),
        ("not mapped", report.unmapped, "yellow"),
    ):
        if not items:
            continue
        render.say(console, (f"{title}:", "bold"))
        for item in items:
            render.say(console, (f"  {item.count:>5}  ", style), item.what)
            for example in item.examples[:3]:
                render.say(console, ("         e.g. ", "dim"), example)
    vocab = report.vocabulary
    if vocab is not None:
        render.say(
            console,
            ("vocabulary: ", "bold"),
            f"{vocab.source}: {vocab.terms} terms, {vocab.synonyms} synonyms; "
            f"{vocab.used_in_vocabulary} tags in use are in it, "
            f"{len(vocab.used_not_in_vocabulary)} are not; {vocab.unused_terms} terms unused.",
        )
