"""Pinakes NER plugin (opt-in): entity nodes and mentions edges from a local spaCy model.

In this release it is a skeleton that builds and imports; it registers nothing.
"""

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("pinakes-ner")
