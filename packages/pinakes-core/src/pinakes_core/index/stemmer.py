"""The words SQLite's FTS5 stores, made in Python: ``porter unicode61 remove_diacritics 2``.

The SQLite store's full-text table (``chunks_fts``, index/tables.py) reads its text through
that tokenizer: ``unicode61`` splits it into tokens, lower-cases them and folds diacritics away,
then ``porter`` stems each token. :func:`terms` gives, token for token, what that tokenizer
gives for a text, so that another backend can hold the same words: PostgreSQL's text search
has no such tokenizer (its Snowball ``porter`` stems ``is`` to ``i`` where FTS5 leaves words
under three bytes as they are; docs/scaling.md), so the PostgreSQL store indexes and queries
the words of :func:`terms` through its ``simple`` configuration (issue 38).

The rules, as SQLite's ``fts5_tokenize.c`` and ``fts5_unicode2.c`` apply them (facts of that
implementation; this code is ours):

* **Tokens** (``unicode61``, default categories ``L* N* Co``): a token starts at a letter, a
  number or a private-use character and runs over those and over the 25 combining diacritics
  that Latin letters decompose into (:data:`DIACRITICS`, U+0300 … U+0331); anything else,
  the underscore included, separates tokens.
* **Folding**: ASCII letters are lower-cased; a character of the Basic Multilingual Plane is
  case-folded by Unicode's simple case folding (``ẞ`` → ``ß``, never ``ss``), and then,
  ``remove_diacritics 2``, a Latin letter that decomposes into an ASCII letter and
  diacritics becomes that letter (``é`` → ``e``, ``ǖ`` → ``u``); the diacritics themselves
  are dropped. Beyond that plane only the Deseret capitals are folded.
* **Stemming** (``porter``, M. F. Porter, "An algorithm for suffix stripping", 1980): on the
  token's UTF-8 bytes; a token of under 3 or over 64 bytes is left as it is. Bytes other than
  ``a e i o u`` (and ``y`` after a consonant) are consonants, so a non-ASCII character is one.
  SQLite's version differs from the paper in small ways kept here: a suffix is matched only
  where the word is longer than it; step 1b's ``*v*`` test counts ``y`` as a vowel anywhere
  but first; step 2 takes ``bli`` → ``ble`` and ``logi`` → ``log`` (Porter's later
  revisions) where the paper has ``abli`` → ``able``.

The Unicode tables start from Python's (:mod:`unicodedata`); where SQLite's own, older
tables read a character otherwise (an emoji of Unicode 7 or later, unassigned to SQLite and
so a word character there; a letter given a case since), SQLite's reading is taken from
``_unicode61.py``, which ``benchmarks/fts5_unicode.py`` measures over every code point.
tests/core/test_stemmer.py compares every word of the bundled corpora and the golden KB, and
every code point, with what SQLite stores.

Cost: about 1.5 µs a token with the runs' words kept (:data:`MAX_CACHED`), 1.4 times a bare
regular-expression split into words of the same text (nushell's docs, 284k tokens, loaded
machine).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from pinakes_core.index._unicode61 import FOLDED, SEPARATORS, TOKEN_CHARS

__all__ = [
    "DIACRITICS",
    "MAX_CACHED",
    "fold",
    "python_fold",
    "python_token_start",
    "stem",
    "term",
    "terms",
]

#: The combining marks that continue a token and are dropped from it (FTS5's "diacritic
#: modifier" characters: the marks of the canonical decompositions of Latin letters).
DIACRITICS = (
    "\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030f\u0311"
    "\u031b\u0323\u0324\u0325\u0326\u0327\u0328\u032d\u032e\u0330\u0331"
)
#: A token's first character by Python's tables: a letter or a number (``unicode61``'s
#: default categories ``L* N* Co``; private-use characters come with :data:`TOKEN_CHARS`).
_PY_START = re.compile(r"[^\W_]")
#: ... and as SQLite reads it: Python's, less its :data:`SEPARATORS`, plus its
#: :data:`TOKEN_CHARS` (measured by benchmarks/fts5_unicode.py).
_START = (
    (f"(?![{SEPARATORS}])" if SEPARATORS else "")
    + r"[^\W_]"
    + (f"|[{TOKEN_CHARS}]" if TOKEN_CHARS else "")
)
#: A token: a token character, then those and the diacritics.
_TOKEN = re.compile(f"(?:{_START})(?:{_START}|[{DIACRITICS}])*")
_DROPPED = str.maketrans("", "", DIACRITICS)
#: What can hold a token: a run of ASCII letters and digits and of non-ASCII characters (the
#: other ASCII characters always separate tokens).
_RUN = re.compile("[0-9A-Za-z\x80-\U0010ffff]+")
#: Runs whose terms are kept (:func:`terms`); past this many distinct ones the memo starts
#: again (a long sync over text of many one-off tokens: hashes, ids). With runs of at most
#: :data:`MAX_CACHED_RUN` characters the memo stays under ~25 MB in a long-lived process.
MAX_CACHED = 100_000
#: Longer runs are tokenised each time, not kept: one-off text (hex dumps, base64) that would
#: fill the memo, and past 64 bytes a token is not stemmed anyway.
MAX_CACHED_RUN = 64
_memo: dict[str, tuple[str, ...]] = {}


def python_token_start(c: str) -> bool:
    """Whether character ``c`` starts a token by Python's Unicode tables (a letter or number)."""
    return _PY_START.match(c) is not None


