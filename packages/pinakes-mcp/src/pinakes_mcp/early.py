"""A read-only tool call answered by the stdio front before fastmcp has loaded.

The front (:mod:`pinakes_mcp.front`, standard library only) imports this module once the KBs
are open (so pydantic and core are loaded already) to answer a ``tools/call`` for one of
:data:`TOOLS` itself. The tool's body is the one fastmcp serves
(:func:`pinakes_mcp.toolkit.served_tool`); what fastmcp adds around it is done here the same
way, and only that:

- the arguments are validated by pydantic against the body's signature, as fastmcp validates
  them (lax, a missing or unknown argument refused); a call whose arguments do not validate is
  *not* answered here (:func:`call` returns ``None``) but left to fastmcp, whose caller-errors
  middleware words the refusal (:mod:`pinakes_mcp.errors`);
- the result is serialized through the return type's own pydantic serializer, NaN and infinity
  kept as tokens and then refused, and sent as the structured content plus one text block of
  the same JSON;
- a :class:`~pinakes_core.PinakesError` is a tool error with its message (logged as a caller
  mistake); anything else a tool error that names the tool only (fastmcp's error masking).

The tests compare every reply here with fastmcp's own for the same request.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import typing
from collections.abc import Callable
from typing import Any, cast

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from pinakes_core.errors import PinakesError
from pinakes_mcp.search import pinakes_search
from pinakes_mcp.served import Registry

__all__ = ["TOOLS", "call"]

log = logging.getLogger(__name__)

#: the tools the front runs itself, by name: each a body taking the registry first.
TOOLS: dict[str, Callable[..., Any]] = {"pinakes_search": pinakes_search}


class _Refused(Exception):
    """A result fastmcp would turn into a tool error with this message."""


@functools.cache
def _arguments(name: str) -> TypeAdapter[Any]:
    """Validates a call's arguments as fastmcp does: the body's signature, less the registry."""
    body = TOOLS[name]

    @functools.wraps(body)
    def arguments(**given: Any) -> dict[str, Any]:
        return given

    signature = inspect.signature(body)
    _, *rest = signature.parameters.values()
    arguments.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=rest, return_annotation=inspect.Signature.empty
    )
    arguments.__annotations__ = {
        key: hint for key, hint in body.__annotations__.items() if key not in ("registry", "return")
    }
    return TypeAdapter(cast(Any, arguments))  # a function: its arguments are validated


@functools.cache
def _serializer(name: str) -> pydantic_core.SchemaSerializer:
    returns = typing.get_type_hints(TOOLS[name])["return"]
    return pydantic_core.SchemaSerializer(
        TypeAdapter(returns).core_schema, config={"ser_json_inf_nan": "constants"}
    )


def _finite(value: Any, path: str = "$") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _Refused(
            f"Tool result contains a non-finite float ({value!r}) at {path}; "
            "JSON cannot represent NaN or Infinity"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _finite(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _finite(item, f"{path}[{index}]")


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def call(registry: Registry, name: str, arguments: Any) -> dict[str, Any] | None:
    """The ``tools/call`` result for ``name(**arguments)``, or ``None`` to leave it to fastmcp.

    ``None`` when ``name`` is not one of :data:`TOOLS` or the arguments do not validate (the
    tool's body has not run then). Call once the served KBs are ready (their warm-up done).
    """
    if name not in TOOLS or not isinstance(arguments, dict):
        return None
    try:
        given = _arguments(name).validate_python(arguments)
    except ValidationError:
        return None
    try:
        output = TOOLS[name](registry, **given)
        payload = _serializer(name).to_json(output)
        structured = json.loads(payload)
        if b"NaN" in payload or b"Infinity" in payload:
            _finite(structured)
    except PinakesError as exc:
        log.info("caller mistake in %s: %s", name, exc)
        return _error(str(exc))
    except _Refused as exc:
        log.error("Error calling tool %r: %s", name, exc)
        return _error(str(exc))
    except Exception:
        log.exception("Error calling tool %r", name)
        return _error(f"Error calling tool {name!r}")
    text = pydantic_core.to_json(structured).decode()
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": False,
    }
