"""``pnk``: the Pinakes command line. Commands parse input, call one core function and render it."""

import os

# Before anything imports numpy: its OpenBLAS would run the dense worker's products on every
# core and spin-wait between them, taking the core the BM25 channel runs on beside it (the
# results are the same to the bit either way; docs/benchmarks.md). This process is ours, so
# one BLAS thread is the default here; a value the user exported wins. The MCP server does
# the same.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata on first use (``pnk --help`` skips it)."""
    if name == "__version__":
        from importlib.metadata import version

        value = version("pinakes-cli")
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
