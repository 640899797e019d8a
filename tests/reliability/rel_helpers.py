"""Shared pieces of the reliability suite: fake-embedder syncs in and out of process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conftest import FakeHashEmbedder
from pinakes_core import KB, SyncReport

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent


class SlowFakeEmbedder(FakeHashEmbedder):
    """The FAKE hash embedder, sleeping per batch so that a sync takes a while (for races)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        time.sleep(self.delay)
        return super().embed_documents(texts, progress)


def remove_tree(path: Path) -> None:
    """Delete a folder tree of any depth (``shutil.rmtree`` recurses and fails past ~1,000)."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=True)


def sync(root: Path, *, rebuild: bool = False) -> SyncReport:
    """Sync ``root`` in this process with the fake embedder."""
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        return kb.sync(rebuild=rebuild)


def env() -> dict[str, str]:
    """The environment for child Python processes (tests/ importable, quiet tokenizers)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(HERE), os.environ.get("PYTHONPATH", "")]),
        "TOKENIZERS_PARALLELISM": "false",
    }


def sync_process(
    root: Path, *args: str, delay: float = 0.0, **kwargs: Any
) -> subprocess.Popen[str]:
    """Start ``fake_sync.py`` on ``root`` in another process (``--rebuild`` etc. in ``args``)."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "fake_sync.py"), str(root), "--delay", str(delay), *args],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )
