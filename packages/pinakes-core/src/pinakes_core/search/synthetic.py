"""The synthetic queries self-calibration searches (DESIGN §5; :mod:`pinakes_core.search.calibration`).

- **Pseudo-questions** built from a KB's own chunks, whose source document is known: a cropped
  key sentence with its answer-like tokens masked, a heading with a cropped sentence, a title
  question (:func:`synthetic_queries`);
- **near-misses**: a pseudo-question whose key term is swapped for a word the KB never mentions,
  or whose identifier (``ADR-012``) is changed to one that does not exist;
- the bundled **off-topic** queries (``data/offtopic.txt``: general knowledge and other
  domains, :func:`offtopic_queries`).

Everything is deterministic: the samples are seeded by the KB id.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

from pinakes_core.index.bm25 import Fts5Text, TextIndex
from pinakes_core.index.query import STOPWORDS, split_cjk

__all__ = [
    "MAX_POSITIVES",
    "NEARMISS_SHARE",
    "SyntheticQuery",
    "offtopic_hash",
    "offtopic_queries",
    "synthetic_queries",
]

#: At most this many pseudo-questions built from the KB (one per sampled document; small KBs
#: get several per document). Enough to place the anchors; more costs time, not accuracy.
MAX_POSITIVES = 160
#: Near-misses per positive.
NEARMISS_SHARE = 0.5

_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP = re.compile(r"`+|\*+|#+|\|+|\[|\]\([^)]*\)|<[^>]+>|^[-+>]\s+", re.MULTILINE)
_HAS_DIGIT = re.compile(r"\d")
_ID_WITH_NUMBER = re.compile(r"\b([A-Za-z]{2,}[-_]?)(\d{2,})\b")


@dataclass(frozen=True)
class SyntheticQuery:
    """One synthetic query: its text, its kind and, for a positive, where it came from.

    ``words`` are a positive's content words taken from its source (title, heading, sentence),
    without the opener the recipe adds.
    """

    text: str
    kind: str  # "positive", "nearmiss" or "offtopic"
    source_doc: str | None = None
    words: tuple[str, ...] = ()


@functools.cache
def offtopic_queries() -> tuple[str, ...]:
    """The bundled off-topic reference queries (``data/offtopic.txt``), in file order."""
    text = resources.files("pinakes_core").joinpath("data/offtopic.txt").read_text("utf-8")
    return tuple(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


def offtopic_hash() -> str:
    """A digest of the bundled off-topic queries (stored with their vectors)."""
    return hashlib.blake2b("\n".join(offtopic_queries()).encode(), digest_size=8).hexdigest()


def _clean(text: str) -> str:
    return _MARKUP.sub(" ", text)


def _content(words: Sequence[str]) -> list[str]:
    return [w for w in words if w.lower() not in STOPWORDS and len(w) > 1]


def _sentences(text: str) -> list[list[str]]:
    out = []
    for sentence in _SENTENCE.split(_clean(text)):
        words = _WORD.findall(sentence)
        if 5 <= len(words) <= 60:
            out.append(words)
    return out


def _crop(words: list[str], df: dict[str, int], rng: random.Random, keep: int) -> list[str]:
    """Content words of a sentence, answer-like tokens masked, cropped to its rarest window."""
    content = [w for w in _content(words) if not _HAS_DIGIT.search(w)]
    if len(content) <= keep:
        return content
    best = max(
        range(len(content) - keep + 1),
        key=lambda i: sum(1.0 / df.get(w.lower(), 1) for w in content[i : i + keep]),
    )
    window = content[best : best + keep]
    # Drop one common word at random: real questions rarely repeat a sentence whole.
    common = sorted(range(len(window)), key=lambda i: -df.get(window[i].lower(), 1))
    if len(window) > 3 and rng.random() < 0.5:
        window = [w for i, w in enumerate(window) if i != common[0]]
    return window


_OPENERS = ("what", "how", "which", "why", "where")


def synthetic_queries(
    conn: sqlite3.Connection,
    kb_id: str,
    *,
    max_positives: int = MAX_POSITIVES,
    text_index: TextIndex | None = None,
) -> list[SyntheticQuery]:
    """Build positives (from the KB's chunks) and near-misses (their key term swapped).

    Deterministic for a given KB state and id. ``text_index`` counts a word's rows (default: FTS5
    over ``conn``).
    """
    rng = random.Random(kb_id)
    docs = [(str(r[0]), str(r[1])) for r in conn.execute("SELECT doc_id, title FROM documents")]
    docs.sort()
    if not docs:
        return []
    per_doc = max(1, min(3, max_positives // len(docs)))
    chosen = rng.sample(docs, min(len(docs), max_positives))
    picked: list[tuple[str, str, list[str], str]] = []  # doc, title, heading path, text
    for doc_id, title in chosen:
        rows = conn.execute(
            "SELECT heading_path, text FROM chunks WHERE doc_id = ? AND tokens >= 12 "
            "ORDER BY ordinal",
            (doc_id,),
        ).fetchall()
        if not rows:
            continue
        for row in rng.sample(rows, min(per_doc, len(rows))):
            picked.append((doc_id, title, json.loads(row[0]), str(row[1])))
    df: dict[str, int] = {}
    for _, title, heading, text in picked:
        for w in {w.lower() for w in _WORD.findall(f"{title} {' '.join(heading)} {text}")}:
            df[w] = df.get(w, 0) + 1
    positives: list[SyntheticQuery] = []
    for i, (doc_id, title, heading, text) in enumerate(picked):
        sentences = _sentences(text)
        kind = i % 3
        opener: list[str]
        body: list[str]  # the words taken from the document
        if kind == 0 and sentences:
            sentence = max(sentences, key=lambda s: sum(1.0 / df.get(w.lower(), 1) for w in s))
            opener = [_OPENERS[i % len(_OPENERS)]]
            body = _crop(sentence, df, rng, rng.randint(4, 7))
        elif kind == 1 and sentences and heading:
            opener = []
            body = [*heading[-1].split(), *_crop(rng.choice(sentences), df, rng, 4)]
        else:
            title_words = _WORD.findall(_clean(title))
            extra = _crop(rng.choice(sentences), df, rng, 2) if sentences else []
            opener = [_OPENERS[i % 2], "is"]
            body = [*title_words, *extra]
        words = [*opener, *body]
        query = " ".join(words).strip()
        if len(_content(words)) >= 2:
            source = tuple(_content(_WORD.findall(" ".join(body))))
            positives.append(SyntheticQuery(query, "positive", doc_id, source))
    return positives + _nearmisses(text_index or Fts5Text(conn), positives, rng)


def _df(text: TextIndex, term: str) -> int:
    return text.doc_freq('"' + split_cjk(term.replace('"', "")) + '"')


def _nearmisses(
    text: TextIndex, positives: Sequence[SyntheticQuery], rng: random.Random
) -> list[SyntheticQuery]:
    """Swap each sampled positive's rarest KB word for a word the KB does not contain."""
    foreign_pool = sorted(
        {
            w
            for q in offtopic_queries()
            for w in _WORD.findall(q)
            if len(w) >= 5 and w.isalpha() and w.lower() not in STOPWORDS
        }
    )
    rng.shuffle(foreign_pool)
    foreign = (w for w in foreign_pool if _df(text, w.lower()) == 0)
    out: list[SyntheticQuery] = []
    wanted = int(len(positives) * NEARMISS_SHARE)
    for query in rng.sample(list(positives), min(wanted, len(positives))):
        words = query.text.split()
        candidates = [(i, w) for i, w in enumerate(words[1:], 1) if _content([w])]
        if not candidates:
            continue
        counts = {i: _df(text, w.lower()) for i, w in candidates}
        known = {i: c for i, c in counts.items() if c > 0}
        if not known:
            continue
        index = min(known, key=lambda i: (known[i], i))  # the rarest word: usually the entity
        number = _ID_WITH_NUMBER.search(words[index])
        if number:
            swapped = f"{number.group(1)}{int(number.group(2)) + 7919}"
        else:
            swapped = next(foreign, "")
            if not swapped:
                break
        words[index] = swapped
        out.append(SyntheticQuery(" ".join(words), "nearmiss"))
    return out
