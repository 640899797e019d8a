"""The MCP tools with the real default embedding model on the bundled example KB."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from pinakes_core import KB
from pinakes_mcp import create_server

pytestmark = [pytest.mark.anyio, pytest.mark.model]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> KB:
    target = tmp_path_factory.mktemp("mcp-model") / "distsys-notes"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pinakes"))
    return KB.open(target)


@pytest.fixture
async def client(example: KB) -> AsyncIterator[Client[Any]]:
    async with Client(create_server([example])) as c:
        yield c


async def test_search_answers_with_a_calibrated_confidence(client: Client[Any]) -> None:
    answered = (
        await client.call_tool("pinakes_search", {"query": "how is a new leader chosen in raft"})
    ).structured_content
    assert answered is not None
    assert answered["hits"][0]["path"].startswith("consensus/")
    assert any(hit["path"] == "consensus/raft.md" for hit in answered["hits"][:3])
    assert answered["confidence"] is not None and 0.0 <= answered["confidence"] <= 1.0
    assert answered["abstain"] is False
    unrelated = (
        await client.call_tool("pinakes_search", {"query": "best sourdough bread hydration ratio"})
    ).structured_content
    assert unrelated is not None and unrelated["confidence"] is not None
    assert unrelated["confidence"] < answered["confidence"]


async def test_search_then_read_the_top_document(client: Client[Any], example: KB) -> None:
    found = (
        await client.call_tool("pinakes_search", {"query": "vector clocks causality", "k": 3})
    ).structured_content
    assert found is not None
    top = found["hits"][0]
    read = (await client.call_tool("pinakes_read", {"doc": top["doc_id"]})).structured_content
    assert read is not None
    assert read["path"] == top["path"]
    assert read["text"] == (example.root / top["path"]).read_text("utf-8")
