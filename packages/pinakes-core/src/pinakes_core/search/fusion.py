"""Fusion: each channel's evidence normalised, weighted for the query at hand, and combined.

Every channel's score becomes *evidence* in [0, 1] that means the same thing for every query
and every KB (issue 9):

- **lexical** (``bm25``, ``entities``): the chunk's BM25 score as a share of the most that query
  could score — the sum over its FTS phrases of ``(k1 + 1) × IDF``, which no chunk reaches (it
  would need every phrase infinitely often in every column). A chunk holding each query word
  once in running text of average length scores about 0.45; one naming them in its title, 0.7.
- **semantic** (``dense``, ``concepts``): the cosine between query and chunk, clipped at 0
  (non-positive cosine is no evidence, DESIGN §5).
- **rank-only** lists (plugin channels such as ``expand`` and ``ppr``): ``(k + 1) / (k + rank)``
  with the RRF constant ``k`` (1.0 for the first, 0.56 for the 50th at k = 60).

A hit's ``score`` is the weighted mean of its evidence over the channels that ran, so it is
comparable across queries and KBs, falls with rank, and has one definition whatever channels run
(bm25 alone: the lexical evidence; dense alone: the cosine). The weights depend on the query's
shape (:func:`query_shape`): identifiers, quoted phrases and code lean on exact matching, a
question in plain words on meaning. Convex combination of normalised scores, rather than RRF,
keeps how strongly each channel matched — RRF keeps only ranks, so a channel's clear winner and
its 50th-best candidate differ by a few percent (Bruch, Gai & Ingber, "An Analysis of Fusion
Functions for Hybrid Retrieval", TOIS 2023, find convex combination ahead of RRF in and out of
domain once scores are normalised).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pinakes_core.index.query import CJK_RUN, quoted_spans, symbol_words

__all__ = [
    "LEXICAL_EXACT",
    "LEXICAL_PROSE",
    "RRF_K",
    "QueryShape",
    "combine",
    "lexical_share",
    "query_shape",
    "rank_evidence",
    "rrf",
]

#: k = 60 as in the RRF paper; it damps the head of each list so no single channel dominates.
RRF_K = 60

#: Share of the lexical evidence in the fused score for a query in plain words. Dense retrieval
#: carries paraphrase (few shared words), and a plain-language query rarely hinges on one exact
#: token; 0.35 was the middle of the flat optimum 0.3-0.4 on the golden set (docs/ranking.md).
LEXICAL_PROSE = 0.35
#: ... and for a query that is all identifiers, quoted phrases or code. An embedding model knows
#: nothing of ``LED-4009`` or ``ledger.retry.max_attempts``: the exact token is the evidence.
#: 0.6-0.8 gave the same golden numbers; the middle is taken.
LEXICAL_EXACT = 0.7
#: Identifier share (of the query's words) at which a query counts as wholly exact.
_EXACT_SHARE = 0.4

_TOKEN = re.compile(r"\S+")
_WORD = re.compile(r"\w+", re.UNICODE)
_PUNCT = "\"'`“”‘’()[]{}<>,;!?"
_JOINED = re.compile(r"\w[._/:]\w|\w_\w|[a-z][A-Z]")
_QUESTION = re.compile(
    r"^\s*(what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|"
    r"should|would|will|has|have|in what|on what|at what)\b",
    re.IGNORECASE,
)
_CODE = re.compile(r"[{}=;$|]|\(\)|--\w|->|=>|::")

# Nouns that name a person or group by their relation to something else (kinship, a role, an
# agent): "X's mother", "the director of Y", "the team that owns Z". A question about one of
# them usually needs the page of the thing related to first.
_ROLE = (
    r"(?:(?:step|grand|great-?grand)?(?:mother|father|parent|son|daughter|child|children)|"
    r"wife|husband|spouse|partner|brother|sister|sibling|uncle|aunt|cousin|nephew|niece|"
    r"\w+-in-law|director|producer|composer|performer|singer|author|writer|creator|founder|"
    r"owner|manager|maintainer|leader|lead|head|chair|member|successor|predecessor|employer|"
    r"publisher|designer|architect|inventor|approver|commander|team|company|band|employer)s?"
)
#: Phrasings of a question whose answer is reached through something else (multi-hop).
_RELATIONAL = {
    # "the service that broke", "the team whose lead", "a film which won", "the city where X
    # was born" (but not "a variable that I can change": a clause about the asker names
    # nothing else)
    "relative clause": re.compile(
        r"\b(?:the|a|an|its|their|his|her|this)\s+(?:[\w'-]+\s+){0,3}?"
        r"(?:that|which|who|whose|whom|where)\s+(?!(?:i|you|we|one)\b)\w",
        re.IGNORECASE,
    ),
    # "the router owned by", "the service involved in", "the tool Jonas built"
    "participle": re.compile(
        r"\b(?:the|a|an)\s+(?:[\w-]+\s+){0,2}?[\w-]+(?:ed|en|wn|lt|un|ade|eld|ought)\s+"
        r"(?:by|in|from|after|during|under|through)\s",
        re.IGNORECASE,
    ),
    # "Lothair II's mother", "Chloé Dubois's team"
    "possessive": re.compile(rf"[\w)]['’]s?\s+(?:[\w-]+\s+)?{_ROLE}\b", re.IGNORECASE),
    # "the director of film X", "the on-call lead for the ledger"
    "role of": re.compile(
        rf"\b(?:(?:the|its|their)\s+(?:[\w-]+\s+)?|of\s+){_ROLE}\s+(?:of|for|behind)\s",
        re.IGNORECASE,
    ),
    # "..., and who does that person report to?"
    "two questions": re.compile(
        r"[,;]\s*(?:and\s+)?(?:who|whom|what|which|when|where|why|how|at what|in what)\b",
        re.IGNORECASE,
    ),
    # "which came out first, A or B?", "are A and B both ...", "born first out of A and B".
    # The comparative-and-pair part is anchored at the start: unanchored, each start position
    # rescanned the rest of the query (a 100,000-character query took minutes).
    "comparison": re.compile(
        r"\b(?:both|either|neither)\b|\bsame\s+\w+|"
        r"^(?=[\s\S]*\b(?:first|earlier|later|older|younger|longer|shorter|bigger|smaller|more|"
        r"fewer|less)\b)[\s\S]*\w\s+(?:or|and)\s+\w",
        re.IGNORECASE,
    ),
}


@dataclass(frozen=True)
class QueryShape:
    """What the words of a query say about how to match it.

    Attributes:
        identifiers: tokens that are identifiers: a letter and a digit together (``E-4012``,
            ``v2``), words joined by ``. _ / :`` (``ledger.retry.max_attempts``, ``a/b``),
            camelCase, ``--flags`` and ``$variables``. Plain hyphenated words (``on-call``) and
            bare numbers (``2024``) are not.
        quoted: phrases the user put in quotes or backticks.
        code: whether the query contains code punctuation (``{}``, ``=``, ``|``, ``->`` …).
        words: number of words.
        exact_share: share of the query's words inside identifiers, quoted phrases or code,
            in [0, 1].
        question: whether it reads as a natural-language question.
        relations: the multi-hop phrasings found (``"relative clause"``, ``"participle"``,
            ``"possessive"``, ``"role of"``, ``"two questions"``, ``"comparison"``): the answer
            is reached through something else the query names.
        cjk_share: share of the query's word characters written in Chinese, Japanese or Korean
            script, in [0, 1].
    """

    identifiers: tuple[str, ...]
    quoted: tuple[str, ...]
    code: bool
    words: int
    exact_share: float
    question: bool
    relations: tuple[str, ...] = ()
    cjk_share: float = 0.0


def _identifier(token: str) -> bool:
    word = token.strip(_PUNCT).rstrip(".:")
    if len(word) < 2:
        return False
    digit = any(ch.isdigit() for ch in word)
    alpha = any(ch.isalpha() for ch in word)
    return (digit and alpha) or bool(_JOINED.search(word)) or word.startswith(("--", "$"))


#: Words a clause needs before ", and who…" to be a question of its own: a short fronted phrase
#: ("In Nu, how do I…", "On Windows, where…") introduces one question, it does not ask another.
_FIRST_QUESTION_WORDS = 4


def _relation(name: str, pattern: re.Pattern[str], query: str) -> bool:
    match = pattern.search(query)
    if match is None:
        return False
    if name == "two questions":
        return len(_WORD.findall(query[: match.start()])) >= _FIRST_QUESTION_WORDS
    return True


def query_shape(query: str) -> QueryShape:
    """Describe the query's shape (see :class:`QueryShape`); never raises."""
    words = _WORD.findall(query)
    quoted = tuple(quoted_spans(query))
    identifiers = tuple(
        t.strip(_PUNCT).rstrip(".:") for t in _TOKEN.findall(query) if _identifier(t)
    )
    code = bool(_CODE.search(query))
    exact_words = len(_WORD.findall(" ".join([*identifiers, *quoted])))
    if code:
        exact_words = max(exact_words, len(words) // 2)
    # A query of operators alone (``=~``) is all exact: only BM25 can match it.
    share = min(1.0, exact_words / len(words)) if words else float(bool(symbol_words(query)))
    letters = sum(map(len, words))
    cjk = sum(len(run) for run in CJK_RUN.findall(query))
    return QueryShape(
        identifiers=identifiers,
        quoted=quoted,
        code=code,
        words=len(words),
        exact_share=round(share, 4),
        question=bool(_QUESTION.match(query)) and not identifiers and len(words) >= 4,
        relations=tuple(
            name for name, pattern in _RELATIONAL.items() if _relation(name, pattern, query)
        ),
        cjk_share=round(min(1.0, cjk / letters), 4) if letters else 0.0,
    )


def lexical_share(shape: QueryShape) -> float:
    """Share of the lexical evidence in the fused score for a query of this shape.

    It rises from :data:`LEXICAL_PROSE` to :data:`LEXICAL_EXACT` as the exact part of the query
    (identifiers, quoted phrases, code) grows, or its part in Chinese, Japanese or Korean script:
    the default embedding model was trained on English, and on those scripts its cosine follows
    the Latin words mixed in more than the meaning, while their character bigrams
    (:func:`~pinakes_core.index.query.split_cjk`) match exactly (docs/ranking.md).
    """
    ramp = min(1.0, max(shape.exact_share, shape.cjk_share) / _EXACT_SHARE)
    return round(LEXICAL_PROSE + (LEXICAL_EXACT - LEXICAL_PROSE) * ramp, 4)


def rank_evidence(rank: int, k: int = RRF_K) -> float:
    """Evidence of a list position for a channel without a calibrated score: 1.0 at rank 1."""
    return (k + 1) / (k + rank)


def combine(
    evidence: Mapping[str, Mapping[int, float]],
    weights: Mapping[str, float],
    candidates: Iterable[int] | None = None,
) -> list[tuple[int, float]]:
    """Fuse per-channel evidence into one ranking by the weighted mean ``Σ w·e / Σ w``.

    Args:
        evidence: per channel, evidence in [0, 1] for the chunks it has any for (missing = 0).
        weights: per channel weight (channels absent here weigh 0).
        candidates: the chunks to score (default: every chunk with some evidence).

    Returns:
        ``(chunk_id, score)`` pairs sorted by descending score, ties broken by the smaller id,
        so the output does not depend on the order the channels are given in.
    """
    names = sorted(n for n in evidence if weights.get(n, 0.0) > 0)
    total = math.fsum(weights[n] for n in names)
    if total <= 0:
        return []
    pool = set(candidates) if candidates is not None else set().union(*evidence.values())
    scores = {
        c: math.fsum(weights[n] * evidence[n].get(c, 0.0) for n in names) / total for c in pool
    }
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def rrf(
    lists: Mapping[str, Sequence[int]], k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[int, float]]:
    """Fuse ranked lists of ids into one ranking by Σ w / (k + rank), rank counted from 1.

    Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009). ``weights`` maps a list's
    name to its weight (default 1.0 each: plain RRF). The result is sorted by descending score,
    ties broken by the smaller id so the output does not depend on the order the lists are
    given in. (Search ranks by :func:`combine`; RRF remains for lists without scores.)
    """
    parts: dict[int, list[float]] = {}
    for name, ranked in lists.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, item in enumerate(ranked, 1):
            parts.setdefault(item, []).append(weight / (k + rank))
    # fsum is correctly rounded whatever the order of its terms, so exact ties stay exact and
    # fall to the id tie-break instead of to the order the channels ran in.
    scores = {item: math.fsum(terms) for item, terms in parts.items()}
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
