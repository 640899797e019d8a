"""The real `pinakes-mcp` executable over stdio, driven by the official MCP Python SDK client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import doc_ids, make_kb

pytestmark = [pytest.mark.integration, pytest.mark.model]

EXECUTABLE = Path(sys.executable).with_name("pinakes-mcp")


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_kb(tmp_path_factory.mktemp("stdio") / "notes", name="notes")


def test_sdk_client_initializes_lists_searches_and_reads(kb_root: Path) -> None:
    assert EXECUTABLE.exists(), f"{EXECUTABLE} is not installed (uv sync --all-packages)"
    params = StdioServerParameters(command=str(EXECUTABLE), args=["--kb", str(kb_root)])

    expected = (kb_root / "raft.md").read_text("utf-8")

    async def session() -> None:
        with anyio.fail_after(180):  # the first start syncs the KB with the real model
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                init = await client.initialize()
                assert init.server_info.name == "pinakes"
                tools = await client.list_tools()
                assert {tool.name for tool in tools.tools} == {
                    "pinakes_search",
                    "pinakes_read",
                    "pinakes_links",
                    "pinakes_kbs",
                }
                found = await client.call_tool(
                    "pinakes_search", {"query": "how does raft elect a leader", "k": 3}
                )
                assert not found.is_error
                assert isinstance(found.structured_content, dict)
                top = found.structured_content["hits"][0]
                assert top["path"] == "raft.md"
                assert top["doc_id"] == doc_ids(kb_root)["raft.md"]  # the server synced it
                resource = await client.read_resource(f"pnk://notes/{top['doc_id']}")
                (content,) = resource.contents
                assert getattr(content, "text", None) == expected

    anyio.run(session)


def test_stdout_carries_nothing_but_the_protocol(kb_root: Path) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"},
        },
    }
    proc = subprocess.run(
        [str(EXECUTABLE), "--kb", str(kb_root), "--log-level", "DEBUG"],
        input=json.dumps(initialize) + "\n",
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"no reply on stdout; stderr:\n{proc.stderr[-2000:]}"
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
    assert json.loads(lines[0])["result"]["serverInfo"]["name"] == "pinakes"
    assert "pinakes-mcp" in proc.stderr, "logs belong on stderr"
