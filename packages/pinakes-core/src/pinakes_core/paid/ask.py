"""``pnk ask``: an explicit, budgeted answer over free retrieval (DESIGN §9).

The one place Pinakes spends money. :func:`ask` runs the free search, refuses below the
abstain threshold (unless forced), prices the worst case of every call it may make, asks for
approval above ``[budget] confirm_above_eur``, then makes one synthesis call over the passages
(plain ``ask``, or ``--deep`` when confidence is already high) or runs the sub-question loop of
:mod:`pinakes_core.paid.deep`. Every claim of the answer cites ``pnk://<kb>/<doc>#<chunk>``;
citations of passages the model was never given are removed and reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from pinakes_core.derived import replace_file, store_dir
from pinakes_core.errors import BudgetExceededError, PinakesError
from pinakes_core.paid.budget import Budget
from pinakes_core.paid.ledger import Clock, money, money_up, utc_now
from pinakes_core.paid.llm import (
    LiteLLMClient,
    Price,
    missing_extra,
    paid_extra_installed,
    price_of,
    route_of,
)
from pinakes_core.paid.passages import (
    MAX_QUESTION_CHARS,
    Citation,
    Passage,
    Session,
    Step,
    synthesis_messages,
    synthesise,
    uncited_sentences,
    unique,
)
from pinakes_core.paid.writeback import LinkSuggestion, propose, stage
from pinakes_core.uri import new_ulid

if TYPE_CHECKING:
    from pinakes_core.kb import KB
    from pinakes_core.models import SearchResult

__all__ = ["AskResult", "Cost", "CostEstimate", "EstimateLine", "ask"]

DEEP_DIR = "deep"

StopReason = Literal[
    "answered",
    "abstained",
    "dry_run",
    "confident",
    "max_rounds",
    "no_new_subquestions",
    "no_evidence",
    "budget",
]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class EstimateLine(_Model):
    """Worst case of one kind of call."""

    kind: str
    calls: int
    input_tokens_max: int = Field(description="per call: UTF-8 bytes of the prompt + overhead")
    output_tokens_max: int = Field(description="per call: the max_tokens sent")
    eur: Decimal = Field(description="all calls of this kind, worst case")


class CostEstimate(_Model):
    """The dry-run estimate printed before any money is spent."""

    model: str
    price_entry: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    usd_per_eur: Decimal
    lines: list[EstimateLine]
    total_eur: Decimal
    confirm_above_eur: Decimal
    needs_confirmation: bool
    per_operation_eur: Decimal


class Cost(_Model):
    """What an operation cost."""

    model: str
    estimate_eur: Decimal
    spent_eur: Decimal = Field(description="actual; unknown outcomes at their reserved amount")
    calls: int


class AskResult(_Model):
    """The answer of ``ask`` (``--json`` prints exactly this)."""

    operation_id: str
    question: str
    mode: Literal["ask", "deep"]
    answer: str | None
    partial: bool = Field(
        default=False, description="the budget stopped the run before its final synthesis"
    )
    citations: list[Citation]
    invalid_citations: list[str] = Field(
        default=[], description="citations of passages never given to the model; removed"
    )
    uncited_sentences: int = 0
    confidence: float | None
    stop_reason: StopReason
    cost: Cost | None
    estimate: CostEstimate | None = None
    sub_questions: list[str] = []
    repairs: list[str] = Field(default=[], description="what plan validation fixed")
    suggestions: list[LinkSuggestion] = []
    transcript: list[Step]
    transcript_file: str | None = None


def _estimate(
    session: Session, lines: list[tuple[str, int, list[dict[str, str]], int]], kb: KB
) -> CostEstimate:
    from pinakes_core.paid.llm import input_token_ceiling

    budget = kb.config.budget
    out = []
    for kind, calls, messages, max_tokens in lines:
        per_call = session.worst_case_eur(messages, max_tokens)
        out.append(
            EstimateLine(
                kind=kind,
                calls=calls,
                input_tokens_max=input_token_ceiling(messages),
                output_tokens_max=max_tokens,
                eur=money_up(per_call * calls),
            )
        )
    total = money_up(sum((line.eur for line in out), Decimal(0)))
    million, cents = Decimal(1_000_000), Decimal("0.0001")
    return CostEstimate(
        model=session.model,
        price_entry=session.price.entry,
        input_usd_per_mtok=(session.price.input * million).quantize(cents),
        output_usd_per_mtok=(session.price.output * million).quantize(cents),
        usd_per_eur=budget.usd_per_eur,
        lines=out,
        total_eur=total,
        confirm_above_eur=budget.confirm_above_eur,
        needs_confirmation=total > budget.confirm_above_eur,
        per_operation_eur=budget.per_operation_eur,
    )


def ask(
    kb: KB,
    question: str,
    *,
    deep: bool = False,
    force: bool = False,
    model: str | None = None,
    k: int | None = None,
    tags: Sequence[str] = (),
    path: str | None = None,
    approve: Callable[[CostEstimate], bool] | None = None,
    dry_run: bool = False,
    write_suggestions: bool = False,
    client: LiteLLMClient | None = None,
    clock: Clock = utc_now,
) -> AskResult:
    """Answer ``question`` from the KB with cited passages, within the ``[budget]`` windows.

    Args:
        kb: the KB (synced first if it never was).
        question: the question (at most 2000 characters).
        deep: run the sub-question loop when retrieval confidence is below
            ``[deep] confident_above`` (above it, exactly what plain ``ask`` does).
        force: answer even when retrieval confidence is below ``[retrieval] abstain_below``.
        model: a litellm model id instead of ``[ask] model``.
        k: passages for the synthesis instead of ``[ask] passages``.
        tags: filters applied to every retrieval.
        path: a path-prefix filter applied to every retrieval.
        approve: called with the worst-case estimate before anything is spent; returning
            ``False`` spends nothing. Required when the estimate is above
            ``[budget] confirm_above_eur``.
        dry_run: stop after the estimate; nothing is spent.
        write_suggestions: stage the proposed links in the sidecars (else only reported).
        client: the litellm client (tests pass one with mock responses).
        clock: the time source of the budget windows.

    Raises:
        PluginMissingError: the ``ask`` extra (litellm) is not installed.
        BudgetExceededError: the first call does not fit a window, or spending above
            ``confirm_above_eur`` was not approved; nothing was spent.
        ConfigError: the model has no price in litellm's bundled table (a local model
            needs none), or litellm knows no provider for it.
        ProviderError: the provider's API key is not set (refused before anything was
            reserved), or a call failed (see ``pnk budget`` for its cost).
    """
    question = question.strip()
    if not question:
        raise PinakesError(
            "The question is empty.", 'Ask something, e.g. pnk ask "how does X work?"'
        )
    if len(question) > MAX_QUESTION_CHARS:
        raise PinakesError(
            f"The question has {len(question)} characters; ask takes at most {MAX_QUESTION_CHARS}.",
            "Shorten it; put background in the KB instead.",
        )
    if not paid_extra_installed():
        raise missing_extra()
    cfg = kb.config
    kb_id, kb_name = cfg.kb.id, cfg.kb.name
    operation = new_ulid()
    n_synth = k or cfg.ask.passages
    mode: Literal["ask", "deep"] = "deep" if deep else "ask"

    def search(query: str, n: int) -> SearchResult:
        return kb.search(query, k=n, tags=tags, path=path, group_by="chunk")

    def to_passages(result: SearchResult) -> list[Passage]:
        return [Passage.from_hit(h, kb_id) for h in result.hits]

    first = search(question, max(n_synth, cfg.deep.passages) if deep else n_synth)
    round0 = to_passages(first)
    steps = [
        Step(
            kind="retrieval",
            query=question,
            passages=[p.uri for p in round0],
            confidence=first.confidence,
        )
    ]

    def result(**fields: object) -> AskResult:
        base: dict[str, object] = {
            "operation_id": operation,
            "question": question,
            "mode": mode,
            "answer": None,
            "citations": [],
            "confidence": first.confidence,
            "cost": None,
            "transcript": steps,
        }
        return AskResult.model_validate({**base, **fields})

    if not round0:
        return result(stop_reason="no_evidence")
    if not deep and not force and first.abstain:
        return result(stop_reason="abstained")

    model_name = model or cfg.ask.model
    route = route_of(model_name, cfg.ask.api_base, cfg.ask.local)
    session = Session(
        operation=operation,
        model=model_name,
        price=Price.free() if route.local else price_of(model_name, cfg.ask.price_model),
        budget=Budget(kb.root, cfg, clock),
        client=client or LiteLLMClient(),
        timeout_s=cfg.ask.timeout_s,
        temperature=cfg.ask.temperature,
        route=route,
    )
    single = not deep or (
        first.confidence is not None and first.confidence >= cfg.deep.confident_above
    )
    synth_passages = round0[:n_synth]
    synth_prompt, _ = synthesis_messages(question, synth_passages, None, cfg.ask.passage_bytes)
    if single:
        lines = [("synthesis", 1, synth_prompt, cfg.ask.max_output_tokens)]
        bounds = None
    else:
        from pinakes_core.paid.deep import MAX_SUBQUESTIONS, deep_bounds, worst_case_prompts

        prompts = worst_case_prompts(
            question,
            kb_id,
            ask_passages=n_synth,
            deep_passages=cfg.deep.passages,
            passage_bytes=cfg.ask.passage_bytes,
            summary_bytes=cfg.deep.summary_bytes,
        )
        bounds = deep_bounds(
            session, prompts, cfg.deep.max_output_tokens, cfg.ask.max_output_tokens
        )
        rounds = min(cfg.deep.max_rounds, MAX_SUBQUESTIONS)
        lines = [
            ("decompose", 2, prompts.decompose, cfg.deep.max_output_tokens),
            ("solve", rounds, prompts.solve, cfg.deep.max_output_tokens),
            ("synthesis", 1, prompts.synthesis, cfg.ask.max_output_tokens),
        ]
    estimate = _estimate(session, lines, kb)
    first_call = session.worst_case_eur(synth_prompt, cfg.ask.max_output_tokens)
    refusal = session.budget.refusal(operation, money_up(first_call))
    if refusal is not None:
        raise refusal
    if dry_run:
        return result(stop_reason="dry_run", estimate=estimate)
    # A call that cannot leave this machine (no provider for the model, no API key) is refused
    # here, before anything is asked, reserved or billed.
    session.client.check(route)
    approved = approve(estimate) if approve is not None else not estimate.needs_confirmation
    if not approved:
        raise BudgetExceededError(
            f"The worst case €{estimate.total_eur} was not approved"
            + (
                f" (it is above [budget] confirm_above_eur = €{estimate.confirm_above_eur})"
                if estimate.needs_confirmation
                else ""
            )
            + "; nothing was spent.",
            "Re-run with --yes to accept it, or raise [budget] confirm_above_eur.",
        )

    given: dict[tuple[str, int], Passage] = {}
    answers: list[list[Passage]] = []
    if single:
        answer = synthesise(
            session,
            question,
            synth_passages,
            given,
            kb_id=kb_id,
            kb_name=kb_name,
            limit=cfg.ask.passage_bytes,
            max_tokens=cfg.ask.max_output_tokens,
        )
        steps.append(_synthesis_step(answer))
        answers.append(answer.cited)
        out = result(
            answer=answer.text,
            citations=[p.citation() for p in answer.cited],
            invalid_citations=answer.invalid,
            uncited_sentences=uncited_sentences(answer.text),
            stop_reason="confident" if deep else "answered",
            cost=_cost(session, estimate),
            estimate=estimate,
            suggestions=_suggestions(kb, answers, answer.relations, operation, write_suggestions),
        )
        return _write_transcript(kb, out) if deep else out

    from pinakes_core.paid.deep import run_loop

    assert bounds is not None
    loop = run_loop(
        session,
        question,
        round0,
        search,
        to_passages,
        given,
        bounds=bounds,
        kb_id=kb_id,
        kb_name=kb_name,
        max_rounds=cfg.deep.max_rounds,
        deep_passages=cfg.deep.passages,
        ask_passages=n_synth,
        passage_bytes=cfg.ask.passage_bytes,
        summary_bytes=cfg.deep.summary_bytes,
        max_tokens=cfg.deep.max_output_tokens,
        confident_above=cfg.deep.confident_above,
    )
    steps.extend(loop.steps)
    for sub_answer in loop.sub_answers:
        answers.append([p for p in loop.cited if p.uri in sub_answer[1]])
    final = unique([*loop.cited, *loop.recheck, *round0])[:n_synth]
    confidence = loop.confidence if loop.confidence is not None else first.confidence
    common = {
        "confidence": confidence,
        "stop_reason": loop.stop_reason,
        "sub_questions": [q for q, _ in loop.sub_answers],
        "repairs": loop.repairs,
        "estimate": estimate,
    }
    try:
        answer = synthesise(
            session,
            question,
            final,
            given,
            kb_id=kb_id,
            kb_name=kb_name,
            limit=cfg.ask.passage_bytes,
            max_tokens=cfg.ask.max_output_tokens,
            summary=loop.summary or None,
        )
    except BudgetExceededError:
        # Not even the synthesis fits: the sub-answers, already cited, are the partial answer.
        text = "\n".join(f"- {q} — {a}" for q, a in loop.sub_answers) or None
        out = result(
            **{**common, "stop_reason": "budget"},
            answer=text,
            partial=True,
            citations=[p.citation() for p in loop.cited],
            invalid_citations=loop.invalid,
            cost=_cost(session, estimate),
            suggestions=_suggestions(kb, answers, [], operation, write_suggestions),
        )
        return _write_transcript(kb, out)
    steps.append(_synthesis_step(answer))
    answers.append(answer.cited)
    out = result(
        **common,
        answer=answer.text,
        citations=[p.citation() for p in answer.cited],
        invalid_citations=[*loop.invalid, *answer.invalid],
        uncited_sentences=uncited_sentences(answer.text),
        cost=_cost(session, estimate),
        suggestions=_suggestions(kb, answers, answer.relations, operation, write_suggestions),
    )
    return _write_transcript(kb, out)


def _synthesis_step(answer: object) -> Step:
    from pinakes_core.paid.passages import Answer

    assert isinstance(answer, Answer)
    return Step(
        kind="synthesis",
        passages=[p.uri for p in answer.passages],
        call=answer.record,
        result=answer.text,
    )


def _cost(session: Session, estimate: CostEstimate) -> Cost:
    return Cost(
        model=session.model,
        estimate_eur=estimate.total_eur,
        spent_eur=money(session.spent_eur),
        calls=len(session.calls),
    )


def _suggestions(
    kb: KB,
    answers: list[list[Passage]],
    relations: list[tuple[str, str, str]],
    operation: str,
    write: bool,
) -> list[LinkSuggestion]:
    proposed = propose(answers, relations, operation, kb.config.deep.suggest_min_confidence)
    return stage(kb, proposed) if write else proposed


def _write_transcript(kb: KB, result: AskResult) -> AskResult:
    """Write ``.pinakes/deep/<operation_id>.json`` (atomically) and name it in the result."""
    folder = store_dir(kb.root, create=True) / DEEP_DIR
    folder.mkdir(exist_ok=True)
    target = folder / f"{result.operation_id}.json"
    result = result.model_copy(update={"transcript_file": str(target.relative_to(kb.root))})
    text = json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    replace_file(target, text.encode("utf-8"))
    return result
