"""Caller mistakes as one sentence: bad arguments and refused calls (issue 11).

fastmcp answers an out-of-range argument with pydantic's multi-line dump and logs a refused
call as "Error calling tool". This middleware turns an argument error into one sentence naming
the argument, what it accepts (from the tool's published schema) and what was given, and logs
every caller mistake as exactly that: one line at INFO, never a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentsError
from fastmcp.server.middleware import Middleware, MiddlewareContext
from pydantic import ValidationError

__all__ = ["CallerErrors", "describe"]

log = logging.getLogger(__name__)


def _concrete(schema: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional property's schema."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    return options[0] if options else schema


def _accepts(schema: dict[str, Any]) -> str:
    """What a JSON-schema property accepts, in words: 'an integer from 1 to 50'."""
    prop = _concrete(schema)
    kind = prop.get("type")
    if "enum" in prop:
        return "one of " + ", ".join(repr(v) for v in prop["enum"])
    if "const" in prop:
        return repr(prop["const"])
    low, high = prop.get("minimum"), prop.get("maximum")
    if kind in ("integer", "number"):
        noun = "an integer" if kind == "integer" else "a number"
        if low is not None and high is not None:
            return f"{noun} from {low} to {high}"
        if low is not None:
            return f"{noun} of at least {low}"
        return f"{noun} of at most {high}" if high is not None else noun
    if kind == "string":
        low, high = prop.get("minLength"), prop.get("maxLength")
        size = f"{low or 0} to {high} characters" if high is not None else None
        return f"a string of {size}" if size else "a string"
    if kind == "array":
        high = prop.get("maxItems")
        return f"a list of at most {high} items" if high is not None else "a list"
    if kind == "boolean":
        return "true or false"
    return kind or "a value"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def describe(tool: str, error: ValidationError, schema: dict[str, Any]) -> str:
    """One sentence for the first argument error of a call to ``tool``."""
    first = error.errors()[0]
    loc = [str(part) for part in first["loc"]]
    name = loc[0] if loc else "?"
    properties = schema.get("properties", {})
    kind = first["type"]
    if kind in ("missing", "missing_argument"):
        return f"{tool}: the argument {name!r} is required ({_accepts(properties.get(name, {}))})."
    if kind in ("extra_forbidden", "unexpected_keyword_argument") or name not in properties:
        return f"{tool}: there is no argument {name!r}; the arguments are {', '.join(properties)}."
    where = name if len(loc) == 1 else f"{name}[{']['.join(loc[1:])}]"
    prop = _concrete(properties[name])
    if len(loc) > 1 and isinstance(prop.get("items"), dict):
        prop = prop["items"]
    return f"{tool}: {where!r} must be {_accepts(prop)}; got {_shown(first.get('input'))}."


class CallerErrors(Middleware):
    """Rewrite argument errors as one sentence and log caller mistakes as one INFO line."""

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        """Run the call; rewrite an argument error, log a caller mistake once."""
        name = getattr(context.message, "name", "?")
        try:
            return await call_next(context)
        except ArgumentsError as exc:
            cause = exc.__cause__
            schema: dict[str, Any] = {}
            server = context.fastmcp_context.fastmcp if context.fastmcp_context else None
            if server is not None:
                tool = await server.get_tool(name)
                schema = tool.parameters if tool is not None else {}
            message = (
                describe(name, cause, schema)
                if isinstance(cause, ValidationError)
                else f"{name}: invalid arguments ({exc})."
            )
            log.info("caller mistake: %s", message)
            raise ToolError(message, log_level=logging.DEBUG) from None
        except ToolError as exc:
            if exc.log_level < logging.ERROR:
                log.info("caller mistake in %s: %s", name, exc)
            raise
