"""Options shared by the command modules (main imports them before it defines its own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["JSON_META", "json_option"]

FC = TypeVar("FC", bound=Callable[..., Any])

#: ``ctx.meta`` key that ``--json`` sets: errors then print as ``{"error": …}`` JSON too.
JSON_META = "pinakes.json"


def _mark_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta[JSON_META] = True
    return value


def json_option(help_text: str = "Print the result as JSON.") -> Callable[[FC], FC]:
    """``--json``: print the result as JSON; errors then print as ``{"error": {…}}`` too."""
    return click.option(
        "--json", "as_json", is_flag=True, callback=_mark_json, is_eager=True, help=help_text
    )
