"""The real `pinakes-mcp` executable over stdio, driven by the official MCP Python SDK client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import doc_ids, make_kb
from pinakes_mcp import __version__

pytestmark = [pytest.mark.integration, pytest.mark.model]

EXECUTABLE = Path(sys.executable).with_name("pinakes-mcp")
ALL_TOOLS = {
    "pinakes_search",
    "pinakes_read",
    "pinakes_links",
    "pinakes_kbs",
    "pinakes_recent",
    "pinakes_write_note",
    "pinakes_append",
    "pinakes_link",
}


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_kb(tmp_path_factory.mktemp("stdio") / "notes", name="notes")


def test_sdk_client_drives_every_tool_over_stdio(kb_root: Path) -> None:
    """Every tool (write tools on with --allow-write), resources and the server's version."""
    assert EXECUTABLE.exists(), f"{EXECUTABLE} is not installed (uv sync --all-packages)"
    params = StdioServerParameters(
        command=str(EXECUTABLE), args=["--kb", str(kb_root), "--allow-write"]
    )
    expected = (kb_root / "raft.md").read_text("utf-8")

    async def session() -> None:
        with anyio.fail_after(240):  # the first start syncs the KB with the real model
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                init = await client.initialize()
                assert (init.server_info.name, init.server_info.version) == ("pinakes", __version__)
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert set(tools) == ALL_TOOLS

                async def call(name: str, **args: Any) -> dict[str, Any]:
                    result = await client.call_tool(name, args)
                    assert not result.is_error, (name, result.content)
                    assert isinstance(result.structured_content, dict)
                    return result.structured_content

                found = await call("pinakes_search", query="how does raft elect a leader", k=3)
                top = found["hits"][0]
                assert top["path"] == "raft.md"
                assert top["doc_id"] == doc_ids(kb_root)["raft.md"]  # the server synced it
                read_back = await call("pinakes_read", doc=top["doc_id"], section="Safety")
                assert read_back["section"] == "Raft › Safety" and "majority" in read_back["text"]
                links = await call("pinakes_links", doc="raft.md")
                assert links["doc_id"] == top["doc_id"]
                kbs = await call("pinakes_kbs")
                assert kbs["kbs"][0]["name"] == "notes" and kbs["kbs"][0]["watching"] is True
                written = await call(
                    "pinakes_write_note", path="ideas/okapi.md", text="# Okapi\n\nokapi stripes"
                )
                assert written["synced"] is True and written["doc_id"]
                appended = await call(
                    "pinakes_append", path="ideas/okapi.md", text="forest giraffe"
                )
                assert appended["action"] == "appended"
                linked = await call(
                    "pinakes_link", src="ideas/okapi.md", dst="raft.md", rel="cites"
                )
                assert linked["action"] == "linked"
                recent = await call("pinakes_recent", limit=1)
                assert recent["documents"][0]["path"] == "ideas/okapi.md"
                again = await call("pinakes_search", query="okapi forest giraffe", k=1)
                assert again["hits"][0]["path"] == "ideas/okapi.md"
                bad = await client.call_tool("pinakes_search", {"query": "x", "k": 0})
                assert bad.is_error
                assert "'k' must be an integer from 1 to 50; got 0." in str(bad.content[0])
                listed = await client.list_resources()
                assert f"pnk://notes/{top['doc_id']}" in {str(r.uri) for r in listed.resources}
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


_PURE_FASTMCP = """
import sys
from pinakes_core import KB
from pinakes_mcp.server import create_server

server = create_server([KB.open(sys.argv[1])], allow_write=True, close_on_exit=True)
server.run(transport="stdio", show_banner=False)
"""


def _initialize(version: str, **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}},
            "clientInfo": {"name": "front-test", "version": "0"},
            **params,
        },
    }


class _Raw:
    """Raw JSON-RPC lines to and from a server process over its stdin and stdout."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def reply(self, request_id: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server closed stdout before replying"
            message = json.loads(line)
            if message.get("id") == request_id and "method" not in message:
                return dict(message)

    def finish(self) -> tuple[list[dict[str, Any]], str]:
        """Close stdin; return the messages written after the last reply, and stderr."""
        out, err = self.proc.communicate(timeout=120)
        return [json.loads(line) for line in out.splitlines() if line.strip()], err.decode()


def test_front_replies_to_initialize_as_fastmcp_does_then_hands_over(kb_root: Path) -> None:
    """The reply the front sends before fastmcp loads is fastmcp's own; the session then works."""
    asked = _initialize("2025-06-18")
    pure = _Raw([sys.executable, "-c", _PURE_FASTMCP, str(kb_root)])
    pure.send(asked)
    expected = pure.reply(1)
    pure.finish()

    front = _Raw([str(EXECUTABLE), "--kb", str(kb_root), "--allow-write", "--log-level", "DEBUG"])
    front.send(asked)
    assert front.reply(1) == expected
    front.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    front.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    listed = front.reply(2)
    assert {tool["name"] for tool in listed["result"]["tools"]} == ALL_TOOLS
    front.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "pinakes_search", "arguments": {"query": "raft leader", "k": 2}},
        }
    )
    found = front.reply(3)
    assert not found["result"].get("isError"), found
    assert found["result"]["structuredContent"]["hits"][0]["path"] == "raft.md"
    after, stderr = front.finish()
    assert after == [], "fastmcp's own reply to the replayed initialize must not reach the client"
    assert "Answered initialize (protocol 2025-06-18) before the server loaded" in stderr
    assert "fastmcp's own initialize reply matches the one sent at start-up" in stderr
    assert "differently" not in stderr


def test_front_leaves_an_unusual_first_message_to_fastmcp(kb_root: Path) -> None:
    """An initialize the front does not recognise as plain is answered by fastmcp, once."""
    front = _Raw([str(EXECUTABLE), "--kb", str(kb_root), "--log-level", "DEBUG", "--no-watch"])
    front.send(_initialize("2099-01-01", _meta={"progressToken": 9}))
    reply = front.reply(1)
    assert reply["result"]["protocolVersion"] == "2025-11-25"
    assert reply["result"]["serverInfo"] == {"name": "pinakes", "version": __version__}
    after, stderr = front.finish()
    assert after == []
    assert "The first message is not a plain initialize: fastmcp answers it." in stderr
    assert "Answered initialize" not in stderr
