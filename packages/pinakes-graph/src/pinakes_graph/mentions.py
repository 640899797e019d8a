"""Title-mention edges: a document that names another document's title links to it.

Notes vaults call these "unlinked mentions"; in a corpus of one passage per entity (Wikipedia-
style multi-hop sets) they are the bridge from the first hop to the second — "Lothair II" names
"Ermengarde of Tours", whose page holds the date asked for. Matching is on lower-cased word
sequences (titles of 1–8 words, at least 4 characters, not all stopwords); an edge weighs
``[graph] title_mention / number of documents naming that title``, the same hub damping tags
get, so a title every page mentions links nothing much.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable

from pinakes_core.index.query import STOPWORDS, words
from pinakes_graph.sql import marks

__all__ = ["derive_mentions", "mentioned", "mentioned_titles", "title_index"]

MAX_TITLE_WORDS = 8
MIN_TITLE_CHARS = 4
MAX_SHARED_TITLE = 3
#: Documents per statement of :func:`derive_mentions`: its ``IN`` lists stay under SQLite's
#: variable limit (999 on old builds), and one batch's texts are all it holds in memory.
BATCH = 500


def _words(text: str) -> list[str]:
    return [w.lower() for w in words(text)]


def title_index(conn: sqlite3.Connection) -> dict[tuple[str, ...], set[str]]:
    """Lower-cased title word sequences → ids of the documents with that title.

    Titles of 1-8 words and at least 4 characters, not all stopwords, shared by at most three
    documents (a title such as "Overview" or "README" names no one document).
    """
    titles: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for doc_id, title in conn.execute("SELECT doc_id, title FROM documents"):
        key = tuple(_words(title))
        long_enough = 0 < len(key) <= MAX_TITLE_WORDS and len(" ".join(key)) >= MIN_TITLE_CHARS
        if long_enough and not all(w in STOPWORDS for w in key):
            titles[key].add(doc_id)
        # A title several documents share ("Overview", "README") says nothing about which one a
    # mention means, and would link every mention to all of them: such titles are skipped.
    return {key: docs for key, docs in titles.items() if len(docs) <= MAX_SHARED_TITLE}


def mentioned_titles(text: str, titles: dict[tuple[str, ...], set[str]]) -> set[tuple[str, ...]]:
    """The titles (keys of :func:`title_index`) that ``text`` names."""
    words = _words(text)
    return {
        key
        for i in range(len(words))
        for n in range(1, MAX_TITLE_WORDS + 1)
        if (key := tuple(words[i : i + n])) in titles
    }


def mentioned(text: str, titles: dict[tuple[str, ...], set[str]]) -> set[str]:
    """Ids of the documents whose title (from :func:`title_index`) ``text`` names."""
    found: set[str] = set()
    for key in mentioned_titles(text, titles):
        found |= titles[key]
    return found


def derive_mentions(
    conn: sqlite3.Connection, changed: Iterable[str], *, everything: bool, weight: float
) -> None:
    """Re-derive title-mention edges: for ``changed`` documents, or all when ``everything``.

    The caller passes ``everything`` when the set of titles changed (a document was added,
    removed or retitled), since unchanged documents may now mention a new title.

    The statements are per batch of :data:`BATCH` documents, not per document: on PostgreSQL
    each statement is a round trip (four per document were ~400k statements in a 100k-document
    first sync; 26 statements instead of 40,004 at 10k, issue 38). Only one batch's texts are
    held at a time.
    """
    titles = title_index(conn)
    node = {k: int(n) for n, k in conn.execute("SELECT node_id, key FROM nodes WHERE kind = 'doc'")}
    if everything:
        conn.execute("DELETE FROM edges WHERE kind = 'title-mention'")
        docs = [r[0] for r in conn.execute("SELECT doc_id FROM documents") if r[0] in node]
    else:
        docs = [d for d in dict.fromkeys(changed) if d in node]
    if not docs:
        return
    # Targets whose mention count may have changed; all of them when everything is derived.
    touched: set[int] | None = None if everything else set()
    for start in range(0, len(docs), BATCH):
        part = docs[start : start + BATCH]
        if touched is not None:
            srcs = [node[d] for d in part]
            where = f"WHERE kind = 'title-mention' AND src IN ({marks(srcs)})"
            touched.update(r[0] for r in conn.execute(f"SELECT dst FROM edges {where}", srcs))
            conn.execute(f"DELETE FROM edges {where}", srcs)
        texts: dict[str, list[str]] = defaultdict(list)
        for doc_id, text in conn.execute(
            f"SELECT doc_id, text FROM chunks WHERE doc_id IN ({marks(part)}) "
            "ORDER BY doc_id, ordinal",
            part,
        ):
            texts[doc_id].append(text)
        rows: list[tuple[int, int]] = []
        for doc_id in part:
            named = mentioned(" ".join(texts.get(doc_id, ())), titles) - {doc_id}
            targets = {node[t] for t in named if t in node}
            rows += [(node[doc_id], t) for t in targets]
            if touched is not None:
                touched |= targets
        if rows:
            conn.executemany(
                "INSERT INTO edges(src, dst, kind, weight) VALUES (?, ?, 'title-mention', 0) "
                "ON CONFLICT (src, dst, kind) DO NOTHING",
                rows,
            )
    # Damping: each mention of a title weighs weight / (documents mentioning it); only targets
    # whose mentions changed are re-weighed.
    # Whole statements, not one built from a shared head: tests/test_sql_dialect*.py prepare
    # every statement of the code on both engines.
    if touched is None:
        counts = list(
            conn.execute(
                "SELECT dst, COUNT(*) FROM edges WHERE kind = 'title-mention' GROUP BY dst"
            )
        )
    else:
        dsts = sorted(touched)
        counts = [
            row
            for start in range(0, len(dsts), BATCH)
            for row in conn.execute(
                "SELECT dst, COUNT(*) FROM edges WHERE kind = 'title-mention' "
                f"AND dst IN ({marks(dsts[start : start + BATCH])}) GROUP BY dst",
                dsts[start : start + BATCH],
            )
        ]
    conn.executemany(
        "UPDATE edges SET weight = ? WHERE dst = ? AND kind = 'title-mention'",
        [(weight / n, dst) for dst, n in counts],
    )
