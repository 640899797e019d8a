"""Paid: the one path that may cost money (DESIGN §9).

``llm`` (litellm, imported lazily), ``passages`` (prompts, citations and metered calls),
``ask`` and ``deep`` (the answers), the ``ledger`` and ``budget`` windows over it,
``writeback`` (links an answer used together) and schema ``suggestions``.

May import: ``search``, ``index``, ``read``, ``manage``'s services and the package root. The
``KB`` facade never imports ``ask``, ``deep`` or ``writeback``: they drive a KB from above.
"""
