"""``pnk``: the Pinakes command line. Commands parse input, call one core function and render it."""

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("pinakes-cli")