def python_fold(c: str) -> str:
    """Character ``c`` as ``unicode61`` folds it (``remove_diacritics 2``), by Python's tables."""
    code = ord(c)
    if code < 128:
        return c.lower()
    if code >= 0x10000:
        # Only the Deseret capitals are folded beyond the Basic Multilingual Plane.
        return chr(code + 40) if 0x10400 <= code < 0x10428 else c
    folded = c.casefold()
    if len(folded) != 1:
        # A full folding of several characters (ß → ss): the simple one, where there is one.
        folded = c.lower()
        if len(folded) != 1:
            folded = c
    # remove_diacritics: a letter that is an ASCII letter plus diacritics is that letter,
    # lower-cased (SQLite's table maps ranges of both cases: İ, which it does not case-fold,
    # is i).
    parts = unicodedata.normalize("NFD", folded)
    ascii_base = len(parts) > 1 and parts[0].isascii() and parts[0].isalpha()
    if ascii_base and all(p in DIACRITICS for p in parts[1:]):
        return parts[0].lower()
    return folded


def _fold_char(c: str) -> str:
    """Character ``c`` as SQLite folds it: Python's reading, or SQLite's where they differ."""
    return FOLDED.get(c) or python_fold(c)


_FOLDED: dict[str, str] = {}


def fold(token: str) -> str:
    """``token`` lower-cased and without diacritics, as FTS5's ``unicode61`` stores it."""
    if token.isascii():
        return token.lower()
    out = []
    for c in token.translate(_DROPPED):
        f = _FOLDED.get(c)
        if f is None:
            f = _FOLDED[c] = _fold_char(c)
        out.append(f)
    return "".join(out)


# -- Porter, as FTS5's ``porter`` runs it (on bytes; see the module docstring) ---------------


def _vowel(c: str, y_is_vowel: bool) -> bool:
    return c in "aeiou" or (y_is_vowel and c == "y")


def _gobble_vc(word: str, start: int, end: int, prev_consonant: bool) -> int:
    """After one vowel run then one consonant in ``word[start:end]``: the index after it, or 0."""
    consonant = prev_consonant
    i = start
    while i < end:
        consonant = not _vowel(word[i], consonant)
        if not consonant:
            break
        i += 1
    i += 1
    while i < end:
        consonant = not _vowel(word[i], consonant)
        if consonant:
            return i + 1
        i += 1
    return 0


