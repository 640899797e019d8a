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
import ipaddress
import logging
import os
import re
import shlex
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pinakes_core.errors import ConfigError, PluginMissingError, ProviderError

__all__ = [
    "Completion",
    "LiteLLMClient",
    "Price",
    "ProviderRefused",
    "ProviderUnknownOutcome",
    "Route",
    "input_token_ceiling",
    "install_hint",
    "is_loopback",
    "litellm_module",
    "litellm_version",
    "missing_extra",
    "paid_extra_installed",
    "price_of",
    "redact",
    "route_of",
]

log = logging.getLogger(__name__)

_EXTRA = "'pinakes-cli[ask]'"

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


def install_hint(
    prefix: str | None = None,
    base_prefix: str | None = None,
    executable: str | None = None,
    has_pip: bool | None = None,
    workspace: Path | bool | None = True,
) -> str:
    """The command that installs the paid-path extra into the environment running Pinakes.

    One command per install route: a ``uv tool install`` (re-install the tool with the
    ``ask`` extra, keeping the packages and executables it was installed with), a clone of the
    Pinakes workspace (``uv sync --all-packages``), a virtual environment made by uv (its
    ``pyvenv.cfg`` names uv) or without pip (``uv pip install --python …``: pip may be there
    only as a package's dependency, sqlite-utils'), another virtual environment (its own
    ``python -m pip``), and a Python outside any environment (``python -m pip install
    --user``). The arguments default to this process (tests pass others); ``workspace=True``
    means "look for the workspace around this file".
    """
    prefix = sys.prefix if prefix is None else prefix
    base_prefix = sys.base_prefix if base_prefix is None else base_prefix
    python = shlex.quote(sys.executable if executable is None else executable)
    receipt = Path(prefix) / "uv-receipt.toml"
    if receipt.is_file():
        return _uv_tool_command(receipt)
    if workspace is True:
        workspace = _workspace_root()
    if isinstance(workspace, Path):
        return f"cd {shlex.quote(str(workspace))} && uv sync --all-packages"
    if has_pip is None:
        has_pip = importlib.util.find_spec("pip") is not None
    if prefix == base_prefix:
        return f"{python} -m pip install --user {_EXTRA}"
    if has_pip and not _made_by_uv(Path(prefix)):
        return f"{python} -m pip install {_EXTRA}"
    return f"uv pip install --python {python} {_EXTRA}"


def _made_by_uv(prefix: Path) -> bool:
    """Whether the virtual environment at ``prefix`` was made by uv (``uv = …`` in pyvenv.cfg)."""
    try:
        with (prefix / "pyvenv.cfg").open(encoding="utf-8", errors="replace") as cfg:
            return any(
                line.split("=", 1)[0].strip() == "uv" for line in cfg.read(4096).splitlines()
            )
    except OSError:
        return False


def _uv_tool_command(receipt: Path) -> str:
    """``uv tool install`` of the receipt's tool with the ``ask`` extra and its other parts."""
    import tomllib

    try:
        tool = tomllib.loads(receipt.read_text(encoding="utf-8")).get("tool", {})
        requirements = [r for r in tool.get("requirements", []) if isinstance(r, dict)]
        names = [str(r["name"]) for r in requirements]
        extras = sorted({*requirements[0].get("extras", []), "ask"}) if names else ["ask"]
        sources = {str(e.get("from")) for e in tool.get("entrypoints", []) if isinstance(e, dict)}
    except (OSError, ValueError, KeyError, TypeError):
        names, extras, sources = [], ["ask"], set()
    main = names[0] if names else "pinakes-cli"
    words = ["uv tool install", shlex.quote(f"{main}[{','.join(extras)}]")]
    words += [f"--with {shlex.quote(name)}" for name in names[1:]]
    words += [f"--with-executables-from {shlex.quote(n)}" for n in names[1:] if n in sources]
    return " ".join(words)


def _workspace_root() -> Path | None:
    """The Pinakes workspace clone this code runs from, if it does (``uv run`` in a clone)."""
    here = Path(__file__).resolve()
    if len(here.parents) < 6 or here.parents[3].name != "pinakes-core":
        return None
    root = here.parents[5]
    try:
        text = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if "[tool.uv.workspace]" in text else None


