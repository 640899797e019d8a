"""FTS5's words made in Python (index/stemmer.py) against what SQLite's FTS5 itself stores.

The oracle is SQLite: an FTS5 table with the store's tokenizer (``porter unicode61
remove_diacritics 2``, index/tables.py), read back through an ``fts5vocab`` table of type
``instance`` (each row's terms with their offsets).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinakes_core.index.query import split_cjk
from pinakes_core.index.stemmer import fold, stem, terms

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO.parent / "shared" / "corpora"


def fts5_terms(texts: Iterable[str]) -> list[list[str]]:
    """What FTS5 with the store's tokenizer stores for each text, in order."""
    texts = list(texts)
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(texts, 1))
    found: dict[int, list[tuple[int, str]]] = {}
    for term, doc, offset in db.execute("SELECT term, doc, offset FROM v"):
        found.setdefault(doc, []).append((offset, term))
    db.close()
    return [[t for _, t in sorted(found.get(i, []))] for i in range(1, len(texts) + 1)]


def _corpus_words() -> list[str]:
    """Every distinct white-space-separated string of the corpora and the golden KB, CJK split."""
    found: set[str] = set()
    for root in (CORPORA, REPO / "golden"):
        for path in root.rglob("*"):
            if path.is_file() and path.suffix in {".md", ".yaml", ".jsonl", ".txt", ".json"}:
                found.update(split_cjk(path.read_text(errors="replace")).split())
    return sorted(found)


def test_porter_as_fts5_stems_the_classic_cases() -> None:
    pairs = {
        "caresses": "caress",
        "ponies": "poni",
        "cats": "cat",
        "agreed": "agre",
        "plastered": "plaster",
        "motoring": "motor",
        "hopping": "hop",
        "filing": "file",
        "happy": "happi",
        "relational": "relat",
        "generalization": "gener",
        "electricity": "electr",
        "adjustment": "adjust",
        "controlling": "control",
        "is": "is",  # under three bytes: as it is (Snowball's porter gives "i")
        "as": "as",
        "the": "the",
    }
    assert {w: stem(w) for w in pairs} == pairs
    assert stem("x" * 65) == "x" * 65  # over 64 bytes: as it is
    assert fold("Café") == "cafe" and fold("ǕBER") == "uber" and fold("ẞ") == "ß"


@pytest.mark.slow
def test_every_corpus_word_is_stored_as_fts5_stores_it() -> None:
    """Every distinct string of both bundled corpora and the golden KB: the same terms in order.

    65,611 strings, 137,854 tokens when written; emoji newer than SQLite's Unicode tables
    included (a word to FTS5, a separator by Python's tables: index/_unicode61.py).
    """
    if not CORPORA.is_dir():
        pytest.skip(f"{CORPORA} (the bundled corpora) is not here")
    words = _corpus_words()
    expected = fts5_terms(words)
    assert len(words) > 50_000 and sum(len(t) for t in expected) > 100_000
    differ = [(w, want) for w, want in zip(words, expected, strict=True) if terms(w) != want]
    assert differ == []


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
_LETTERS = st.text(
    st.characters(codec="utf-8", categories=["L", "N", "Mn", "Zs", "Pc"]), max_size=40
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_TEXT, _LETTERS), min_size=1, max_size=20))
def test_any_text_is_stored_as_fts5_stores_it(texts: list[str]) -> None:
    """Any characters: tokens, case folding, diacritics and stems, every plane and script."""
    assert [terms(t) for t in texts] == fts5_terms(texts)


def test_ascii_words_of_every_shape_are_stored_as_fts5_stores_them() -> None:
    """Suffix rules at their length limits, y as vowel and consonant, digits inside words."""
    letters = "aeiouy" + "bcdlnrstz"
    suffixes = [
        "", "s", "es", "sses", "ies", "ed", "eed", "ing", "at", "bl", "iz", "y", "ational",
        "tional", "enci", "anci", "izer", "logi", "bli", "alli", "entli", "eli", "ousli",
        "ization", "ation", "ator", "alism", "iveness", "fulness", "ousness", "aliti", "iviti",
        "biliti", "ical", "ness", "icate", "iciti", "ful", "ative", "alize", "al", "ance",
        "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "sion", "tion", "ou",
        "ism", "ate", "iti", "ous", "ive", "ize", "e", "ll",
    ]  # fmt: skip
    stems = [a + b for a in letters for b in letters] + [
        a + b + c for a in letters for b in "aeiouy" for c in letters
    ]
    words = [s + x for s in ["", *stems] for x in suffixes if s + x]
    words += ["3d", "v1ing", "x2ed", "1st", "zzsym3d7e", "hopping1", "agreed9"]
    assert len(words) > 50_000
    assert [terms(w) for w in words] == fts5_terms(words)


@pytest.mark.slow
def test_every_code_point_alone_is_read_as_fts5_reads_it() -> None:
    """Each character of every plane, alone: a word or none, folded as SQLite folds it.

    Where SQLite's Unicode tables and Python's differ, index/_unicode61.py (measured by
    benchmarks/fts5_unicode.py) holds SQLite's reading; a SQLite of other tables fails here.
    """
    points = [chr(c) for c in range(0x20, 0x110000) if not 0xD800 <= c < 0xE000]
    expected = fts5_terms(points)
    differ = [
        (hex(ord(c)), want) for c, want in zip(points, expected, strict=True) if terms(c) != want
    ]
    assert differ == []
