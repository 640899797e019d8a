"""Pinakes NER plugin (opt-in): entity nodes and mention edges from a local spaCy model.

It registers with pinakes-core through the ``pinakes`` entry-point group (``pinakes_ner.plugin``)
and does nothing until a KB sets ``[ner] enabled = true`` in ``pinakes.toml``. Then each sync
runs spaCy's small English pipeline on new chunk texts, keeps the entities per text hash,
and derives entity nodes (near-duplicates merged) with ``mentions`` edges to the chunks that
name them; queries that name an entity seed Personalized PageRank from it and get it as an
automatic ``entities=`` term; ``links`` lists documents that name the same entities.
"""

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    """``__version__``, read from the installed metadata on first use (``pnk`` starts without it)."""
    if name == "__version__":
        from importlib.metadata import version

        value = version("pinakes-ner")
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
