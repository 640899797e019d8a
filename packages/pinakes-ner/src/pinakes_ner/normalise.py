"""Entity keys: the normalised surface form that names an entity node.

Case, Unicode form, punctuation, a leading article and a trailing possessive do not change
which thing a name refers to: "The Raft paper", "the raft paper" and "Raft paper's" share the
key ``raft paper``. Containment between keys ("obama" in "barack obama") is decided on whole
words, so "york" is inside "new york" but "ray" is not inside "raft".
"""

from __future__ import annotations

import re
import unicodedata

from pinakes_core.index.query import STOPWORDS

__all__ = ["MAX_WORDS", "contains", "entity_key"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_ARTICLES = ("the", "a", "an")
#: Longer spans are recogniser noise (a run-on sentence tagged as one work of art).
MAX_WORDS = 8


def entity_key(surface: str) -> str | None:
    """Return the key of a surface form, or ``None`` when it names nothing useful.

    Nothing useful: no letter at all ("1990", "╰───"), a single character, only stopwords, or
    more than :data:`MAX_WORDS` words.
    """
    text = unicodedata.normalize("NFKC", surface).replace("’", "'").casefold()
    text = re.sub(r"'s?$", "", text.strip())
    words = _WORD.findall(text)
    while words and words[0] in _ARTICLES:
        words = words[1:]
    if not words or len(words) > MAX_WORDS:
        return None
    key = " ".join(words)
    if len(key) < 2 or not any(c.isalpha() for c in key):
        return None
    if all(w in STOPWORDS for w in words):
        return None
    return key


def contains(short: str, long: str) -> bool:
    """Whether key ``short`` occurs in key ``long`` as a run of whole words (and is shorter)."""
    return len(short) < len(long) and f" {short} " in f" {long} "
