"""Manage: a KB's life outside one query.

Starting and keeping a KB (the KB ``folder``, ``templates``, ``upgrade``, ``adopt``, git
``hooks``), its seed ``schema``, typed links added and followed (``linking``), the ``doctor``,
several KBs at once (``registry``, ``fleet``, ``crosskb`` links), agent writes (``writing``) and
evaluation on labelled questions (``eval``).

May import: ``search``, ``index``, ``read`` and the package root. ``fleet``, ``eval``,
``writing``, ``adopt``, ``templates`` and ``upgrade`` drive KBs from above the ``KB`` facade; the
rest are services the facade calls, and never import it.
"""
