"""Safe FTS5 query building (DESIGN §5, §13).

User text is never FTS5 syntax: it is split into words, every word becomes a quoted string, and
the words are OR-ed so that a natural-language question finds the chunk holding most of its
words instead of requiring all of them. Identifiers such as ``E-4012`` or
``ledger.retry.max_attempts`` also become a quoted phrase, which FTS5 matches as the adjacent
token sequence, so exact identifiers rank first.
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "build_fts_query", "fts_phrases", "query_terms"]

_WORD = re.compile(r"\w+", re.UNICODE)
_MAX_TERMS = 32

STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "tell",
        "know",
        "find",
        "show",
        "get",
        "got",
        "use",
        "using",
        "used",
        "please",
    ]
)


def query_terms(text: str) -> list[str]:
    """Return the distinct lower-cased content words of ``text``.

    Stopwords are dropped unless nothing else is left (``"to be or not to be"``).
    """
    words = [w.lower() for w in _WORD.findall(text)]
    content = [w for w in words if w not in STOPWORDS]
    return list(dict.fromkeys(content or words))


def fts_phrases(text: str) -> list[str]:
    """Return the phrases :func:`build_fts_query` ORs together, each a double-quoted string.

    Identifier-like tokens (``E-4012``) become one phrase of their words, then every content
    word is a phrase of its own; at most 32, no repeats.
    """
    parts: list[str] = []
    for raw in text.split():
        pieces = _WORD.findall(raw)
        if len(pieces) > 1 and len(raw) <= 64:
            parts.append('"' + " ".join(p.lower() for p in pieces) + '"')
    parts.extend(f'"{term}"' for term in query_terms(text))
    return list(dict.fromkeys(parts))[:_MAX_TERMS]


def build_fts_query(text: str) -> str | None:
    """Turn arbitrary user text into a safe FTS5 MATCH expression, or ``None`` if it has no words.

    Never raises, whatever the input: every term is a double-quoted string of word characters,
    so quotes, ``NEAR(``, ``*``, ``-``, ``^`` and column filters in the input are inert.
    """
    parts = fts_phrases(text)
    return " OR ".join(parts) if parts else None
