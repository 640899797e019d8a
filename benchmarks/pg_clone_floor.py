"""What an exact BM25 top k must read on the clone corpus at 1M (issue 38): a lower bound.

The clone corpus (``pg_search_scale.py fill``) is golden's 444 chunks copied 2,252 times: copy
*c* of a chunk has its postings, under the id ``chunk_id + c × stride``. So a question's
postings past the budget are golden's own postings (copy 0), each standing for 2,252 rows of
equal weight, with the KB's counts (N and each lexeme's rows) for the IDF. From them, per
golden question past ``bm25_max_rows`` (without phrases), with the exact ``k``-th score θ
known in advance (the best any first round can do):

* ``threshold``: the least work of a threshold read over the impact index: each term read to
  some level of its impacts (a level whole: copies tie), so that no unread row can reach θ,
  and the rows read for some term whose bound still reaches θ probed for their other terms.
  Rows read count 1, a probe :data:`PROBE_ROWS` (measured first); the levels are chosen by
  coordinate descent from "every term read whole" (the exact pass's rows).
* ``maxscore``: MaxScore with θ: the terms of least most whose mosts sum under θ are
  non-essential; the others are read whole and aggregated, the candidates that can still
  reach θ are completed term by term (read whole and joined, or probed, whichever is less).
* ``rows``: every row of the question's terms (the exact pass).

It also measures, on the server, what a row costs read and summed, read and aggregated per
chunk (the exact pass), and what a probe of the postings' key costs. Run after a ``fill``:

    uv run python benchmarks/pg_clone_floor.py --home /tmp/pg1m/home
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from pg_scale import emit  # noqa: E402 (benchmarks/ is on the path from here)
from pg_search_scale import Server, open_kb  # noqa: E402

#: A probe of the postings' key and a posting read whole (joined to candidates), each against
#: a posting read and aggregated per chunk: set from the costs measured on the server.
PROBE_ROWS = 15.0
SCAN_ROWS = 0.25


def weight(idf: float, tf: float, length: float, avg: float) -> float:
    """BM25's term weight (k1 1.2, b 0.75), as the store computes it."""
    return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg))


def impact(tf: float, length: float, avg0: float) -> float:
    """The impact index's order: tf / (tf + K) at the index's mean length A0."""
    return tf / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg0))


def floors(q: dict[str, Any], copies: int, avg: float, avg0: float) -> dict[str, float] | None:
    """The threshold read's least work, MaxScore's and the exact pass's rows, for one question."""
    terms = [x for x in q["lexemes"] if q["df"][x]]
    w: dict[int, dict[str, float]] = collections.defaultdict(dict)
    imp: dict[int, dict[str, float]] = collections.defaultdict(dict)
    for lexeme, chunk, tf, length in q["postings"]:
        w[chunk][lexeme] = weight(q["idf"][lexeme], tf, length, avg)
        imp[chunk][lexeme] = impact(tf, length, avg0)
    if not w:
        return None
    theta = max(sum(v.values()) for v in w.values())
    levels = {
        t: sorted(collections.Counter(imp[g][t] for g in imp if t in imp[g]).items(), reverse=True)
        for t in terms
    }
    margin = max(1.0, avg / avg0)

    def cost(depth: dict[str, int]) -> float:
        most = {
            t: 0.0
            if depth[t] >= len(levels[t])
            else q["idf"][t] * 2.2 * margin * levels[t][depth[t]][0]
            for t in terms
        }
        if sum(most.values()) >= theta:
            return math.inf
        rows = sum(copies * sum(c for _, c in levels[t][: depth[t]]) for t in terms)
        probes = 0
        for g in w:
            seen = [
                t
                for t in terms
                if t in imp[g] and depth[t] and imp[g][t] >= levels[t][depth[t] - 1][0]
            ]
            if (
                seen
                and sum(w[g][t] for t in seen) + sum(most[t] for t in terms if t not in seen)
                >= theta
            ):
                probes += copies * (len(terms) - len(seen))
        return rows + PROBE_ROWS * probes

    depth = {t: len(levels[t]) for t in terms}
    best = cost(depth)
    changed = True
    while changed:
        changed = False
        for t in terms:
            for d in range(len(levels[t]) + 1):
                old, depth[t] = depth[t], d
                c = cost(depth)
                if c < best - 1e-9:
                    best, changed = c, True
                else:
                    depth[t] = old
    # MaxScore with θ known: non-essential terms are those of least most under θ.
    top = {t: max(w[g][t] for g in w if t in w[g]) for t in terms}
    non: list[str] = []
    spent = 0.0
    for t in sorted(terms, key=lambda t: top[t]):
        if spent + top[t] >= theta:
            break
        non.append(t)
        spent += top[t]
    essential = [t for t in terms if t not in non]
    maxscore = float(sum(q["df"][t] for t in essential))
    known = {g: sum(w[g].get(t, 0.0) for t in essential) for g in w}
    known = {g: s for g, s in known.items() if s > 0 and s + spent >= theta}
    left = spent
    for t in sorted(non, key=lambda t: -top[t]):
        maxscore += min(SCAN_ROWS * q["df"][t], PROBE_ROWS * copies * len(known))
        left -= top[t]
        known = {g: s + w[g].get(t, 0.0) for g, s in known.items()}
        known = {g: s for g, s in known.items() if s + left >= theta}
    return {
        "threshold": best,
        "maxscore": maxscore,
        "rows": float(sum(q["df"][t] for t in terms)),
    }


