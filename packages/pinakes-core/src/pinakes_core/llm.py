"""The one route to model providers: litellm, imported lazily and only on the paid path.

Nothing on the free path (sync, search, links, doctor, the MCP server) imports this module's
dependency: :func:`litellm_module` is the only place ``import litellm`` happens, and it sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` first so litellm reads the price table bundled with the
installed version instead of fetching one at run time.

API keys are never handled here: litellm reads them from the provider's environment variables
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, …). Errors and anything else Pinakes prints or
stores pass through :func:`redact`, which masks the values of key-like environment variables.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pinakes_core.errors import ConfigError, PluginMissingError, ProviderError

__all__ = [
    "INSTALL_HINT",
    "Completion",
    "LiteLLMClient",
    "Price",
    "ProviderRefused",
    "ProviderUnknownOutcome",
    "input_token_ceiling",
    "litellm_module",
    "litellm_version",
    "paid_extra_installed",
    "price_of",
    "redact",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "uv pip install 'pinakes-cli[ask]'   (or: pip install 'pinakes-cli[ask]')"

#: Tokens added per chat message and per request by providers' chat templates (generous: the
#: largest documented overhead is a handful of tokens).
_MESSAGE_OVERHEAD = 16
_REQUEST_OVERHEAD = 16


def paid_extra_installed() -> bool:
    """Whether litellm is importable (without importing it)."""
    try:
        return importlib.util.find_spec("litellm") is not None
    except (ImportError, ValueError):
        return False


def litellm_module() -> Any:
    """Import and return litellm, configured for Pinakes (offline price table, no chatter).

    Raises:
        PluginMissingError: if the ``ask`` extra is not installed; the hint is the install
            command.
    """
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    try:
        import litellm
    except ImportError:
        raise PluginMissingError(
            "`pnk ask` needs the optional paid-path extra (litellm), which is not installed.",
            f"Install it: {INSTALL_HINT}",
        ) from None
    litellm.suppress_debug_info = True  # no "Give Feedback" banners on stdout
    litellm.drop_params = True  # a provider without e.g. temperature ignores it, never fails
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


# -- keys ----------------------------------------------------------------------------------

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)


def _secrets(environ: Mapping[str, str]) -> list[str]:
    values = {v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Mask every value of a key-like environment variable (``*_API_KEY``, ``*TOKEN*``, …)."""
    for secret in _secrets(os.environ if environ is None else environ):
        text = text.replace(secret, "[redacted]")
    return text


