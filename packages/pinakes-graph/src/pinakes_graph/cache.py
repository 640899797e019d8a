"""The in-memory graph of one store generation, shared by the graph channels.

Built once per store generation (any sync bumps it) and kept with the ``KB`` object, so a query
never re-reads the edge table: the expansion channel walks its adjacency lists and the PPR
channel multiplies by its cached transition matrix.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pinakes_core.search.context import QueryContext, Ranked

__all__ = ["KINDS", "Graph", "GraphChannel", "best_first", "graph_for"]

#: Node kind codes.
KINDS = {"chunk": 0, "doc": 1, "tag": 2, "heading": 3, "dir": 4, "entity": 5}
HUBS = (KINDS["tag"], KINDS["heading"], KINDS["dir"], KINDS["entity"])
#: Edge kind codes.
EDGE_KINDS = {
    "membership": 0,
    "sibling": 1,
    "parent-child": 2,
    "in-section": 3,
    "co-located": 4,
    "shared-tag": 5,
    "authored": 6,
    "reverse-scan": 7,
    "mentions": 8,
    "title-mention": 9,
}


@dataclass
class Graph:
    """Nodes and undirected weighted adjacency of a KB's graph.

    Attributes:
        kind: kind code per node index.
        chunk_id: chunk id per node index (-1 for non-chunk nodes).
        doc_of: doc node index per chunk node (-1 otherwise).
        indptr / neighbours / weights / edge_kind: CSR adjacency, both directions of each edge.
        members: chunk node indices per doc node index.
        node_of_chunk: chunk id → node index.
        label_nodes / label_vectors: tag/heading nodes with label embeddings (unit rows).
        chunk_count: chunks connected to each hub node (its specificity denominator).
        node_ids: store ``node_id`` per node index (ascending), to place plugins' seeds.
    """

    kind: npt.NDArray[np.int8]
    chunk_id: npt.NDArray[np.int64]
    doc_of: npt.NDArray[np.int64]
    indptr: npt.NDArray[np.int64]
    neighbours: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]
    edge_kind: npt.NDArray[np.int8]
    members: dict[int, npt.NDArray[np.int64]]
    node_of_chunk: dict[int, int]
    label_nodes: npt.NDArray[np.int64]
    label_vectors: npt.NDArray[np.float32]
    chunk_count: npt.NDArray[np.float64]
    node_ids: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    _transition_t: Any = field(default=None, repr=False)
    _member_layout: Any = field(default=None, repr=False)
    _vector_rows: Any = field(default=None, repr=False)
    #: Title word sequences → doc ids (``mentions.title_index``), filled on first use.
    titles: dict[tuple[str, ...], set[str]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.kind.shape[0])

    def adjacent(
        self, node: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.int8]]:
        """Neighbour indices, weights and edge kinds of ``node``."""
        lo, hi = self.indptr[node], self.indptr[node + 1]
        return self.neighbours[lo:hi], self.weights[lo:hi], self.edge_kind[lo:hi]

    def chunk_cosine(self, ctx: QueryContext) -> npt.NDArray[np.float64]:
        """Return the query cosine per node.

        Chunk nodes get their dense score; other nodes, chunks without a vector and chunks
        outside the filters get -1.
        """
        cosine = np.full(len(self), -1.0, dtype=np.float64)
        chunk_nodes, rows, has_row = self._rows_in(ctx)
        if ctx.dense_scores.size:
            cosine[chunk_nodes] = np.where(has_row, ctx.dense_scores[rows], -1.0)
        return cosine

    def _rows_in(
        self, ctx: QueryContext
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Chunk nodes, their rows in the query's vector matrix (0 where none) and which have one.

        Kept for as long as the KB keeps the same matrix, so a query does not look up every
        chunk node's row again.
        """
        ids = ctx.vectors.chunk_ids
        if self._vector_rows is None or self._vector_rows[0] is not ids:
            chunk_nodes = np.flatnonzero(self.chunk_id >= 0)
            rows = ctx.rows_of(self.chunk_id[chunk_nodes])
            self._vector_rows = (ids, chunk_nodes, np.clip(rows, 0, None), rows >= 0)
        _, chunk_nodes, rows, has_row = self._vector_rows
        return chunk_nodes, rows, has_row

    def allowed(self, ctx: QueryContext, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The chunk nodes among ``nodes`` that pass the query's filters."""
        if ctx.allowed_rows is None:
            return nodes
        rows = ctx.rows_of(self.chunk_id[nodes])
        return nodes[(rows >= 0) & ctx.allowed_rows[np.clip(rows, 0, None)]]

    def doc_best(self, cosine: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Per node: for document nodes, the best ``cosine`` among their chunks; -1 elsewhere.

        One vectorised pass (``maximum.reduceat`` over the members laid end to end), so ranking
        a hub's hundreds of member documents costs array lookups, not a loop per document.
        """
        if self._member_layout is None:
            docs = np.array(sorted(self.members), dtype=np.int64)
            flat = [self.members[int(d)] for d in docs]
            offsets = np.cumsum([0, *(len(m) for m in flat[:-1])]).astype(np.int64)
            self._member_layout = (
                docs,
                np.concatenate(flat) if flat else np.zeros(0, np.int64),
                offsets,
            )
        docs, flat, offsets = self._member_layout
        best = np.full(len(self), -1.0, dtype=np.float64)
        if docs.size:
            best[docs] = np.maximum.reduceat(cosine[flat], offsets)
        return best

    def adjacency(self) -> Any:
        """Return the weighted adjacency as a scipy CSR matrix (row ``u``: edges ``u → v``).

        The matrix is built over the graph's own arrays: derive new matrices from it, never
        edit it in place.
        """
        from scipy import sparse

        n = len(self)
        return sparse.csr_matrix((self.weights, self.neighbours, self.indptr), shape=(n, n))

    def transition_t(self) -> Any:
        """Return the transposed row-stochastic transition matrix (scipy CSR).

        The graph is taken as undirected and weighted; the matrix is built on first use and
        kept, and rows of isolated nodes are zero.
        """
        if self._transition_t is None:
            from scipy import sparse

            adjacency = self.adjacency()
            degree = np.asarray(adjacency.sum(axis=1)).ravel()
            inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
            self._transition_t = (sparse.diags(inverse) @ adjacency).T.tocsr()
        return self._transition_t


def best_first(values: npt.NDArray[np.floating[Any]], k: int) -> npt.NDArray[np.int64]:
    """Positions of the ``k`` largest ``values``, largest first, ties by position.

    The same as ``np.argsort(-values, kind="stable")[:k]`` without sorting every value: a
    partition finds the k-th largest, and only the values at least that large are sorted (a
    query's PPR ranks ~50 of ~50,000 chunk nodes).
    """
    n = values.shape[0]
    if k >= n:
        return np.argsort(-values, kind="stable")
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(values, n - k)[n - k]
    tied_or_above = np.flatnonzero(values >= kth)
    top: npt.NDArray[np.int64] = tied_or_above[
        np.argsort(-values[tied_or_above], kind="stable")[:k]
    ]
    return top


def _build(store: Any) -> Graph:
    conn = store.conn
    nodes = conn.execute("SELECT node_id, kind, key FROM nodes ORDER BY node_id").fetchall()
    index = {int(r[0]): i for i, r in enumerate(nodes)}
    n = len(nodes)
    kind = np.array([KINDS[r[1]] for r in nodes], dtype=np.int8)
    chunk_key = {
        f"{r[1]}:{r[2]}": int(r[0])
        for r in conn.execute("SELECT chunk_id, doc_id, ordinal FROM chunks")
    }
    chunk_id = np.full(n, -1, dtype=np.int64)
    for i, r in enumerate(nodes):
        if r[1] == "chunk":
            chunk_id[i] = chunk_key.get(r[2], -1)
    edges = conn.execute("SELECT src, dst, kind, weight FROM edges").fetchall()
    src = np.array([index[e[0]] for e in edges], dtype=np.int64)
    dst = np.array([index[e[1]] for e in edges], dtype=np.int64)
    ekind = np.array([EDGE_KINDS.get(e[2], 0) for e in edges], dtype=np.int8)
    weight = np.array([e[3] for e in edges], dtype=np.float64)
    # Undirected: each edge in both directions, sorted by source into CSR.
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    w = np.concatenate([weight, weight])
    k = np.concatenate([ekind, ekind])
    order = np.argsort(a, kind="stable")
    a, b, w, k = a[order], b[order], w[order], k[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(indptr, a + 1, 1)
    indptr = np.cumsum(indptr)
    doc_of = np.full(n, -1, dtype=np.int64)
    members: dict[int, list[int]] = {}
    membership = ekind == EDGE_KINDS["membership"]
    for d, c in zip(src[membership], dst[membership], strict=True):
        doc_of[c] = d
        members.setdefault(int(d), []).append(int(c))
    chunk_count = np.zeros(n, dtype=np.float64)
    hub_edges = np.isin(
        ekind, [EDGE_KINDS["in-section"], EDGE_KINDS["co-located"], EDGE_KINDS["shared-tag"]]
    )
    for h, m in zip(src[hub_edges], dst[hub_edges], strict=True):
        chunk_count[h] += len(members.get(int(m), ())) if kind[m] == KINDS["doc"] else 1
    # Tag and heading labels seed by embedding match; entity nodes (pinakes-ner) seed through
    # the ``graph_seeds`` hook, which matches names, not meanings.
    labels = conn.execute(
        "SELECT nv.node_id, v.vector FROM node_vectors nv JOIN nodes n USING (node_id) "
        "JOIN vectors v USING (embed_hash) WHERE n.kind IN ('tag', 'heading') ORDER BY nv.node_id"
    ).fetchall()
    label_nodes = np.array([index[r[0]] for r in labels if r[0] in index], dtype=np.int64)
    vectors = [np.frombuffer(r[1], dtype=np.float32) for r in labels if r[0] in index]
    label_vectors = np.stack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)
    return Graph(
        kind=kind,
        chunk_id=chunk_id,
        doc_of=doc_of,
        indptr=indptr,
        neighbours=b,
        weights=w,
        edge_kind=k,
        members={d: np.array(sorted(c), dtype=np.int64) for d, c in members.items()},
        node_of_chunk={int(c): i for i, c in enumerate(chunk_id) if c >= 0},
        label_nodes=label_nodes,
        label_vectors=label_vectors,
        chunk_count=chunk_count,
        node_ids=np.array([r[0] for r in nodes], dtype=np.int64),
    )


_CACHE: weakref.WeakKeyDictionary[Any, tuple[int, Graph]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _snapshot(store: Any) -> tuple[int, Graph]:
    """The graph and the generation it is of, read in one transaction.

    Its reads are several statements; a sync of another process committing between them gave
    an edge whose node the first read had not seen (``KeyError`` in :func:`_build`).
    """
    with store.snapshot():
        return store.generation(), _build(store)


def graph_for(kb: Any) -> Graph:
    """The graph of ``kb``'s current store generation (built on first use, then cached)."""
    store = kb.store()
    generation = store.generation()
    with _LOCK:
        cached = _CACHE.get(kb)
        if cached is None or cached[0] != generation:
            cached = _snapshot(store)
            _CACHE[kb] = cached
        return cached[1]


class GraphChannel:
    """Base of the graph channels: they run after fusion, on the KB's cached graph."""

    name = ""
    after_fusion = True

    def run(self, ctx: QueryContext) -> Ranked:
        """Rank with :meth:`rank`; an empty graph (or no KB) gives an empty list."""
        if ctx.kb is None:
            return []
        graph = graph_for(ctx.kb)
        return self.rank(graph, ctx) if len(graph) else []

    def rank(self, graph: Graph, ctx: QueryContext) -> Ranked:
        """The channel's ranked ``(chunk_id, score)`` list."""
        raise NotImplementedError
