"""``pnk init``, ``pnk templates``, ``pnk upgrade``, ``pnk schema review``, ``pnk hooks`` (issue 16).

Commands that change committed files (``upgrade``, ``schema review``) show the diff first and
write only on confirmation: ``--yes``, or a "y" at the prompt on a terminal. Without a terminal
and without ``--yes`` they refuse (exit 1) instead of waiting for an answer that cannot come;
``--dry-run`` and ``--json`` without ``--yes`` only show.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pinakes_cli import render
from pinakes_cli.options import json_option
from pinakes_cli.render import console, print_data, print_json
from pinakes_cli.root import cli, kb_option
from pinakes_cli.root import out as _lazy_out

if TYPE_CHECKING:
    from rich.console import Console

    from pinakes_core import KB, SyncReport
    from pinakes_core.manage import hooks as git_hooks
    from pinakes_core.manage.templates import StampReport
    from pinakes_core.manage.upgrade import UpgradePlan


# rich and the template/upgrade/suggestion modules load inside the commands that use them (issue 14).

__all__ = ["hooks", "init", "init_with_template", "schema", "templates", "upgrade"]


def _out() -> Console:
    return console(soft_wrap=True)


def _err() -> Console:
    return console(stderr=True, soft_wrap=True)


def _say(console: Console, text: str, style: str | None = None) -> None:
    """Print text that may hold user data: never through Rich markup or highlighting."""
    console.print(text, style=style, markup=False, highlight=False)


def _kb(ctx: click.Context, kb_path: Path | None) -> KB:
    from pinakes_core import KB

    kb = KB.open(kb_path or (ctx.obj or {}).get("kb") or Path("."))
    ctx.call_on_close(kb.close)
    return kb


def _kb_path_option(command: Any) -> Any:
    return click.option(
        "--kb",
        "kb_path",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help="The KB folder (or any folder inside it) [default: the global --kb].",
    )(command)


def _print_diff(console: Console, diff: str) -> None:
    for line in diff.splitlines():
        style = (
            "green"
            if line.startswith("+") and not line.startswith("+++")
            else "red"
            if line.startswith("-") and not line.startswith("---")
            else "cyan"
            if line.startswith("@@")
            else None
        )
        _say(console, line, style)


def _confirm(question: str, yes: bool) -> bool:
    """``--yes`` → yes; a terminal → ask; otherwise refuse with exit 1 (never hang)."""
    if yes:
        return True
    if not sys.stdin.isatty():
        _say(_err(), f"error: {question} needs confirmation; nothing was written.", "red")
        _say(_err(), "hint: run it again with --yes, or on a terminal to be asked.")
        sys.exit(1)
    return click.confirm(question, default=False)


# -- init ---------------------------------------------------------------------------------------


@cli.command()
@kb_option
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--name", help="KB name (default: the folder name).")
@click.option(
    "--template",
    help="Stamp a template: general, research-papers, engineering-docs (see `pnk templates`) "
    "or a template folder.",
)
@json_option()
@click.pass_context
def init(
    ctx: click.Context, path: Path | None, name: str | None, template: str | None, as_json: bool
) -> None:
    """Make PATH (default: --kb or the current folder) a KB: writes pinakes.toml and .gitignore."""
    if template:
        init_with_template(path or ctx.obj["kb"], template, name, as_json)
        return
    from pinakes_core import KB
    from pinakes_core.config import NEW_KB_SIDECARS

    kb = KB.init(path or ctx.obj["kb"], name=name, sidecars=NEW_KB_SIDECARS)
    if as_json:
        render.print_data(
            _lazy_out(), {"root": str(kb.root), "name": kb.config.kb.name, "id": kb.config.kb.id}
        )
    else:
        out = _lazy_out()
        out.print(
            render.line(f"Initialised KB {kb.config.kb.name!r} ({kb.config.kb.id}) in {kb.root}")
        )
        out.print(render.line(f"Next: pnk sync --kb {kb.root}"))


# -- init --template ----------------------------------------------------------------------------


def init_with_template(path: Path, template: str, name: str | None, as_json: bool) -> StampReport:
    """``pnk init PATH --template T``: stamp the template and say what was written."""
    from pinakes_core.config import NEW_KB_SIDECARS
    from pinakes_core.manage.templates import init_from_template

    report = init_from_template(path, template, name=name, sidecars=NEW_KB_SIDECARS)
    if as_json:
        print_json(_out(), report)
        return report
    out = _out()
    _say(
        out,
        f"Initialised KB {report.name!r} ({report.kb_id}) in {report.root} "
        f"from template {report.template} {report.version}",
    )
    for rel in report.written:
        _say(out, f"  + {rel}", "green")
    for rel in report.kept:
        _say(out, f"  = {rel} (already there; kept)")
    _say(out, "Commit pinakes.toml and pinakes-template.lock with your notes.")
    _say(out, f"Next: pnk sync --kb {report.root}")
    return report


# -- templates ---------------------------------------------------------------------------------


@cli.command()
@json_option("Print the templates as JSON.")
def templates(as_json: bool) -> None:
    """List the templates `pnk init --template` can stamp."""
    from rich.table import Table

    from pinakes_core.manage.templates import list_templates

    found = list_templates()
    out = _out()
    if as_json:
        print_data(out, [t.model_dump(mode="json") for t in found])
        return
    table = Table(box=None, pad_edge=False)
    for column in ("template", "version", "schema", "description"):
        table.add_column(column)
    for t in found:
        table.add_row(
            t.name,
            t.version,
            f"{t.entity_types} entity, {t.relation_types} relation types",
            t.description,
        )
    out.print(table, markup=False, highlight=False)
    _say(out, "Use one: pnk init PATH --template NAME (or the path of your own template folder).")


# -- upgrade -----------------------------------------------------------------------------------


def _render_plan(console: Console, plan: UpgradePlan) -> None:
    if plan.up_to_date:
        _say(console, f"Up to date: template {plan.template} {plan.to_version}; nothing to do.")
        return
    if plan.from_template is not None:
        # The KB has a template; it adopts another (it said "no template -> 1.0").
        _say(console, f"Switch template: {plan.from_template} -> {plan.template} {plan.to_version}")
    else:
        start = plan.from_version or "no template"
        _say(console, f"Upgrade {plan.template}: {start} -> {plan.to_version}")
    if plan.config_diff:
        _print_diff(console, plan.config_diff)
    for folder in plan.folders:
        _say(console, f"new folder {folder}/", "green")
    labels = {
        "add": "new file",
        "update": "update (you never changed it)",
        "kept-deleted": "you deleted it; not re-added",
        "dropped": "no longer in the template; yours kept",
        "conflict": "conflict: yours kept",
    }
    for item in plan.files:
        _say(console, f"{labels[item.action]}: {item.path}", "bold")
        if item.action in ("add", "update"):
            _print_diff(console, item.diff)
    for line in plan.conflicts:
        _say(console, f"conflict: {line}", "yellow")


@cli.command()
@_kb_path_option
@click.option(
    "--template",
    "template",
    help="Template name or folder [default: the one pinakes.toml records]; a KB without one adopts it.",
)
@click.option("--yes", is_flag=True, help="Apply without asking.")
@click.option("--dry-run", is_flag=True, help="Only show what would change.")
@json_option("Print the plan as JSON (applied only with --yes).")
@click.pass_context
def upgrade(
    ctx: click.Context,
    kb_path: Path | None,
    template: str | None,
    yes: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Upgrade the KB to its template's newer version: shows the diff, applies on confirmation.

    Files and settings you changed are kept and reported as conflicts; a rerun does nothing.
    """
    from pinakes_core.manage.upgrade import apply_upgrade, plan_upgrade

    kb = _kb(ctx, kb_path)
    plan = plan_upgrade(kb, template)
    if as_json or dry_run or plan.up_to_date or not plan.changes:
        if yes and not dry_run and plan.changes and not plan.up_to_date:
            plan = apply_upgrade(kb, template)
        if as_json:
            print_json(_out(), plan)
        else:
            _render_plan(_out(), plan)
        return
    _render_plan(_out(), plan)
    if not _confirm(f"Apply the upgrade to {plan.template} {plan.to_version}?", yes):
        _say(_err(), "Nothing was written.")
        return
    done = apply_upgrade(kb, template)
    _say(_out(), f"Upgraded to {done.template} {done.to_version}.", "green")
    if done.conflicts:
        _say(_out(), f"{len(done.conflicts)} conflict(s) left for you to resolve (listed above).")