def missing_extra() -> PluginMissingError:
    """The error for a paid-path call without litellm, with this environment's install command."""
    return PluginMissingError(
        "`pnk ask` needs the optional paid-path extra (litellm), which is not installed.",
        f"Install it: {install_hint()}",
    )


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
        raise missing_extra() from None
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

    @classmethod
    def free(cls) -> Price:
        """The price of a local model: nothing (entry ``local``)."""
        return cls(LOCAL_ENTRY, Decimal(0), Decimal(0))

    @property
    def is_free(self) -> bool:
        """Whether every token costs nothing (a local model)."""
        return self.input == 0 and self.output == 0

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """USD for the given token counts at these (worst-case) rates."""
        return self.input * input_tokens + self.output * output_tokens

    def actual(self, prompt_tokens: int, completion_tokens: int) -> Decimal:
        """USD litellm's ``cost_per_token`` computes for a call's usage (tiers applied).

        Falls back to the worst-case rates if litellm cannot price the usage.
        """
        if self.entry == LOCAL_ENTRY:
            return Decimal(0)
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


# -- routes --------------------------------------------------------------------------------

#: The price entry of a local model (:meth:`Price.free`).
LOCAL_ENTRY = "local"
#: litellm providers whose default server is on this machine (``OLLAMA_API_BASE`` moves it).
_LOCAL_DEFAULTS = {"ollama": "OLLAMA_API_BASE", "ollama_chat": "OLLAMA_API_BASE"}
_OLLAMA_DEFAULT = "http://localhost:11434"


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost``, 127.0.0.0/8, ``::1``).

    Names are not resolved: only ``localhost`` and ``*.localhost`` count, never a name that
    happens to point here today.
    """
    try:
        host = urlsplit(url if "//" in url else f"//{url}").hostname or ""
    except ValueError:
        return False
    host = host.rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Route:
    """Where a model's calls go.

    Attributes:
        model: the litellm model id.
        api_base: the server's base URL (``[ask] api_base``), or ``None`` for litellm's default.
        local: whether the server runs on this machine (loopback ``api_base``, an Ollama model
            on its default local server, or ``[ask] local = true``): its calls cost nothing.
    """

    model: str
    api_base: str | None = None
    local: bool = False


def route_of(model: str, api_base: str | None = None, local: bool | None = None) -> Route:
    """The :class:`Route` of ``model`` with ``[ask] api_base`` and ``local``.

    ``local`` is the declared value, else whether the server is on a loopback address
    (``api_base``, or for ``ollama/`` models ``OLLAMA_API_BASE`` or Ollama's default
    ``http://localhost:11434``). Never imports litellm.

    Raises:
        ConfigError: ``local = true`` for a model whose calls would go to a hosted service
            (no ``api_base``, not an Ollama model).
    """
    prefix = model.split("/", 1)[0] if "/" in model else ""
    if local is None:
        base = api_base
        if base is None and prefix in _LOCAL_DEFAULTS:
            base = os.environ.get(_LOCAL_DEFAULTS[prefix]) or _OLLAMA_DEFAULT
        local = base is not None and is_loopback(base)
    elif local and api_base is None and prefix not in _LOCAL_DEFAULTS:
        # Without a server of its own the call goes to the provider's hosted API: pricing it
        # at zero would let it spend past every cap.
        raise ConfigError(
            f"[ask] local = true, but the model {model!r} has no [ask] api_base, so its calls "
            "would go to the provider's hosted service.",
            "Set [ask] api_base to your server's URL (e.g. http://127.0.0.1:8080/v1), or "
            "remove local = true.",
        )
    return Route(model=model, api_base=api_base, local=local)


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


#: Transport errors of httpx/httpcore raised before a request left this machine: no
#: connection was ever made (refused, unreachable, DNS, TLS handshake), or the URL is unusable.
#: A read or write error or timeout, a reset connection or any reply is not among them.
_NOT_SENT = frozenset(
    {"ConnectError", "ConnectTimeout", "UnsupportedProtocol", "InvalidURL", "ProxyError"}
)
#: Placeholder key for a local OpenAI-compatible server that checks none (the OpenAI client
#: refuses to start without one).
_LOCAL_KEY = "no-key-needed-for-a-local-server"


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the errors it was raised from or while handling, outermost first."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in out):
        out.append(current)
        current = current.__cause__ or current.__context__
    return out


def never_sent(exc: BaseException) -> bool:
    """Whether the failed call provably never reached the provider (so it cannot be billed).

    True when the outermost transport error in the chain is one raised before any byte was
    sent (:data:`_NOT_SENT`: connection refused, DNS failure, …), or when the chain ends in
    the OpenAI client's own base error (raised by the client itself, e.g. "Missing
    credentials", never by a server). A read timeout, a reset or any server reply is not.
    """
    chain = _chain(exc)
    for error in chain:
        if type(error).__module__.split(".", 1)[0] in ("httpx", "httpcore"):
            return type(error).__name__ in _NOT_SENT  # the outermost transport error decides
        if isinstance(error, ConnectionRefusedError):
            return True
    root = chain[-1]
    return (
        type(root).__module__.split(".", 1)[0] == "openai" and type(root).__name__ == "OpenAIError"
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

    def check(self, route: Route) -> None:
        """Refuse a call that could not leave this machine, before anything is reserved.

        Checks that litellm knows a provider for the model and, for a remote provider whose
        only credential is an API key, that the key's environment variable is set. Mocked
        calls never leave the process: only the route is checked for them.

        Raises:
            ConfigError: litellm knows no provider for the model.
            ProviderRefused: the provider's API key is not set (``error_class``
                ``MissingCredentials``).
        """
        litellm = litellm_module()
        try:
            litellm.get_llm_provider(route.model, api_base=route.api_base)
        except Exception:  # litellm raises BadRequestError for an unknown provider
            raise ConfigError(
                f"litellm knows no provider for the model {route.model!r}.",
                "Prefix it with its provider (openai/…, anthropic/…, ollama/…); for an "
                'OpenAI-compatible server set [ask] api_base and model = "openai/<name>" '
                "(docs/ask.md).",
            ) from None
        if self._mock is not None or route.local:
            return
        try:
            env = litellm.validate_environment(model=route.model, api_base=route.api_base)
        except Exception:  # an unusual provider: the call itself will tell
            log.debug("litellm could not check the environment of %s", route.model)
            return
        missing = [str(k) for k in env.get("missing_keys") or []]
        # Only keys are checked: a provider that also authenticates otherwise (cloud roles,
        # profiles, project settings) lists other variables and is left to the call itself.
        if missing and all(k.endswith("_API_KEY") for k in missing):
            names = " or ".join(missing)
            raise ProviderRefused(
                f"No API key for {route.model}: {names} is not set in the environment, so "
                "nothing was sent or reserved.",
                f"Export it (export {missing[-1]}=…), or use a local model (docs/ask.md, "
                '"Local models").',
                error_class="MissingCredentials",
            )

    def complete(
        self,
        *,
        model: str,
        messages: list[dict[str, str]],
        max_tokens: int,
        timeout_s: float,
        temperature: float,
        route: Route | None = None,
    ) -> Completion:
        """Make one call (to ``route``'s server when given, else litellm's default for it).

        Raises:
            ProviderRefused: the provider rejected it, or it never left this machine (no
                connection, missing credentials): nothing was charged.
            ProviderUnknownOutcome: any other failure (the charge is unknown).
        """
        litellm = litellm_module()
        extra: dict[str, Any] = {}
        if self._mock is not None:
            try:
                extra["mock_response"] = next(self._mock)
            except StopIteration:
                raise ProviderUnknownOutcome("The scripted mock responses ran out.") from None
        if route is not None and route.api_base:
            extra["api_base"] = route.api_base
        if route is not None and route.local:
            env = _quiet(lambda: litellm.validate_environment(model=model, api_base=route.api_base))
            if any(str(k).endswith("_API_KEY") for k in (env or {}).get("missing_keys") or []):
                extra["api_key"] = _LOCAL_KEY
        try:
            response = litellm.completion(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                timeout=timeout_s,
                temperature=temperature,
                num_retries=0,
                max_retries=0,
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
            if never_sent(exc):
                raise ProviderRefused(
                    f"The call to {model} never left this machine ({name}): {detail}",
                    "Check [ask] api_base (is the server running?) and the API key; nothing "
                    "was charged.",
                    error_class=f"NotSent:{name}",
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


def _quiet(fn: Any) -> Any:
    try:
        return fn()
    except Exception:
        return None
