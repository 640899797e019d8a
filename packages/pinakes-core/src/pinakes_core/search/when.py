"""Points in time for the ``modified_after`` / ``modified_before`` filters of CLI and MCP."""

from __future__ import annotations

import datetime as dt
import re
import time

from pinakes_core.errors import PinakesError

__all__ = ["WhenError", "parse_when"]

_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class WhenError(PinakesError):
    """A date filter is neither an ISO date/time nor an age such as ``7d``."""


def parse_when(text: str, *, now: float | None = None) -> float:
    """Return UNIX seconds for an ISO date or date-time, or for an age before ``now``.

    Dates and times are local time unless they carry an offset; ages are ``90s``, ``30m``,
    ``12h``, ``7d`` or ``2w``.

    Raises:
        WhenError: naming the value and the accepted forms.
    """
    value = text.strip()
    age = _AGE.match(value)
    if age:
        return (time.time() if now is None else now) - float(age.group(1)) * _UNITS[age.group(2)]
    try:
        return dt.datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise WhenError(
            f"{text!r} is not a date or an age.",
            "Use 2024-05-01, 2024-05-01T12:00 or an age such as 7d, 12h, 2w.",
        ) from None
