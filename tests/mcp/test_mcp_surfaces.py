"""Issue 11 through fastmcp's in-memory Client: write tools, recent, paged resources, start-up
progress, server version, filters, notes and caller-error logging. FAKE hash embedder."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_mcp import __version__, create_server
from pinakes_mcp.listing import PAGE_SIZE

pytestmark = pytest.mark.anyio

FILES: dict[str, str | bytes] = {
    "raft.md": "---\nstatus: draft\n---\n# Raft\n\nRaft elects a leader.\n\n## Safety\n\nMajority votes.\n",
    "paxos.md": "---\nstatus: done\n---\n# Paxos\n\nPaxos reaches agreement.\n",
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def kb(tmp_path: Path) -> KB:
    handle = KB.open(make_kb(tmp_path / "notes", FILES, name="notes"), embedder=FakeHashEmbedder())
    handle.sync()
    return handle


@pytest.fixture
async def writer(kb: KB) -> AsyncIterator[Client[Any]]:
    async with Client(create_server([kb], allow_write=True)) as client:
        yield client


async def call(client: Client[Any], tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def fails(client: Client[Any], tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args, raise_on_error=False)
    assert result.is_error, f"{tool}({args}) should have failed"
    return str(result.content[0].text)


async def test_write_tools_are_opt_in_and_annotated(kb: KB, writer: Client[Any]) -> None:
    async with Client(create_server([kb])) as reader:
        names = {tool.name for tool in await reader.list_tools()}
    assert "pinakes_write_note" not in names and "pinakes_recent" in names
    tools = {tool.name: tool for tool in await writer.list_tools()}
    hints = {
        name: (
            t.annotations.read_only_hint,
            t.annotations.destructive_hint,
            t.annotations.idempotent_hint,
        )
        for name, t in tools.items()
        if t.annotations is not None
    }
    assert hints["pinakes_write_note"] == (False, True, True)
    assert hints["pinakes_append"] == (False, False, False)
    assert hints["pinakes_link"] == (False, False, True)
    assert hints["pinakes_recent"] == (True, False, True)
    assert all(tools[n].annotations.open_world_hint is False for n in hints)  # type: ignore[union-attr]


async def test_write_note_is_searchable_when_the_call_returns(kb: KB, writer: Client[Any]) -> None:
    result = await call(
        writer, "pinakes_write_note", path="ideas/zebra.md", text="# Zebra\n\nzebra stripes"
    )
    assert (result["action"], result["synced"], result["path"]) == (
        "created",
        True,
        "ideas/zebra.md",
    )
    assert result["doc_id"]
    found = await call(writer, "pinakes_search", query="zebra stripes", k=1)
    assert found["hits"][0]["path"] == "ideas/zebra.md"
    again = await fails(writer, "pinakes_write_note", path="ideas/zebra.md", text="other")
    assert "already exists" in again and "overwrite=true" in again
    replaced = await call(
        writer, "pinakes_write_note", path="ideas/zebra.md", text="# Zebra\n\nokapi", overwrite=True
    )
    assert replaced["action"] == "overwritten" and replaced["doc_id"] == result["doc_id"]
    assert (await call(writer, "pinakes_search", query="okapi", k=1))["hits"][0][
        "path"
    ] == "ideas/zebra.md"


async def test_a_written_note_the_sync_leaves_out_says_why(kb: KB, writer: Client[Any]) -> None:
    # A note written into a .gitignored folder came back with doc_id null, synced false and
    # no note at all: the agent could not tell what went wrong.
    (kb.root / ".gitignore").write_text(".pinakes/\nbuild/\n", "utf-8")
    result = await call(writer, "pinakes_write_note", path="build/x.md", text="# X\n\nxeno")
    assert (result["action"], result["synced"], result["doc_id"]) == ("created", False, None)
    assert "left it out" in result["notes"][0] and ".gitignore" in result["notes"][0]


@pytest.mark.parametrize(
    ("path", "complaint"),
    [
        ("../escape.md", "climbs out of the KB"),
        ("/tmp/escape.md", "absolute path"),
        ("~/escape.md", "absolute path"),
        (".git/config.md", "hidden or package folder"),
        ("site/node_modules/x.md", "hidden or package folder"),  # never indexed
        (".hidden.md", "hidden or package folder"),
        ("raft.md.pnk.yaml", "sidecar"),
        ("data.json", "not a document this KB indexes"),
        ("file:///etc/passwd", "not a pnk:// URI"),
    ],
)
async def test_writes_are_confined_like_reads(
    kb: KB, writer: Client[Any], path: str, complaint: str
) -> None:
    assert complaint in await fails(writer, "pinakes_write_note", path=path, text="x")
    assert not (kb.root.parent / "escape.md").exists()


async def test_append_and_link(kb: KB, writer: Client[Any]) -> None:
    appended = await call(
        writer, "pinakes_append", path="raft.md", text="Terms fence old leaders.", section="Raft"
    )
    assert (appended["action"], appended["section"], appended["synced"]) == (
        "appended",
        "Raft",
        True,
    )
    text = (kb.root / "raft.md").read_text("utf-8")
    assert text.endswith("Majority votes.\n\nTerms fence old leaders.\n")
    assert (await call(writer, "pinakes_search", query="terms fence old leaders", k=1))["hits"][0][
        "path"
    ] == "raft.md"
    linked = await call(writer, "pinakes_link", src="raft.md", dst="paxos.md", rel="Builds On")
    assert linked["action"] == "linked" and linked["synced"] is True
    assert "rel: builds-on" in (kb.root / "raft.md.pnk.yaml").read_text("utf-8")
    read = await call(writer, "pinakes_read", doc="raft.md")
    assert any(link["rel"] == "builds-on" and link["dst_doc"] for link in read["links"])
    assert "already links" in await fails(
        writer, "pinakes_link", src="raft.md", dst="paxos.md", rel="builds-on"
    )
    assert "does not exist" in await fails(writer, "pinakes_append", path="nope.md", text="x")


async def test_recent_lists_newest_first_paged(kb: KB, writer: Client[Any]) -> None:
    await call(writer, "pinakes_write_note", path="newest.md", text="# Newest\n\nfresh")
    page = await call(writer, "pinakes_recent", limit=2)
    assert page["documents"][0]["path"] == "newest.md" and page["total"] == 3
    assert page["next_offset"] == 2
    rest = await call(writer, "pinakes_recent", limit=2, offset=2)
    assert len(rest["documents"]) == 1 and rest["next_offset"] is None


async def test_resources_list_every_document_paged(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"n{i:03}.md": f"# Note {i}\n\nbody {i}\n" for i in range(PAGE_SIZE + 5)
    }
    kb = KB.open(make_kb(tmp_path / "many", files, name="many"), embedder=FakeHashEmbedder())
    kb.sync()
    async with Client(create_server([kb])) as client:
        await client.call_tool("pinakes_kbs", {})  # waits for the start-up warm-up
        first = await client.list_resources_mcp()
        assert len(first.resources) == PAGE_SIZE and first.next_cursor
        second = await client.list_resources_mcp(cursor=first.next_cursor)
        assert len(second.resources) == 5 and second.next_cursor is None
        uri = str(second.resources[0].uri)
        assert uri.startswith("pnk://many/")
        content = await client.read_resource(uri)
        assert getattr(content[0], "text", "").startswith("# Note")


class SlowFakeEmbedder(FakeHashEmbedder):
    """A FAKE embedder that takes its time, so a start-up sync is still running when a tool
    call arrives (semantics do not matter; only the timing does)."""

    def embed_documents(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        time.sleep(1.5)
        return super().embed_documents(texts, progress)


async def test_first_sync_reports_mcp_progress(tmp_path: Path) -> None:
    kb = KB.open(make_kb(tmp_path / "fresh", FILES, name="fresh"), embedder=SlowFakeEmbedder())
    assert not kb.synced
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(create_server([kb])) as client:
        result = await client.call_tool(
            "pinakes_search", {"query": "raft leader"}, progress_handler=on_progress
        )
    assert result.structured_content["hits"][0]["path"] == "raft.md"  # type: ignore[index]
    assert seen, "the waiting call relayed the start-up sync's progress"
    assert all("KB 'fresh' first sync" in (message or "") for _, _, message in seen)


async def test_server_info_is_ours_and_filters_work(kb: KB) -> None:
    async with Client(create_server([kb])) as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("pinakes", __version__)
        draft = await call(
            client, "pinakes_search", query="leader agreement", meta=["status=draft"]
        )
        assert {h["path"] for h in draft["hits"]} == {"raft.md"}
        only = await call(client, "pinakes_search", query="leader agreement", docs=["paxos.md"])
        assert {h["path"] for h in only["hits"]} == {"paxos.md"}
        none = await call(client, "pinakes_search", query="leader", modified_before="2000-01-01")
        assert none["hits"] == [] and "date range" in none["note"]
        tagged = await call(client, "pinakes_search", query="leader", tags=["nope"])
        assert "No document has the tag 'nope'" in tagged["note"]
        assert "not a date" in await fails(
            client, "pinakes_search", query="x", modified_after="soon"
        )
        assert "status exists" not in await fails(
            client, "pinakes_search", query="x", meta=["bad key"]
        )
        section = await call(client, "pinakes_read", doc="raft.md", start_line=4, end_line=6)
        assert section["lines"] == [4, 6] and section["text"].startswith("# Raft")


async def test_caller_mistakes_are_logged_as_such(kb: KB, caplog: pytest.LogCaptureFixture) -> None:
    async with Client(create_server([kb])) as client:
        with caplog.at_level(logging.INFO):
            await fails(client, "pinakes_search", query="x", k=0)
            await fails(client, "pinakes_read", doc="missing.md")
    ours = [r.getMessage() for r in caplog.records if r.name == "pinakes_mcp.errors"]
    assert any("'k' must be an integer from 1 to 50; got 0." in m for m in ours)
    assert any("No document 'missing.md'" in m for m in ours)
    loud = [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and "Error calling tool" in r.getMessage()
    ]
    assert loud == []