# -- schema ------------------------------------------------------------------------------------


@cli.group()
def schema() -> None:
    """The seed schema in pinakes.toml: review what the KB suggests adding."""


@schema.command()
@_kb_path_option
@click.option("--yes", is_flag=True, help="Promote every proposal without asking.")
@click.option("--dry-run", is_flag=True, help="Only show the proposals.")
@json_option("Print the review as JSON (applied only with --yes).")
@click.pass_context
def review(
    ctx: click.Context, kb_path: Path | None, yes: bool, dry_run: bool, as_json: bool
) -> None:
    """Propose schema types seen often enough; each is a diff of pinakes.toml to confirm.

    A suggestion is proposed when seen in enough runs and sources, with enough confidence, and
    unlike every existing type ([schema.review] sets the thresholds).
    """
    from pinakes_core.paid.suggestions import promote, review_schema

    kb = _kb(ctx, kb_path)
    result = review_schema(kb.root, kb.config.schema_, lambda: kb.embedder)
    applied: list[str] = []
    if as_json:
        if yes and not dry_run:
            for candidate in result.proposals:
                promote(kb.root, candidate, write=True)
                applied.append(candidate.name)
        payload = result.model_dump(mode="json")
        payload["applied"] = applied
        print_data(_out(), payload)
        return
    out = _out()
    _say(
        out,
        f"{result.suggestions} suggestion(s) in {result.file}"
        + (f" ({result.bad_lines} unreadable line(s) skipped)" if result.bad_lines else ""),
    )
    for candidate in result.held:
        _say(out, f"not yet: {candidate.kind} {candidate.name}: {'; '.join(candidate.blocked_by)}")
    if not result.proposals:
        _say(out, "No suggestion passes every threshold; nothing to promote.")
        return
    for candidate in result.proposals:
        _say(
            out,
            f"proposal: {candidate.kind} {candidate.name} (seen {candidate.seen} times in "
            f"{candidate.runs} runs, {candidate.sources} sources, mean confidence "
            f"{candidate.mean_confidence:.2f})",
            "bold",
        )
        if dry_run:
            _print_diff(out, candidate.diff)
            continue
        # Recomputed against the file as it is now (an earlier promotion changed it).
        _print_diff(out, promote(kb.root, candidate, write=False))
        if _confirm(f"Add {candidate.kind} type {candidate.name!r} to [schema]?", yes):
            promote(kb.root, candidate, write=True)
            applied.append(candidate.name)
    if applied:
        _say(out, f"Promoted: {', '.join(applied)}. Commit pinakes.toml to share them.", "green")


