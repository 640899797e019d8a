"""Measure where SQLite's ``unicode61`` reads a character otherwise than Python's tables say.

FTS5's ``unicode61`` classes and folds characters by Unicode tables built into SQLite, older
than Python's :mod:`unicodedata`: a character assigned since (an emoji of Unicode 7 or later)
is "unassigned" to SQLite, and an unassigned character is a token character there; a letter
given a case since (U+1C80 ᲀ) is not case-folded there. The stemmer of the PostgreSQL store
(``pinakes_core/index/stemmer.py``) starts from Python's tables; this script puts every code
point through SQLite's FTS5 (``unicode61 remove_diacritics 2``, one row each, read back through
``fts5vocab``), compares with the stemmer's own reading, and writes the differences to
``pinakes_core/index/_unicode61.py``, which the stemmer applies.

    uv run python benchmarks/fts5_unicode.py           # rewrite the table (~25 s)
    uv run python benchmarks/fts5_unicode.py --check   # exit 1 if the table is not current

The table is SQLite's as Python's ``sqlite3`` links it (``sqlite3.sqlite_version``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

from pinakes_core.index import stemmer

TARGET = Path(stemmer.__file__).with_name("_unicode61.py")


def sqlite_reading() -> dict[int, str]:
    """Code point → the token SQLite's ``unicode61`` makes of it alone (absent: a separator)."""
    points = [c for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", ((c, chr(c)) for c in points))
    found = {int(doc): str(term) for term, doc, _ in db.execute("SELECT term, doc, offset FROM v")}
    db.close()
    return found


def _ranges(points: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for c in points:
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


def _escape(c: int) -> str:
    return f"\\u{c:04x}" if c < 0x10000 else f"\\U{c:08x}"


def _class_text(points: list[int]) -> list[str]:
    """A regular-expression class body for ``points``, as source lines of string literals."""
    parts = [_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in _ranges(points)]
    lines, line = [], ""
    for part in parts:
        if len(line) + len(part) > 80:
            lines.append(f'    "{line}"')
            line = ""
        line += part
    if line:
        lines.append(f'    "{line}"')
    return lines or ['    ""']


def _assign(name: str, lines: list[str]) -> list[str]:
    """``name = <lines>`` as ruff formats it: one string on the line, or several in brackets."""
    if len(lines) == 1:
        return [f"{name} = {lines[0].strip()}"]
    return [f"{name} = (", *lines, ")"]


def render(sqlite: dict[int, str]) -> str:
    """The source of ``_unicode61.py`` for SQLite's reading ``sqlite``."""
    tokens, separators, folded = [], [], {}
    for c in range(0x80, 0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        mine = stemmer.python_fold(ch) if stemmer.python_token_start(ch) else None
        theirs = sqlite.get(c)
        if mine is None and theirs is not None:
            tokens.append(c)
            if theirs != ch:
                folded[c] = theirs
        elif mine is not None and theirs is None:
            separators.append(c)
        elif mine != theirs and theirs is not None:
            folded[c] = theirs
    fold_lines = [
        f'    "{_escape(c)}": "{"".join(_escape(ord(x)) for x in v)}",'
        for c, v in sorted(folded.items())
    ]
    return "\n".join(
        [
            '"""Where SQLite\'s ``unicode61`` reads a character otherwise than Python\'s tables.',
            "",
            f"Made by ``benchmarks/fts5_unicode.py`` from SQLite {sqlite3.sqlite_version} and "
            f"Python's Unicode {__import__('unicodedata').unidata_version}",
            "(do not edit): code points SQLite takes for token characters where Python's "
            "tables say",
            "separator (mostly unassigned or newer ones), the reverse, and the characters it folds",
            "otherwise (:mod:`pinakes_core.index.stemmer`).",
            '"""',
            "",
            "#: Token characters to SQLite, separators by Python's tables (a regex class body).",
            *_assign("TOKEN_CHARS", _class_text(tokens)),
            "#: Separators to SQLite, token characters by Python's tables.",
            *_assign("SEPARATORS", _class_text(separators)),
            "#: Characters SQLite folds otherwise (or not at all) than Python's tables do.",
            "FOLDED = {",
            *fold_lines,
            "}",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    """Measure SQLite's reading of every code point and write (or check) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the table is stale")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    text = render(sqlite_reading())
    took = time.perf_counter() - started
    if args.check:
        same = TARGET.read_text(encoding="utf-8") == text
        print(f"{TARGET}: {'current' if same else 'STALE'} ({took:.1f} s)")
        sys.exit(0 if same else 1)
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET} ({took:.1f} s)")


if __name__ == "__main__":
    main()