def costs(conn: Any, lexeme: str, ids: list[int]) -> dict[str, float]:
    """µs a posting read and summed, read and aggregated per chunk, and a probe of the key."""
    out = {}
    rows = int(
        conn.execute("SELECT count(*) FROM postings WHERE lexeme = %s", (lexeme,)).fetchone()[0]
    )
    for name, sql, n in (
        ("read_us", "SELECT sum(tf / (tf + length)) FROM postings WHERE lexeme = %s", rows),
        (
            "aggregated_us",
            "SELECT count(*) FROM (SELECT chunk_id, sum(tf / (tf + length)) FROM postings "
            "WHERE lexeme = %s GROUP BY chunk_id) s",
            rows,
        ),
    ):
        times = []
        for _ in range(3):
            t = time.perf_counter()
            conn.execute(sql, (lexeme,)).fetchall()
            times.append(time.perf_counter() - t)
        out[name] = round(min(times) * 1e6 / n, 3)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        conn.execute(
            "SELECT count(*) FROM postings WHERE lexeme = %s AND chunk_id = ANY(%s::bigint[])",
            (lexeme, ids),
        ).fetchall()
        times.append(time.perf_counter() - t)
    out["probe_us"] = round(min(times) * 1e6 / len(ids), 3)
    out["rows"] = rows
    return out


def main() -> int:
    """Print the floors over golden's questions, and the measured costs."""
    from pinakes_core.index.pgsearch import PgLexicalIndex
    from pinakes_core.index.query import fts_phrases
    from pinakes_core.manage.eval import load_questions

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=Path("/tmp/pg1m/home"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--probe-lexeme", default="servic", help="a common lexeme for the costs")
    parser.add_argument("--queries", type=int, default=60, help="golden's first N questions")
    args = parser.parse_args()
    global PROBE_ROWS, SCAN_ROWS
    kb = open_kb(args.home, Server(args.home).start())
    questions = [q.query for q in load_questions(ROOT / "golden" / "questions.jsonl")]
    questions = questions[: args.queries]
    result: dict[str, Any] = {}
    with kb:
        store = kb.store()
        conn = store.raw
        index = PgLexicalIndex(store, max_rows=kb.config.scale.bm25_max_rows)
        n, total = index._stats()
        avg, avg0 = total / n, index.impact_avg() or total / n
        golden = [
            int(r[0])
            for r in conn.execute(
                "SELECT c.chunk_id FROM chunks c WHERE c.doc_id NOT LIKE %s", ("%~%",)
            )
        ]
        copies = round(n / len(golden))
        # 2,252 of the lexeme's rows spread over its list (as a golden chunk's copies are).
        ids = [
            int(r[0])
            for r in conn.execute(
                "SELECT chunk_id FROM postings WHERE lexeme = %s ORDER BY chunk_id",
                (args.probe_lexeme,),
            )
        ]
        ids = ids[:: max(1, len(ids) // copies)][:copies]
        measured = result["costs"] = costs(conn, args.probe_lexeme, ids)
        PROBE_ROWS = measured["probe_us"] / measured["aggregated_us"]
        SCAN_ROWS = measured["read_us"] / measured["aggregated_us"]
        per: list[dict[str, float]] = []
        for text in questions:
            phrases = fts_phrases(text)
            index._analyse(phrases)
            if any(len(index.lexemes(p)) > 1 for p in phrases):
                continue  # a phrase of several words: not modelled
            lexemes = sorted({x for p in phrases for x in index.lexemes(p)})
            df = {x: index._df.get(x, 0) for x in lexemes}
            if sum(df.values()) <= index.max_rows:
                continue
            postings = [
                (str(r[0]), int(r[1]), float(r[2]), float(r[3]))
                for r in conn.execute(
                    "SELECT lexeme, chunk_id, tf, length FROM postings "
                    "WHERE lexeme = ANY(%s) AND chunk_id = ANY(%s)",
                    (lexemes, golden),
                )
            ]
            q = {
                "lexemes": lexemes,
                "df": df,
                "idf": {x: index._idf(n, df[x]) for x in lexemes},
                "postings": postings,
            }
            found = floors(q, copies, avg, avg0)
            if found:
                per.append(found)
        result["questions"] = len(per)
        result["copies"] = copies
        # In postings read and aggregated, and in ms at the measured cost of one.
        for key in ("threshold", "maxscore", "rows"):
            values = sorted(p[key] for p in per)
            result[key] = {
                "p50": statistics.median(values),
                "min": values[0],
                "max": values[-1],
                "p50_ms": round(statistics.median(values) * measured["aggregated_us"] / 1000, 1),
            }
        result["load"] = round(os.getloadavg()[0], 2)
    return emit(result, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