def _m_gt0(word: str, n: int) -> bool:
    return _gobble_vc(word, 0, n, False) != 0


def _m_gt1(word: str, n: int) -> bool:
    first = _gobble_vc(word, 0, n, False)
    return first != 0 and _gobble_vc(word, first, n, True) != 0


def _m_eq1(word: str, n: int) -> bool:
    first = _gobble_vc(word, 0, n, False)
    return first != 0 and _gobble_vc(word, first, n, True) == 0


def _o_star(word: str, n: int) -> bool:
    """``*o``: the stem ends consonant-vowel-consonant, the last not ``w``, ``x`` or ``y``."""
    if word[n - 1] in "wxy":
        return False
    mask = 0
    consonant = False
    for i in range(n):
        consonant = not _vowel(word[i], consonant)
        mask = (mask << 1) | consonant
    return (mask & 0b111) == 0b101


def _m_gt1_s_or_t(word: str, n: int) -> bool:
    return word[n - 1] in "st" and _m_gt1(word, n)


def _has_vowel(word: str, n: int) -> bool:
    """``*v*``, as FTS5 tests it: ``y`` is a vowel anywhere but first."""
    return any(_vowel(word[i], i > 0) for i in range(n))


_Rule = tuple[str, "Callable[[str, int], bool] | None", str]

_STEP2: tuple[_Rule, ...] = (
    ("ational", _m_gt0, "ate"),
    ("tional", _m_gt0, "tion"),
    ("enci", _m_gt0, "ence"),
    ("anci", _m_gt0, "ance"),
    ("izer", _m_gt0, "ize"),
    ("logi", _m_gt0, "log"),
    ("bli", _m_gt0, "ble"),
    ("alli", _m_gt0, "al"),
    ("entli", _m_gt0, "ent"),
    ("eli", _m_gt0, "e"),
    ("ousli", _m_gt0, "ous"),
    ("ization", _m_gt0, "ize"),
    ("ation", _m_gt0, "ate"),
    ("ator", _m_gt0, "ate"),
    ("alism", _m_gt0, "al"),
    ("iveness", _m_gt0, "ive"),
    ("fulness", _m_gt0, "ful"),
    ("ousness", _m_gt0, "ous"),
    ("aliti", _m_gt0, "al"),
    ("iviti", _m_gt0, "ive"),
    ("biliti", _m_gt0, "ble"),
)
_STEP3: tuple[_Rule, ...] = (
    ("ical", _m_gt0, "ic"),
    ("ness", _m_gt0, ""),
    ("icate", _m_gt0, "ic"),
    ("iciti", _m_gt0, "ic"),
    ("ful", _m_gt0, ""),
    ("ative", _m_gt0, ""),
    ("alize", _m_gt0, "al"),
)
_STEP4: tuple[_Rule, ...] = (
    ("al", _m_gt1, ""),
    ("ance", _m_gt1, ""),
    ("ence", _m_gt1, ""),
    ("er", _m_gt1, ""),
    ("ic", _m_gt1, ""),
    ("able", _m_gt1, ""),
    ("ible", _m_gt1, ""),
    ("ant", _m_gt1, ""),
    ("ement", _m_gt1, ""),
    ("ment", _m_gt1, ""),
    ("ent", _m_gt1, ""),
    ("ion", _m_gt1_s_or_t, ""),
    ("ou", _m_gt1, ""),
    ("ism", _m_gt1, ""),
    ("ate", _m_gt1, ""),
    ("iti", _m_gt1, ""),
    ("ous", _m_gt1, ""),
    ("ive", _m_gt1, ""),
    ("ize", _m_gt1, ""),
)
_STEP1B2 = (("at", "ate"), ("bl", "ble"), ("iz", "ize"))


