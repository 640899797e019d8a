"""Helpers for the paid-path tests: a scripted FAKE provider, clocks, calibrations.

No test ever reaches a real provider. Single-turn tests pass litellm's own ``mock_response``
(through ``LiteLLMClient(mock_responses=...)``); tests whose turns must differ route calls to
:class:`ScriptedProvider`, a FAKE litellm ``CustomLLM`` registered under the ``scripted/``
prefix, so the calls go through litellm's real provider routing and usage handling.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"

from pinakes_core import KB
from pinakes_core.search.confidence import Calibration

SCRIPTED_MODEL = "scripted/fake"
#: The price-table entry scripted calls are billed at (``[ask] price_model``).
PRICE_MODEL = "gpt-4o-mini"

Reply = str | Callable[[list[dict[str, str]]], str]


class ScriptedProvider:
    """A FAKE provider: answers each call with the next scripted reply.

    A reply is a string or a function of the messages. Usage is reported as prompt bytes / 4
    and reply bytes / 4 tokens, so actual costs vary with the prompt like a real provider's;
    with ``worst_usage`` it is the reservation's own bound (prompt bytes + overhead, and
    ``max_tokens``), so actual cost equals the reserved worst case and budget arithmetic in a
    test is exact. Every call's messages are kept in ``calls``.
    """

    def __init__(self, replies: Sequence[Reply] = (), *, worst_usage: bool = False) -> None:
        self.replies = list(replies)
        self.worst_usage = worst_usage
        self.calls: list[list[dict[str, str]]] = []

    def handler(self) -> Any:
        import litellm
        from litellm import CustomLLM
        from litellm.types.utils import Usage

        provider = self

        class _Handler(CustomLLM):  # type: ignore[misc]
            def completion(
                self, model: str, messages: list[dict[str, str]], *args: Any, **kwargs: Any
            ) -> Any:
                provider.calls.append([dict(m) for m in messages])
                if not provider.replies:
                    raise RuntimeError("the scripted provider ran out of replies")
                reply = provider.replies.pop(0)
                text = reply(messages) if callable(reply) else reply
                response = litellm.ModelResponse()
                response.choices[0].message.content = text
                prompt = sum(len(m["content"].encode()) for m in messages)
                if provider.worst_usage:
                    from pinakes_core.paid.llm import input_token_ceiling

                    tokens_in = input_token_ceiling(messages)
                    tokens_out = int(kwargs["optional_params"]["max_tokens"])
                else:
                    tokens_in, tokens_out = prompt // 4, max(1, len(text.encode()) // 4)
                response.usage = Usage(
                    prompt_tokens=tokens_in,
                    completion_tokens=tokens_out,
                    total_tokens=tokens_in + tokens_out,
                )
                response.model = model
                return response

        return _Handler()

    def __enter__(self) -> ScriptedProvider:
        import litellm

        self._saved = list(litellm.custom_provider_map)
        litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": self.handler()}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
        return self

    def __exit__(self, *exc: object) -> None:
        import litellm

        litellm.custom_provider_map = self._saved


def scripted_config(root: Path, extra: str = "") -> None:
    """Point the KB's ``[ask]`` at the scripted provider (billed as gpt-4o-mini)."""
    text = (root / "pinakes.toml").read_text(encoding="utf-8")
    text += f'\n[ask]\nmodel = "{SCRIPTED_MODEL}"\nprice_model = "{PRICE_MODEL}"\n{extra}'
    (root / "pinakes.toml").write_text(text, encoding="utf-8")


class Clock:
    """An injectable clock that tests move by hand."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def constant_calibration(kb: KB, probability_logit: float) -> None:
    """Store a calibration for the KB's model that gives every query the same confidence."""
    store_model = kb.store().get_meta("model_id") or ""
    kb.searcher.save_calibration(
        Calibration(
            model_id=store_model,
            features=["bm25_top"],
            off=[0.0],
            scale=[1.0],
            coef=[0.0],
            intercept=probability_logit,
            fitted_on="test",
            n=1,
        )
    )


def threshold_calibration(kb: KB, feature: str, low: float, high: float) -> None:
    """A calibration that is ~0 when ``feature`` is at ``low`` and ~1 when it is at ``high``."""
    kb.searcher.save_calibration(
        Calibration(
            model_id=kb.store().get_meta("model_id") or "",
            features=[feature],
            off=[(low + high) / 2],
            scale=[(high - low) / 8],  # low and high sit at the clipped positions -4 and +4
            coef=[2.0],
            intercept=0.0,
            fitted_on="test",
            n=1,
        )
    )


def synthesis(answer: str, relations: Sequence[dict[str, str]] = ()) -> str:
    return json.dumps({"answer": answer, "relations": list(relations)})


def plan(*items: tuple[str, str, Sequence[str]]) -> str:
    return json.dumps(
        {"subquestions": [{"id": i, "question": q, "depends_on": list(d)} for i, q, d in items]}
    )


def solve(answer: str, summary: str) -> str:
    return json.dumps({"answer": answer, "summary": summary})


def ledger_path(root: Path) -> Path:
    """The KB's ledger file (in the test's own ``XDG_STATE_HOME``, see conftest)."""
    from pinakes_core.config import load_config
    from pinakes_core.paid.ledger import LEDGER_FILE, ledger_dir

    return ledger_dir(load_config(root).kb.id) / LEDGER_FILE


def ledger_lines(root: Path) -> list[dict[str, Any]]:
    path = ledger_path(root)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def iter_files(root: Path) -> Iterator[Path]:
    yield from (p for p in root.rglob("*") if p.is_file())


def set_budget(root: Path, lines: str) -> None:
    """Replace the KB's ``[budget]`` section with ``lines``."""
    path = root / "pinakes.toml"
    kept, skipping = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            skipping = line.strip() == "[budget]"
        if not skipping:
            kept.append(line)
    path.write_text("\n".join(kept) + f"\n[budget]\n{lines}\n", encoding="utf-8")
