"""Safe FTS5 query building (DESIGN §5, §13).

User text is never FTS5 syntax: it is split into words, every word becomes a quoted string, and
the words are OR-ed so that a natural-language question finds the chunk holding most of its
words instead of requiring all of them. Identifiers such as ``E-4012`` or
``ledger.retry.max_attempts`` also become a quoted phrase, which FTS5 matches as the adjacent
token sequence, so exact identifiers rank first.

Chinese and Japanese are written without spaces between words, and FTS5's ``unicode61``
tokenizer would index a whole run of Han or Kana characters between two punctuation marks as
one token, which no query matches unless it repeats the run exactly. :func:`split_cjk` writes
such runs (and Hangul, whose space-separated words carry particles) as overlapping character
bigrams, the classic way to index these scripts without a dictionary (Lucene's CJK analyzer does
the same); the index and every query go through it, so ``项目计划`` is found inside
``我们的项目计划很好``.

A span the user put in double quotes (``"error budget"`` or ``“error budget”``) is a phrase:
:func:`quoted_phrases` writes it as one FTS5 phrase of its words in order, which matches only
where they stand together, ahead of the query's single words; retrieval then ranks the
candidates holding every quoted phrase first (:func:`pinakes_core.search.retrieval.lift_quoted`).

Operators are not words: the tokenizer drops ``=~``, ``|>`` or ``&&`` whole, so a question about
one found nothing. :func:`symbol_words` writes an operator that stands alone (between spaces or
backticks, ``a =~ b``, `` `?.` ``) as one index word, ``zzsym`` and its characters' hex codes,
in the chunk's ``idents`` column at sync and in the query, so ``pnk search "=~"`` finds the
pages that use it; ``C++`` or ``foo->bar`` name no operator of their own.
"""

from __future__ import annotations

import re

__all__ = [
    "CJK_RUN",
    "QUOTED",
    "STOPWORDS",
    "build_fts_query",
    "fts_phrases",
    "query_terms",
    "quoted_phrases",
    "quoted_spans",
    "split_cjk",
    "symbol_words",
    "words",
]

_WORD = re.compile(r"\w+", re.UNICODE)
#: Runs of characters of the scripts written without spaces between words: Hiragana, Katakana
#: (and its phonetic extensions and half-width forms, but not the ・ and ゠ punctuation), CJK
#: ideographs (with 々 〆 〇, extension A, the compatibility block and the supplementary
#: planes), and Hangul syllables and jamo.
CJK_RUN = re.compile(
    "[\u1100-\u11ff\u3005-\u3007\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f]+"
)
#: A span in straight or curly double quotes, or in backticks (the text is in the one group set).
QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|`([^`]+)`")
#: The spans among them that are phrases: double quotes only. Backticks mark code, whose words
#: a question often quotes with other spacing or a part left out (``echo .. | ls``); the query's
#: shape counts them as exact words (:func:`pinakes_core.search.fusion.query_shape`), no more.
_PHRASE_QUOTE = ('"', "“")
#: A quoted span longer than this is pasted text, not a phrase to match word for word.
_MAX_PHRASE_CHARS = 200
_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\uac00-\ud7af]")
_MAX_TERMS = 32
#: ... plus this many CJK bigrams (a question of about 60 characters), which a question in
#: those scripts is made of.
_MAX_CJK_TERMS = 64
#: An operator as a token of its own: two to four ASCII punctuation or symbol characters (not
#: the quotes, backticks and underscores around or inside words).
_OPERATOR = re.compile(r"[!#$%&()*+,\-./:;<=>?@\[\\\]^{|}~]{2,4}")
#: Punctuation a sentence sticks to an operator ("is it =~?", "(see &&)."): also read without it.
_STUCK = "(),.:;?!"
#: Brackets and separators without an operator character are punctuation (``),``, ``).``).
_BRACKETS = re.compile(r"[()\[\]{},;.:]*[()\[\]{},;][()\[\]{},;.:]*")
#: What stands between tokens: white space, and the quotes and backticks code is written in.
_TOKEN_GAP = re.compile(r"[\s`'\"“”‘’]+")
#: Markdown's own structure written as a token: rules and table separators (``---``, ``:--``,
#: ``|:-:|``, ``:-``), fences and strike-through (``~~~``), comments (``<!--``, ``-->``), math
#: and Obsidian comment fences (``$$``, ``%%``), and any one character repeated three times or
#: more but the operators made so (``===``, ``...``, ``<<<``, ``>>>``).
_STRUCTURE = re.compile(r"[-:|]{3,}|:-|-:|~+|<!--|-->|\$\$|%%|([^=.<>])\1{2,}")
#: A line's leading heading, quote and list markers (``##``, ``>>``, ``-``) before its text.
_MARKER = re.compile(r"#+|>+|[-*+]")
#: The prefix of an operator's index word; the rest is the hex code of each character.
SYMBOL_PREFIX = "zzsym"
#: At most this many distinct operators are indexed per chunk (a page of ASCII art has many),
#: and at most :data:`_MAX_QUERY_SYMBOLS` of a query's take its phrase slots before its words.
_MAX_SYMBOLS = 32
_MAX_QUERY_SYMBOLS = 8


def _operators(token: str) -> list[str]:
    """The operators ``token`` spells: itself, and itself without the punctuation stuck to it."""
    bare = token.lstrip("(").rstrip(_STUCK)
    return [
        t
        for t in dict.fromkeys((token, bare))
        if _OPERATOR.fullmatch(t) and not _STRUCTURE.fullmatch(t) and not _BRACKETS.fullmatch(t)
    ]


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