# -- hooks -------------------------------------------------------------------------------------


def _pnk_command() -> list[str]:
    """The absolute command that runs this Pinakes: the interpreter running now."""
    return [str(Path(sys.executable).absolute()), "-m", "pinakes_cli"]


def _render_hooks(report: git_hooks.HooksReport) -> None:
    out = _out()
    for line in report.changed:
        _say(out, line, "green")
    _say(out, f"repository {report.repo}; hooks in {report.hooks_dir}; KB at {report.kb_path}")
    for hook in report.hooks:
        extra = " (runs the previous hook first)" if hook.chained else ""
        _say(out, f"  {hook.name:<14} {hook.state}{extra}")
    gone = sorted({h.command[0] for h in report.hooks if h.command and not h.command_ok})
    if gone:
        # The hook's sync starts in the background with its output discarded: without this
        # line a moved or deleted environment leaves every hook syncing nothing, silently.
        _say(
            out,
            f"broken: the hooks run {gone[0]}, which no longer exists; until you run `pnk hooks "
            "install` again from the Pinakes you use now, they sync only through a `pnk` on "
            "git's PATH, if there is one.",
            "red",
        )
    last = report.last_sync
    if last:
        verdict = "ok" if last.get("ok") else f"failed: {last.get('error')}"
        _say(out, f"last hook sync: {verdict}")


def _show_hooks(report: git_hooks.HooksReport, as_json: bool) -> None:
    if as_json:
        print_json(_out(), report)
    else:
        _render_hooks(report)


@cli.group()
def hooks() -> None:
    """Git hooks that re-sync the KB in the background after commit, merge, checkout, rebase."""


@hooks.command()
@_kb_path_option
@json_option("Print the hook status as JSON.")
@click.pass_context
def install(ctx: click.Context, kb_path: Path | None, as_json: bool) -> None:
    """Install the hooks (existing hooks are kept and still run first)."""
    from pinakes_core.manage import hooks as git_hooks

    kb = _kb(ctx, kb_path)
    report = git_hooks.install_hooks(kb.root, _pnk_command())
    _show_hooks(report, as_json)


@hooks.command()
@_kb_path_option
@json_option("Print the hook status as JSON.")
@click.pass_context
def uninstall(ctx: click.Context, kb_path: Path | None, as_json: bool) -> None:
    """Remove the hooks for this KB, restoring what was there before."""
    from pinakes_core.manage import hooks as git_hooks

    kb = _kb(ctx, kb_path)
    report = git_hooks.uninstall_hooks(kb.root)
    _show_hooks(report, as_json)


@hooks.command()
@_kb_path_option
@json_option("Print the hook status as JSON.")
@click.pass_context
def status(ctx: click.Context, kb_path: Path | None, as_json: bool) -> None:
    """Show which hooks are installed and how the last background sync went."""
    from pinakes_core.manage import hooks as git_hooks

    kb = _kb(ctx, kb_path)
    report = git_hooks.hooks_status(kb.root)
    _show_hooks(report, as_json)


@hooks.command(name="sync")
@_kb_path_option
@click.pass_context
def hook_sync(ctx: click.Context, kb_path: Path | None) -> None:
    """The quiet incremental sync the hooks run (waits its turn behind a running sync)."""
    from pinakes_core import KB
    from pinakes_core.errors import PinakesError
    from pinakes_core.manage import hooks as git_hooks
    from pinakes_core.manage.folder import find_root

    try:
        root = find_root(kb_path or (ctx.obj or {}).get("kb") or Path("."))
    except PinakesError:
        sys.exit(1)  # quiet: a hook has nowhere to show it

    def sync_once() -> SyncReport:
        with KB.open(root) as kb:
            return kb.sync()

    outcome = git_hooks.run_hook_sync(root, sync=sync_once)
    sys.exit(0 if outcome.get("ok") else 1)