# -- prices --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """USD per token from litellm's bundled table, as exact decimals.

    ``input``/``output`` are the highest standard per-token rates the entry lists (tiered
    prices above some context length included; batch, cache and priority-tier rates, which
    Pinakes never requests, left out), so a worst case priced with them is never low.
    """

    entry: str
    input: Decimal
    output: Decimal

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """USD for the given token counts at these (worst-case) rates."""
        return self.input * input_tokens + self.output * output_tokens

    def actual(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """USD litellm's ``cost_per_token`` computes for a call's usage (tiers applied).

        Falls back to the worst-case rates if litellm cannot price the usage.
        """
        try:
            prompt_usd, completion_usd = litellm_module().cost_per_token(
                model=self.entry, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
            return Decimal(str(prompt_usd)) + Decimal(str(completion_usd))
        except Exception:  # litellm raises plain Exceptions for pricing gaps
            log.warning(
                "litellm could not price usage of %s; using the table's top rates", self.entry
            )
            return self.cost(prompt_tokens, completion_tokens)


def _rate(entry: Mapping[str, Any], kind: str) -> Decimal | None:
    rates = [
        Decimal(str(value))
        for key, value in entry.items()
        if (key == f"{kind}_cost_per_token" or key.startswith(f"{kind}_cost_per_token_above_"))
        and isinstance(value, int | float)
    ]
    return max(rates) if rates else None


def price_of(model: str, price_model: str | None = None) -> Price:
    """Look up ``price_model or model`` in litellm's bundled price table.

    Raises:
        ConfigError: if the table has no per-token price for it (Pinakes never spends at an
            unknown price).
    """
    litellm = litellm_module()
    name = price_model or model
    entry = litellm.model_cost.get(name)
    if entry is None and "/" in name:
        entry = litellm.model_cost.get(name.split("/", 1)[1])
    if entry is None:
        raise ConfigError(
            f"Model {name!r} has no entry in litellm's bundled price table "
            f"(litellm {litellm_version()}), so its cost cannot be bounded.",
            "Use a listed model in [ask] model, or set [ask] price_model to the listed "
            'model to bill it as (e.g. price_model = "gpt-4o-mini").',
        )
    input_rate, output_rate = _rate(entry, "input"), _rate(entry, "output")
    if input_rate is None or output_rate is None:
        raise ConfigError(
            f"litellm's price table lists {name!r} without per-token prices.",
            "Pick another model or set [ask] price_model.",
        )
    return Price(name, input_rate, output_rate)


def litellm_version() -> str:
    """The installed litellm version (from its metadata; no import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litellm")
    except PackageNotFoundError:
        return "not installed"


def input_token_ceiling(messages: Sequence[Mapping[str, str]]) -> int:
    """A bound on the input tokens of ``messages`` that holds for every provider's tokenizer.

    Byte-level BPE and SentencePiece-with-byte-fallback tokenizers never produce more tokens
    than the text has UTF-8 bytes; the chat template adds a few tokens per message.
    """
    text_bytes = sum(len(m["content"].encode("utf-8")) for m in messages)
    return text_bytes + _MESSAGE_OVERHEAD * len(messages) + _REQUEST_OVERHEAD


# -- calls ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    """What one call returned: the text and the provider's token usage."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None


class ProviderRefused(ProviderError):
    """The provider rejected the call before doing any work: nothing was charged.

    Attributes:
        error_class: litellm's error class name (``AuthenticationError``, …).
    """

    def __init__(self, message: str, hint: str | None = None, error_class: str = "") -> None:
        super().__init__(message, hint)
        self.error_class = error_class


class ProviderUnknownOutcome(ProviderError):
    """The call failed in a way that may or may not have been charged (timeout, 5xx)."""


# litellm's error classes whose calls the provider never bills (auth, bad request, quota, 503).
_REFUSED = (
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "BadRequestError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ServiceUnavailableError",
)


class LiteLLMClient:
    """Makes chat calls through ``litellm.completion``.

    Args:
        mock_responses: for tests and demos only: each call consumes the next item and passes
            it as litellm's ``mock_response`` (a string, or an exception to raise), so the call
            never leaves the process. ``None`` (the default) calls the real provider.
    """

    def __init__(self, mock_responses: Iterable[str | BaseException] | None = None) -> None:
        self._mock: Iterator[str | BaseException] | None = (
            iter(mock_responses) if mock_responses is not None else None
        )

    def complete(
        self,
        *,
        model: str,
        messages: list[dict[str, str]],
        max_tokens: int,
        timeout_s: float,
        temperature: float,
    ) -> Completion:
        """Make one call.

        Raises:
            ProviderRefused: the provider rejected it (nothing charged).
            ProviderUnknownOutcome: any other failure (the charge is unknown).
        """
        litellm = litellm_module()
        extra: dict[str, Any] = {}
        if self._mock is not None:
            try:
                extra["mock_response"] = next(self._mock)
            except StopIteration:
                raise ProviderUnknownOutcome("The scripted mock responses ran out.") from None
        try:
            response = litellm.completion(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                timeout=timeout_s,
                temperature=temperature,
                num_retries=0,
                **extra,
            )
        except Exception as exc:
            name = type(exc).__name__
            raw = str(getattr(exc, "message", "") or exc).strip()
            detail = redact(raw.splitlines()[0] if raw else name)[:300]
            if any(cls.__name__ in _REFUSED for cls in type(exc).__mro__):
                raise ProviderRefused(
                    f"The provider refused the call to {model} ({name}): {detail}",
                    "Check the model name and that its API key is set in the environment.",
                    error_class=name,
                ) from None
            raise ProviderUnknownOutcome(
                f"The call to {model} failed ({name}): {detail}",
                "Its cost is unknown and counted at the reserved amount; `pnk budget` lists it.",
            ) from None
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        return Completion(
            text=text,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )
