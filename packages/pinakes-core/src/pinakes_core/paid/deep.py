"""``ask --deep``: a bounded sub-question loop over free retrieval (DESIGN §9).

1. **Decompose** (one call, a second only if the first reply is not usable JSON) into at most
   :data:`MAX_SUBQUESTIONS` sub-questions with dependencies; :func:`plan_dag` repairs what the
   model got wrong (unknown or self dependencies, cycles, duplicates, too many) and orders the
   rest topologically.
2. **Per sub-question** (a round): free retrieval → one *solve* call over the passages and the
   rolling summary → the summary is rewritten by the model and cut to ``[deep] summary_bytes``,
   so every round's prompt has the same bound (constant cost per round). Then a free
   *re-check*: the original question searched together with the round's answer; its
   calibrated confidence (never the model's opinion) decides whether the evidence suffices.
3. **Stop** on confidence (``confident``), ``max_rounds``, an exhausted plan
   (``no_new_subquestions``), sub-questions that find nothing new (``no_evidence``), or the
   budget (``budget``): every call is reserved first, with room kept for the final synthesis.
4. **Synthesise** once over the summary and the best passages; if even that cannot be afforded,
   the sub-answers are returned as a partial answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pinakes_core.errors import BudgetExceededError
from pinakes_core.models import SearchResult
from pinakes_core.paid.llm import Completion
from pinakes_core.paid.passages import (
    DATA_NOTE,
    CallRecord,
    Passage,
    Session,
    Step,
    clip_bytes,
    parse_json_object,
    placeholder_passage,
    render_passages,
    resolve_citations,
    strip_citations,
    synthesis_messages,
    unique,
)

__all__ = [
    "MAX_SUBQUESTIONS",
    "DeepOutcome",
    "SubQuestion",
    "deep_bounds",
    "plan_dag",
    "run_loop",
    "worst_case_prompts",
]

#: The DAG is capped at this many sub-questions (DESIGN §9).
MAX_SUBQUESTIONS = 5
#: A sub-question is cut to this many bytes.
SUBQUESTION_BYTES = 300
#: Query text appended to the question for the free re-check.
RECHECK_CHARS = 600

DECOMPOSE_SYSTEM = (
    "You plan how to answer a question from a knowledge base that can only be searched. Break "
    f"it into at most {MAX_SUBQUESTIONS} simpler, self-contained sub-questions, each answerable "
    "by one search, in the order they should be answered; a sub-question may depend on the "
    "answers of earlier ones. " + DATA_NOTE + "\n"
    'Reply with one JSON object: {"subquestions": [{"id": "s1", "question": "...", '
    '"depends_on": []}]}. Reply {"subquestions": []} if the question needs no breaking down.'
)
REPAIR_NOTE = (
    "\n\nYour previous reply was not a usable JSON object. Reply with the JSON object only."
)

SOLVE_SYSTEM = (
    "You answer one sub-question, a step towards the main question, using only the numbered "
    "passages and the findings so far. " + DATA_NOTE + " Cite every claim with the passage "
    "label in square brackets, e.g. [P2]; findings may cite pnk:// ids, keep those as written. "
    "If the passages do not answer the sub-question, say 'not found'.\n"
    'Reply with one JSON object: {"answer": "<short cited answer>", "summary": "<the '
    "findings so far rewritten to include this answer, at most {words} words, keeping the "
    'citations>"}.'
)


@dataclass(frozen=True)
class SubQuestion:
    """One node of the plan."""

    id: str
    question: str
    depends_on: tuple[str, ...]


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip("?. ")


def plan_dag(
    raw: Any, question: str, cap: int = MAX_SUBQUESTIONS
) -> tuple[list[SubQuestion], list[str]]:
    """Validate a model's decomposition into a DAG and order it topologically.

    Repairs, each reported: entries without a question or repeating one (or the main question)
    are dropped; ids are made unique; only the first ``cap`` entries are kept; dependencies on
    unknown ids or on themselves are dropped; where a cycle blocks the order, the earliest-listed
    node of it loses its dependencies on nodes not yet placed.

    Returns:
        The sub-questions in topological order (ties keep the model's order) and the repairs.
    """
    repairs: list[str] = []
    items = raw if isinstance(raw, list) else []
    nodes: list[SubQuestion] = []
    seen_text = {_norm(question)}
    seen_ids: set[str] = set()
    for i, item in enumerate(items):
        text = item.get("question") if isinstance(item, dict) else item
        if not isinstance(text, str) or not text.strip():
            repairs.append(f"dropped entry {i + 1}: no question")
            continue
        text = clip_bytes(" ".join(text.split()), SUBQUESTION_BYTES)
        if _norm(text) in seen_text:
            repairs.append(f"dropped entry {i + 1}: repeats an earlier question")
            continue
        ident = str(item.get("id") if isinstance(item, dict) and item.get("id") else f"s{i + 1}")[
            :20
        ]
        if ident in seen_ids:
            ident = f"{ident}~{i + 1}"
            repairs.append(f"renamed a repeated id to {ident}")
        deps_raw = item.get("depends_on") if isinstance(item, dict) else None
        deps = tuple(str(d)[:20] for d in deps_raw) if isinstance(deps_raw, list) else ()
        seen_text.add(_norm(text))
        seen_ids.add(ident)
        nodes.append(SubQuestion(ident, text, deps))
    if len(nodes) > cap:
        repairs.append(f"kept the first {cap} of {len(nodes)} sub-questions")
        nodes = nodes[:cap]
    ids = {n.id for n in nodes}
    edges: dict[str, list[str]] = {}
    for node in nodes:
        kept = []
        for dep in dict.fromkeys(node.depends_on):
            if dep == node.id:
                repairs.append(f"dropped {node.id}'s dependency on itself")
            elif dep not in ids:
                repairs.append(f"dropped {node.id}'s dependency on unknown {dep!r}")
            else:
                kept.append(dep)
        edges[node.id] = kept
    # Kahn's algorithm, ties in the model's order. When only nodes on cycles are left, the
    # earliest-listed one loses its dependencies on unplaced nodes (the model lists
    # sub-questions in answering order, so its forward dependency is the likely mistake).
    order: list[SubQuestion] = []
    placed: set[str] = set()
    while len(order) < len(nodes):
        ready = next((n for n in nodes if n.id not in placed and set(edges[n.id]) <= placed), None)
        if ready is None:
            ready = next(n for n in nodes if n.id not in placed)
            for dep in [d for d in edges[ready.id] if d not in placed]:
                edges[ready.id].remove(dep)
                repairs.append(f"dropped {ready.id} → {dep}: it closed a cycle")
        order.append(SubQuestion(ready.id, ready.question, tuple(edges[ready.id])))
        placed.add(ready.id)
    return order, repairs


def decompose_messages(
    question: str, passages: Sequence[Passage], limit: int
) -> list[dict[str, str]]:
    """The decomposition prompt: the question and what the first search found."""
    block, _ = render_passages(passages, limit)
    return [
        {"role": "system", "content": DECOMPOSE_SYSTEM},
        {"role": "user", "content": f"Question: {question}\n\nA first search found:\n\n{block}"},
    ]


def solve_messages(
    question: str,
    sub: SubQuestion,
    summary: str,
    passages: Sequence[Passage],
    limit: int,
    summary_bytes: int,
) -> tuple[list[dict[str, str]], dict[str, Passage]]:
    """The prompt of one round, and its passage labels."""
    block, labels = render_passages(passages, limit)
    system = SOLVE_SYSTEM.replace("{words}", str(max(30, summary_bytes // 7)))
    user = (
        f"Main question: {question}\n\nSub-question: {sub.question}\n\n"
        f"Findings so far:\n{summary or '(none yet)'}\n\nPassages:\n\n{block}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], labels


@dataclass(frozen=True)
class WorstPrompts:
    """The largest prompt each call kind of a deep run can have."""

    decompose: list[dict[str, str]]
    solve: list[dict[str, str]]
    synthesis: list[dict[str, str]]


def worst_case_prompts(
    question: str,
    kb_id: str,
    *,
    ask_passages: int,
    deep_passages: int,
    passage_bytes: int,
    summary_bytes: int,
) -> WorstPrompts:
    """Build each call kind's prompt with placeholders at every bound (for pricing)."""
    big = placeholder_passage(kb_id, passage_bytes)
    summary = "x" * summary_bytes
    decompose = decompose_messages(question, [big] * deep_passages, passage_bytes)
    decompose[-1]["content"] += REPAIR_NOTE
    solve, _ = solve_messages(
        question,
        SubQuestion("s", "x" * SUBQUESTION_BYTES, ()),
        summary,
        [big] * deep_passages,
        passage_bytes,
        summary_bytes,
    )
    synthesis, _ = synthesis_messages(question, [big] * ask_passages, summary, passage_bytes)
    return WorstPrompts(decompose, solve, synthesis)


@dataclass(frozen=True)
class DeepBounds:
    """Worst-case EUR of one call of each kind."""

    decompose: Decimal
    solve: Decimal
    synthesis: Decimal


def deep_bounds(
    session: Session, prompts: WorstPrompts, deep_tokens: int, ask_tokens: int
) -> DeepBounds:
    """Price each call kind at its largest prompt and its output ceiling."""
    return DeepBounds(
        decompose=session.worst_case_eur(prompts.decompose, deep_tokens),
        solve=session.worst_case_eur(prompts.solve, deep_tokens),
        synthesis=session.worst_case_eur(prompts.synthesis, ask_tokens),
    )


@dataclass
class DeepOutcome:
    """What the loop produced, before the final synthesis."""

    steps: list[Step] = field(default_factory=list)
    summary: str = ""
    sub_answers: list[tuple[str, str]] = field(default_factory=list)
    cited: list[Passage] = field(default_factory=list)
    recheck: list[Passage] = field(default_factory=list)
    confidence: float | None = None
    stop_reason: str = "no_new_subquestions"
    repairs: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def _fold(summary: str, sub: SubQuestion, answer: str, limit: int) -> str:
    """The summary the code keeps when the model gave none: newest findings win the space."""
    lines = [*summary.splitlines(), f"- {sub.question} {answer}"]
    while len(lines) > 1 and len("\n".join(lines).encode("utf-8")) > limit:
        lines.pop(0)
    return clip_bytes("\n".join(lines), limit)


def _call(
    session: Session, kind: str, messages: list[dict[str, str]], max_tokens: int, room: Decimal
) -> tuple[Completion, CallRecord] | None:
    """One call with ``room`` kept for the synthesis, or ``None`` if the budget says stop."""
    try:
        return session.call(kind, messages, max_tokens, headroom_eur=room)
    except BudgetExceededError:
        return None


def run_loop(
    session: Session,
    question: str,
    round0: list[Passage],
    search: Callable[[str, int], SearchResult],
    to_passages: Callable[[SearchResult], list[Passage]],
    given: dict[tuple[str, int], Passage],
    *,
    bounds: DeepBounds,
    kb_id: str,
    kb_name: str,
    max_rounds: int,
    deep_passages: int,
    ask_passages: int,
    passage_bytes: int,
    summary_bytes: int,
    max_tokens: int,
    confident_above: float,
) -> DeepOutcome:
    """Decompose, then answer sub-questions until a stop condition (see the module doc)."""
    out = DeepOutcome()
    first = round0[:deep_passages]
    messages = decompose_messages(question, first, passage_bytes)
    for passage in first:
        given[(passage.doc_id, passage.chunk)] = passage
    plan_raw: Any = None
    for attempt in range(2):
        made = _call(session, "decompose", messages, max_tokens, bounds.synthesis)
        if made is None:
            out.stop_reason = "budget"
            return out
        completion, record = made
        data = parse_json_object(completion.text)
        usable = data is not None and isinstance(data.get("subquestions"), list)
        out.steps.append(
            Step(
                kind="decompose",
                round=0,
                query=question,
                passages=[p.uri for p in first],
                call=record,
                result=completion.text[:4000] if usable else None,
                note=None if usable else "reply was not usable JSON",
            )
        )
        if usable:
            assert data is not None
            plan_raw = data["subquestions"]
            break
        if attempt == 0:
            messages = [
                messages[0],
                {**messages[1], "content": messages[1]["content"] + REPAIR_NOTE},
            ]
    plan, out.repairs = plan_dag(plan_raw, question)
    if not plan:
        out.stop_reason = "no_new_subquestions"
        return out

    paid_rounds = 0
    skipped = 0
    for number, sub in enumerate(plan, 1):
        if paid_rounds >= max_rounds:
            out.stop_reason = "max_rounds"
            return out
        hits = to_passages(search(sub.question, deep_passages))
        fresh = [p for p in hits if (p.doc_id, p.chunk) not in given]
        if not fresh:
            skipped += 1
            out.steps.append(
                Step(
                    kind="skip",
                    round=number,
                    query=sub.question,
                    passages=[p.uri for p in hits],
                    note="no new evidence: every passage found was already used",
                )
            )
            continue
        messages, labels = solve_messages(
            question, sub, out.summary, hits, passage_bytes, summary_bytes
        )
        for passage in hits:
            given[(passage.doc_id, passage.chunk)] = passage
        made = _call(session, "solve", messages, max_tokens, bounds.synthesis)
        if made is None:
            out.stop_reason = "budget"
            return out
        completion, record = made
        paid_rounds += 1
        data = parse_json_object(completion.text) or {}
        raw_answer = data.get("answer")
        answer, cited, invalid = resolve_citations(
            raw_answer if isinstance(raw_answer, str) else completion.text,
            labels,
            given,
            kb_id,
            kb_name,
        )
        out.invalid += invalid
        out.cited = unique([*out.cited, *cited])
        raw_summary = data.get("summary")
        if isinstance(raw_summary, str) and raw_summary.strip():
            folded, _, bad = resolve_citations(raw_summary, labels, given, kb_id, kb_name)
            out.invalid += bad
            out.summary = clip_bytes(folded, summary_bytes)
        else:
            out.summary = _fold(out.summary, sub, answer, summary_bytes)
        out.sub_answers.append((sub.question, answer))
        out.steps.append(
            Step(
                kind="solve",
                round=number,
                query=sub.question,
                passages=[p.uri for p in hits],
                call=record,
                result=answer,
                note=f"summary {len(out.summary.encode('utf-8'))} bytes",
            )
        )
        probe = f"{question} {strip_citations(answer)[:RECHECK_CHARS]}"
        result = search(probe, ask_passages)
        out.recheck = to_passages(result)
        out.confidence = result.confidence
        out.steps.append(
            Step(
                kind="recheck",
                round=number,
                query=probe,
                passages=[p.uri for p in out.recheck],
                confidence=result.confidence,
            )
        )
        if result.confidence is not None and result.confidence >= confident_above:
            out.stop_reason = "confident"
            return out
    out.stop_reason = "no_evidence" if paid_rounds == 0 and skipped else "no_new_subquestions"
    return out
