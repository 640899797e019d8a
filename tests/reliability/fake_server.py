"""Run the real ``pinakes-mcp`` entry point with the FAKE hash embedder (for fast MCP tests).

Only ``open_kbs`` is replaced, so stdio and HTTP serving, argument parsing and every check in
``serve`` are the real ones. Usage: the same arguments as ``pinakes-mcp``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import pinakes_mcp.launch
import pinakes_mcp.served
from conftest import FakeHashEmbedder
from pinakes_core import KB


def _open_fake(paths: Sequence[str | os.PathLike[str]]) -> list[KB]:
    return [KB.open(path, embedder=FakeHashEmbedder()) for path in paths]


if __name__ == "__main__":
    pinakes_mcp.served.open_kbs = _open_fake  # type: ignore[assignment]
    pinakes_mcp.launch.main(sys.argv[1:])
