"""The MCP server over a fleet: `--fleet` serves every registered KB; cross-KB links resolve
among the served KBs only (the FAKE embedder: the contracts matter here, not semantics)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, doc_ids, make_kb
from pinakes_core.manage.fleet import Fleet
from pinakes_core.manage.registry import FleetRegistry
from pinakes_core.uri import new_ulid
from pinakes_mcp import create_server
from pinakes_mcp.launch import main
from pinakes_mcp.served import open_fleet

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fleet_dirs(tmp_path: Path) -> dict[str, Path]:
    target = new_ulid()
    papers = make_kb(
        tmp_path / "papers",
        {
            "raft.md": "# Raft paper\n\nAn understandable consensus algorithm.\n",
            "raft.md.pnk.yaml": f"id: {target}\n",
        },
        name="docs",
    )
    notes = make_kb(
        tmp_path / "notes",
        {
            "reading.md": "# Reading\n\nNotes on the consensus papers.\n",
            "reading.md.pnk.yaml": f"id: {new_ulid()}\nlinks:\n  - to: pnk://papers/{target}\n",
        },
        name="docs",  # the same [kb] name: the fleet names tell them apart
    )
    registry = FleetRegistry.load()
    registry.add(papers, name="papers")
    registry.add(notes, name="notes")
    registry.save()
    return {"papers": papers, "notes": notes}


def test_open_fleet_serves_registered_kbs_under_their_fleet_names(
    fleet_dirs: dict[str, Path], tmp_path: Path
) -> None:
    extra = make_kb(tmp_path / "extra", {"x.md": "# X\n\nx.\n"}, name="extra")
    kbs, names = open_fleet([fleet_dirs["notes"], extra])  # notes is registered already
    assert names == ["papers", "notes", None]
    assert [kb.root for kb in kbs] == [
        fleet_dirs["papers"].resolve(),
        fleet_dirs["notes"].resolve(),
        extra.resolve(),
    ]
    for kb in kbs:
        kb.close()


def test_the_command_line_needs_a_kb_or_the_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code == 2 and "--fleet" in capsys.readouterr().err


async def test_a_fleet_server_lists_searches_and_links_across(
    fleet_dirs: dict[str, Path], fake_embedder: FakeHashEmbedder
) -> None:
    fleet = Fleet.open(embedder=fake_embedder)
    fleet.sync()
    kbs = [kb for _, kb in fleet]
    reading = doc_ids(fleet_dirs["notes"])["reading.md"]
    async with Client(create_server(kbs, names=fleet.names)) as client:
        listed: Any = (await client.call_tool("pinakes_kbs", {})).structured_content
        assert [kb["name"] for kb in listed["kbs"]] == ["papers", "notes"]
        found: Any = (
            await client.call_tool("pinakes_search", {"query": "consensus", "k": 4})
        ).structured_content
        assert {hit["kb"] for hit in found["hits"]} == {"papers", "notes"}
        links: Any = (
            await client.call_tool("pinakes_links", {"doc": reading, "direction": "out"})
        ).structured_content
        assert [(n["kb"], n["path"]) for n in links["neighbours"]] == [("papers", "raft.md")]
    # Served alone, the same KB never reads the other one: the link stays unresolved.
    notes = next(kb for name, kb in fleet if name == "notes")
    async with Client(create_server([notes], names=["notes"])) as client:
        alone: Any = (
            await client.call_tool("pinakes_links", {"doc": reading, "direction": "out"})
        ).structured_content
    assert alone["neighbours"] == []
    assert [u["reason"] for u in alone["unresolved"]] == ["KB 'papers' is not in the fleet"]
    fleet.close()
