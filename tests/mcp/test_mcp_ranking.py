"""pinakes_search ranking (issue 9) through the real MCP protocol: titles in hits, per_doc,
min_score, and multi-KB merges by score with the real embedding model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastmcp import Client

from conftest import make_kb
from pinakes_core import KB
from pinakes_mcp import create_server

pytestmark = [pytest.mark.anyio, pytest.mark.model]

NOTES: dict[str, str | bytes] = {
    "raft.md": (
        "---\ntitle: Raft consensus\n---\n# Raft\n\nRaft elects a leader with randomized "
        "election timeouts.\n\n## Log replication\n\nThe leader appends entries and replicates "
        "the log to followers.\n\n## Safety\n\nA candidate needs a majority of votes before it "
        "becomes leader.\n"
    ),
    "paxos.md": "# Paxos\n\nPaxos reaches agreement with proposers, acceptors and learners.\n",
    "leases.md": "# Leases\n\nA lease lets the leader answer reads until its clock runs out.\n",
    "election.md": (
        "# Leader election\n\nServers vote for a candidate; the one with a majority becomes the "
        "leader until its term ends.\n"
    ),
}
RECIPES: dict[str, str | bytes] = {
    "bread.md": "# Sourdough\n\nFeed the starter, fold the dough every hour, bake at 240 °C.\n",
    "soup.md": "# Tomato soup\n\nRoast the tomatoes with garlic, then blend with stock.\n",
}


def structured(result: Any) -> dict[str, Any]:
    data = result.structured_content
    assert isinstance(data, dict)
    return data


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[KB]]:
    root = tmp_path_factory.mktemp("mcp-ranking")
    opened = []
    for name, files in (("notes", NOTES), ("recipes", RECIPES)):
        kb = KB.open(make_kb(root / name, files, name=name))
        kb.sync()
        opened.append(kb)
    yield opened
    for kb in opened:
        kb.close()


async def test_an_unrelated_kb_cannot_take_second_place(kbs: list[KB]) -> None:
    async with Client(create_server(kbs)) as client:
        merged = structured(
            await client.call_tool("pinakes_search", {"query": "how is a leader elected?", "k": 4})
        )
        recipes = structured(
            await client.call_tool(
                "pinakes_search", {"query": "how is a leader elected?", "kb": "recipes", "k": 4}
            )
        )
    kbs_in_order = [hit["kb"] for hit in merged["hits"]]
    assert kbs_in_order[:2] == ["notes", "notes"]
    assert recipes["hits"][0]["score"] < merged["hits"][1]["score"]
    scores = [hit["score"] for hit in merged["hits"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)
    assert all(hit["title"] for hit in merged["hits"])


async def test_documents_by_default_as_the_cli_lists_them(kbs: list[KB]) -> None:
    # k=3 returned three passages of raft.md, hiding the other notes the CLI shows (issue 35).
    async with Client(create_server(kbs[:1])) as client:
        default = structured(
            await client.call_tool("pinakes_search", {"query": "leader elected by votes", "k": 3})
        )
        passages = structured(
            await client.call_tool(
                "pinakes_search", {"query": "leader elected by votes", "k": 3, "per_doc": False}
            )
        )
    paths = [hit["path"] for hit in default["hits"]]
    assert len(paths) == len(set(paths)) == 3
    assert [hit["path"] for hit in passages["hits"]].count("raft.md") >= 2
    assert all("passages" not in hit or not hit["passages"] for hit in passages["hits"])


async def test_per_doc_min_score_and_titles(kbs: list[KB]) -> None:
    async with Client(create_server(kbs[:1])) as client:
        per_doc = structured(
            await client.call_tool("pinakes_search", {"query": "leader", "k": 3, "per_doc": True})
        )
        strict = structured(
            await client.call_tool("pinakes_search", {"query": "leader", "min_score": 0.99})
        )
        bad = await client.call_tool(
            "pinakes_search", {"query": "leader", "min_score": 3}, raise_on_error=False
        )
    assert len({hit["doc_id"] for hit in per_doc["hits"]}) == len(per_doc["hits"]) == 3
    raft = next(hit for hit in per_doc["hits"] if hit["path"] == "raft.md")
    assert raft["title"] == "Raft consensus"
    assert raft["passages"] and all(p["score"] <= raft["score"] for p in raft["passages"])
    assert strict["hits"] == []
    assert bad.is_error
