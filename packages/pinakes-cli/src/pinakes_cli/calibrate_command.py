"""``pnk calibrate``: refit a KB's confidence calibration from synthetic queries (no labels)."""

from __future__ import annotations

import click

from pinakes_cli import render


@click.command()
@click.option("--kb", "kb_path", default=".", help="The KB folder (default: current folder).")
@click.option("--json", "as_json", is_flag=True, help="Print the calibration as JSON.")
def calibrate(kb_path: str, as_json: bool) -> None:
    """Refit confidence for this KB from its own synthetic queries (`pnk sync` does it when needed)."""
    from pinakes_cli.main import _err, _out, _progress
    from pinakes_core import KB, PinakesError

    try:
        with KB.open(kb_path) as kb, _progress(not as_json) as progress:
            calibration = kb.self_calibrate(force=True, progress=progress)
    except PinakesError as exc:
        _err().print(f"error: {exc}", markup=False, highlight=False)
        raise SystemExit(1) from None
    if calibration is None:
        _out().print("The KB has no documents: nothing to calibrate.", markup=False)
    elif as_json:
        render.print_json(_out(), calibration)
    else:
        _out().print(
            f"confidence calibrated on {calibration.n} synthetic queries ({calibration.fitted_on}).",
            markup=False,
            highlight=False,
        )
