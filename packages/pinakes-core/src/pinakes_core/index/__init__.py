"""Index: documents to the derived store.

The incremental ``sync`` (which plans what to read), its ``preparation`` (one file read into a
document) and ``writer`` (embedded and written), and what it writes: ``chunking`` (with the
``packer`` packing a body's lines into chunks) and ``tokens``, the SQLite ``store`` and the
store contract (``backend``; ``pgstore`` for PostgreSQL), the ``lexical`` (tantivy) and ``dense``
(vector) indexes, ``bm25`` ranking over the full-text index, the ``embedding`` models, the sync
``lock``, file ``watching``, and the FTS5 text rules shared by index and query time
(``query``). Around a KB's sync: ``refresh`` (a read-only store refused, the side indexes
kept, a full disk said plainly). Reading the index back: the ``catalogue`` (a reference to a
document, the documents listed, their links), a document's ``views`` (its text sliced by lines,
section or pages) and its ``status``.

May import: ``read`` and the package root's base modules. Never ``search``, ``paid``,
``manage`` or the ``KB`` facade.
"""
