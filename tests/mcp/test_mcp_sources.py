"""MCP with PDF sources (issue 18): source_type in pinakes_search, pages in pinakes_read."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_mcp import create_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pdf"
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client[Any]]:
    root = make_kb(tmp_path / "papers", {"notes.md": "# Notes\n\nReplicas disagree.\n"}, "papers")
    shutil.copy(FIXTURES / "two-column.pdf", root / "paper.pdf")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    async with Client(create_server([kb])) as c:
        yield c


async def call(client: Client[Any], tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_search_filters_by_source_type_and_cites_pages(client: Client[Any]) -> None:
    found = await call(client, "pinakes_search", query="lighthouse keeper", source_type=["pdf"])
    assert found["hits"] and {h["path"] for h in found["hits"]} == {"paper.pdf"}
    top = found["hits"][0]
    assert (top["page_start"], top["page_end"], top["source_type"]) == (3, 3, "pdf")
    notes = await call(client, "pinakes_search", query="replicas", source_type=["markdown"])
    assert {h["path"] for h in notes["hits"]} == {"notes.md"}
    assert "page_start" not in notes["hits"][0]


async def test_read_takes_a_page_range(client: Client[Any]) -> None:
    page = await call(client, "pinakes_read", doc="paper.pdf", page_start=3)
    assert page["text"].startswith("[page 3]") and "[page 4]" not in page["text"]
    assert (page["pages"], page["page_count"]) == ([3, 3], 4)
    two = await call(client, "pinakes_read", doc="paper.pdf", page_start=2, page_end=3)
    assert two["pages"] == [2, 3] and "[page 2]" in two["text"] and "[page 3]" in two["text"]
    result = await client.call_tool(
        "pinakes_read", {"doc": "notes.md", "page_start": 1}, raise_on_error=False
    )
    assert result.is_error and "has no pages" in str(result.content[0].text)