def _bigrams(match: re.Match[str]) -> str:
    run = match.group()
    return " " + " ".join(run[i : i + 2] for i in range(max(len(run) - 1, 1))) + " "


def split_cjk(text: str) -> str:
    """``text`` with every run of CJK characters written as its overlapping bigrams.

    ``"用Python写项目计划"`` becomes ``" 用 Python 写 项目 目计 计划 "``: a run is cut from the
    letters around it, a one-character run stays one word. Text without CJK is returned as it
    is, and applying it twice gives the same words as once.
    """
    return CJK_RUN.sub(_bigrams, text) if CJK_RUN.search(text) else text


def words(text: str) -> list[str]:
    """The words of ``text`` as the index sees them (:func:`split_cjk`), case kept."""
    return _WORD.findall(split_cjk(text))


def query_terms(text: str) -> list[str]:
    """Return the distinct lower-cased content words of ``text``.

    Stopwords are dropped unless nothing else is left (``"to be or not to be"``), and so is a
    lone Chinese or Japanese character between other words: mostly a particle or a verb such as 和 "and" or
    用 "use" (``"Promise.all和Promise.race"``). A query of one (``"猫"``) keeps it, but it
    matches only where the character stands alone (between punctuation or Latin letters): the
    index holds longer runs as bigrams only, since indexing their single characters too
    lengthens every CJK row and cost ranking (docs/ranking.md).
    """
    found = [w.lower() for w in words(text)]
    content = [w for w in found if w not in STOPWORDS and not _lone_cjk(w)]
    return list(dict.fromkeys(content or found))


def _lone_cjk(word: str) -> bool:
    # Han and Kana only: Korean separates words with spaces, and a one-syllable word there
    # (집 "house") is a noun as often as not.
    return len(word) == 1 and CJK_RUN.match(word) is not None and not _HANGUL.match(word)


def symbol_words(text: str) -> list[str]:
    """The index words of the operators standing alone in ``text`` (see the module docstring).

    A line's leading heading, quote and list markers (``## Title``, ``>> quoted``) followed by
    text, brackets and separators alone (``),``) and Markdown's structural runs
    (:data:`_STRUCTURE`) are not operators; punctuation stuck to one (``=~?``) is read both
    with and without. The same function reads a chunk at sync and a query, so both sides spell
    an operator alike; at most :data:`_MAX_SYMBOLS`, no repeats.
    """
    found: dict[str, None] = {}
    for line in text.split("\n"):
        tokens = [t for t in _TOKEN_GAP.split(line) if t]
        start = 0
        while start < len(tokens) - 1 and _MARKER.fullmatch(tokens[start]):
            start += 1
        for token in tokens[start:]:
            for operator in _operators(token):
                found.setdefault(SYMBOL_PREFIX + operator.encode("ascii").hex(), None)
                if len(found) == _MAX_SYMBOLS:
                    return list(found)
    return list(found)


def quoted_spans(text: str) -> list[str]:
    """The spans of ``text`` the user put in quotes or backticks (:data:`QUOTED`), in order."""
    return [next(g for g in m.groups() if g) for m in QUOTED.finditer(text)]


def quoted_phrases(text: str) -> list[str]:
    """The FTS5 phrases of the double-quoted spans of ``text`` that hold two words or more.

    ``'"error budget" policy'`` gives ``['"error budget"']``: the span's words, lower-cased, in
    order, which FTS5 (and the tantivy index) match only as adjacent tokens. A span of one word
    is that word's phrase already; a span over 200 characters (pasted text) is not a phrase.
    No repeats.
    """
    found: dict[str, None] = {}
    for match in QUOTED.finditer(text):
        if not match.group().startswith(_PHRASE_QUOTE):
            continue
        span = next(g for g in match.groups() if g)
        pieces = _WORD.findall(split_cjk(span))
        if len(pieces) > 1 and len(span) <= _MAX_PHRASE_CHARS:
            found.setdefault('"' + " ".join(p.lower() for p in pieces) + '"', None)
    return list(found)


def fts_phrases(text: str) -> list[str]:
    """Return the phrases :func:`build_fts_query` ORs together, each a double-quoted string.

    Quoted spans of several words come first, each one phrase (:func:`quoted_phrases`); then
    identifier-like tokens (``E-4012``) become one phrase of their words, then every content
    word is a phrase of its own; at most 32, plus at most 64 CJK bigrams, no repeats. An
    operator standing alone (``=~``) is the phrase of its index word (:func:`symbol_words`).
    """
    parts = quoted_phrases(text)
    parts += [f'"{word}"' for word in symbol_words(text)[:_MAX_QUERY_SYMBOLS]]
    for raw in split_cjk(text).split():
        pieces = _WORD.findall(raw)
        if len(pieces) > 1 and len(raw) <= 64:
            parts.append('"' + " ".join(p.lower() for p in pieces) + '"')
    parts.extend(f'"{term}"' for term in query_terms(text))
    kept: list[str] = []
    counts = [0, 0]  # other phrases, CJK ones
    for part in dict.fromkeys(parts):
        cjk = bool(CJK_RUN.search(part))
        if counts[cjk] < (_MAX_CJK_TERMS if cjk else _MAX_TERMS):
            kept.append(part)
            counts[cjk] += 1
    return kept


def build_fts_query(text: str) -> str | None:
    """Turn arbitrary user text into a safe FTS5 MATCH expression, or ``None`` if it has no words.

    Never raises, whatever the input: every term is a double-quoted string of word characters,
    so quotes, ``NEAR(``, ``*``, ``-``, ``^`` and column filters in the input are inert.
    """
    parts = fts_phrases(text)
    return " OR ".join(parts) if parts else None