def _step(word: str, rules: tuple[_Rule, ...]) -> str:
    """The first rule whose suffix ends ``word`` (shorter than it) applies, if its test holds."""
    for suffix, test, output in rules:
        if len(word) > len(suffix) and word.endswith(suffix):
            n = len(word) - len(suffix)
            if test is None or test(word, n):
                return word[:n] + output
            return word
    return word


def _porter(w: str) -> str:
    """FTS5's Porter steps on ``w``: one character per UTF-8 byte, 3 to 64 of them."""
    # Step 1a.
    if w[-1] == "s":
        if w[-2] == "e":
            # sses → ss, ies → i; other es only lose the s.
            sses_ies = (len(w) > 4 and w[-4:-2] == "ss") or (len(w) > 3 and w[-3] == "i")
            w = w[:-2] if sses_ies else w[:-1]
        elif w[-2] != "s":
            w = w[:-1]
    # Step 1b.
    stripped = False
    if len(w) > 3 and w.endswith("eed"):
        if _m_gt0(w, len(w) - 3):
            w = w[:-1]
    elif len(w) > 2 and w.endswith("ed"):
        if _has_vowel(w, len(w) - 2):
            w, stripped = w[:-2], True
    elif len(w) > 3 and w.endswith("ing") and _has_vowel(w, len(w) - 3):
        w, stripped = w[:-3], True
    if stripped:
        for suffix, output in _STEP1B2:
            if len(w) > 2 and w.endswith(suffix):
                w = w[:-2] + output
                break
        else:
            last = w[-1]
            if len(w) > 1 and not _vowel(last, False) and last not in "lsz" and last == w[-2]:
                w = w[:-1]
            elif _m_eq1(w, len(w)) and _o_star(w, len(w)):
                w += "e"
    # Step 1c.
    if w[-1] == "y" and _has_vowel(w, len(w) - 1):
        w = w[:-1] + "i"
    # Steps 2 to 4.
    w = _step(_step(_step(w, _STEP2), _STEP3), _STEP4)
    # Step 5a.
    if w[-1] == "e" and (
        _m_gt1(w, len(w) - 1) or (_m_eq1(w, len(w) - 1) and not _o_star(w, len(w) - 1))
    ):
        w = w[:-1]
    # Step 5b.
    if len(w) > 1 and w.endswith("ll") and _m_gt1(w, len(w) - 1):
        w = w[:-1]
    return w


def stem(token: str) -> str:
    """``token`` (already folded) stemmed as FTS5's ``porter`` stems it.

    A token of under 3 or over 64 UTF-8 bytes is returned as it is.
    """
    raw = token.encode("utf-8")
    if not 3 <= len(raw) <= 64:
        return token
    # One character per byte: a non-ASCII character's bytes are consonants, as in SQLite.
    return _porter(raw.decode("latin-1")).encode("latin-1").decode("utf-8", "replace")


def term(token: str) -> str:
    """The word FTS5 stores for one token (a run of token characters): folded, then stemmed."""
    return stem(fold(token))


def terms(text: str) -> list[str]:
    """The words FTS5's ``porter unicode61 remove_diacritics 2`` stores for ``text``, in order.

    Never raises; a text without letters or numbers gives ``[]``. Text is cut first at ASCII
    punctuation and spaces (which always separate), and each run's words are kept (at most
    :data:`MAX_CACHED` runs): a run of ASCII letters and digits is one token, and only a run
    holding other characters goes through the full tokenizer (:data:`_TOKEN`).
    """
    memo = _memo
    out: list[str] = []
    for run in _RUN.findall(text):
        found = memo.get(run)
        if found is None:
            if run.isascii():
                found = (stem(run.lower()),)
            else:
                found = tuple(term(t) for t in _TOKEN.findall(run))
            if len(run) <= MAX_CACHED_RUN:
                if len(memo) >= MAX_CACHED:
                    memo.clear()
                memo[run] = found
        out.extend(found)
    return out
