"""Search: a query to hits.

The ``searcher`` is a KB's search side: it checks a request, keeps what queries share per
store generation and runs the recipe. ``retrieval`` is the recipe: the ``channels`` (with their
``arguments`` checked and filters parsed, ``when`` for times), over the query's ``context``, give
evidence, ``fusion`` weighs and combines it, the ``reader`` (``reading``) reranks the head,
``hits`` folds and groups the result, ``confidence`` (fitted by ``calibration`` on
``synthetic`` queries) says whether the KB knows, and ``notes`` explains an empty result.

May import: ``index``, ``read`` and the package root's base modules. Never ``paid``,
``manage`` or the ``KB`` facade.
"""
