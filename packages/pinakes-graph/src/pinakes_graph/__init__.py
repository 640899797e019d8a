"""Pinakes graph plugin: structural edges, graph channels and the links API.

This distribution registers with pinakes-core through the ``pinakes`` entry-point group.
In this release it is a skeleton: it registers no channels yet.
"""

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("pinakes-graph")
