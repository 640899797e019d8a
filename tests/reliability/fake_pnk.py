"""Run the real ``pnk`` command line with the FAKE hash embedder (for fast CLI tests in a child).

Only the embedder ``KB.open`` gives a KB is replaced: argument parsing, error handling and
every command are the real ones. Usage: the same arguments as ``pnk``.
"""

from __future__ import annotations

import os
import sys

from conftest import FakeHashEmbedder
from pinakes_core import KB

_open = KB.open.__func__  # type: ignore[attr-defined]


def _open_fake(cls: type[KB], path: str | os.PathLike[str] = ".", *, embedder: object = None) -> KB:
    return _open(cls, path, embedder=embedder or FakeHashEmbedder())  # type: ignore[no-any-return]


if __name__ == "__main__":
    KB.open = classmethod(_open_fake)  # type: ignore[assignment,method-assign]
    from pinakes_cli.main import main

    sys.argv[0] = "pnk"
    main()
