"""Issue 35 through the real MCP protocol (fastmcp's in-memory Client, the FAKE embedder):
pinakes_read takes a note's name as its wikilinks write it, and suggests near names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_mcp import create_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[KB]:
    files: dict[str, str | bytes] = {
        "decisions/0002-retry-policy.md": (
            "---\naliases: [Retry ADR]\n---\n# Retry policy\n\nRetries back off exponentially.\n"
        ),
        "index.md": "# Index\n\nSee [[0002-retry-policy]].\n",
    }
    handle = KB.open(make_kb(tmp_path / "kb", files), embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


async def test_read_takes_a_note_name_and_suggests_near_ones(kb: KB) -> None:
    async with Client(create_server([kb])) as client:
        for name in ("0002-retry-policy", "Retry ADR"):
            read = await client.call_tool("pinakes_read", {"doc": name})
            assert read.structured_content is not None
            assert read.structured_content["path"] == "decisions/0002-retry-policy.md"
        missed = await client.call_tool(
            "pinakes_read", {"doc": "0002-retry-polcy"}, raise_on_error=False
        )
    assert missed.is_error
    message = missed.content[0].text  # type: ignore[union-attr]
    assert "Did you mean 'decisions/0002-retry-policy.md'?" in message
