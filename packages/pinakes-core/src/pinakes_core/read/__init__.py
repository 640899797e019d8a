"""Read: a KB folder to documents.

Everything that turns files on disk into what the index stores, and nothing that writes the
index: discovery and intake limits (``intake``, ``documents``, ``sources``), the formats
(``markup``, ``mdx``, ``containers``, ``code``, ``pdf`` and its ``extraction`` cache), sidecars and
their YAML edits (``sidecar``, ``_yamledit``), document identity (``identity``), links found in
text (``links``) and their ``resolution`` to documents, ``frontmatter`` and its fields (``meta``),
a Markdown body's ``blocks``, sections and line slices (``sections``) and the
forge addresses of the KB's own files (``forge``).

May import: the package root's base modules (``errors``, ``uri``, ``config``, ``derived``,
``models``). Never ``index``, ``search``, ``paid``, ``manage`` or the ``KB`` facade.
"""
