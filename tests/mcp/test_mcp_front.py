"""The stdio front answers `initialize` exactly as fastmcp would, and leaves the rest to it.

The in-process checks compare the front's reply with the reply fastmcp's own client receives
from the server; the subprocess checks (in test_mcp_stdio.py) compare the two over real stdio.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    KNOWN_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
)

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_mcp import create_server
from pinakes_mcp.front import HANDSHAKE_VERSIONS, initialize_reply, negotiate

EXECUTABLE = Path(sys.executable).with_name("pinakes-mcp")


def request(version: str = "2025-06-18", **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
            "clientInfo": {"name": "front-test", "version": "1.0"},
            **params,
        },
    }


def test_versions_are_negotiated_as_the_sdk_does() -> None:
    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == HANDSHAKE_VERSIONS
    for asked in (*KNOWN_PROTOCOL_VERSIONS, "1999-01-01", "latest", ""):
        expected = asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        assert negotiate(asked) == expected, asked
        reply = initialize_reply(request(asked), allow_write=False)
        assert reply is not None and reply["result"]["protocolVersion"] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("allow_write", [False, True])
async def test_reply_is_the_one_fastmcp_sends(tmp_path: Path, allow_write: bool) -> None:
    """Capabilities, serverInfo and instructions: what fastmcp's client receives, field by field."""
    kb = KB.open(make_kb(tmp_path / "kb", name="notes"), embedder=FakeHashEmbedder())
    try:
        async with Client(create_server([kb], allow_write=allow_write), mode="legacy") as client:
            received = client.initialize_result
        assert received is not None
        wire = received.model_dump(mode="json", by_alias=True, exclude_none=True)
        ours = initialize_reply(request(received.protocol_version), allow_write=allow_write)
        assert ours is not None
        assert ours["result"] == wire
        assert ours["id"] == 7 and ours["jsonrpc"] == "2.0"
        assert ("Writing is on" in ours["result"]["instructions"]) is allow_write
    finally:
        kb.close()


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        [request()],  # a batch
        {**request(), "id": True},
        {**request(), "id": None},
        {**request(), "jsonrpc": "1.0"},
        {**request(), "extra": 1},
        request(_meta={"progressToken": 1}),
        request(clientInfo={"name": "x"}),
        request(clientInfo={"name": "x", "version": "1", "icons": []}),
        request(clientInfo={"name": "x", "version": 1}),
        request(capabilities={"roots": True}),
        request(capabilities=[]),
        {
            **request(),
            "params": {"protocolVersion": 20250618, "capabilities": {}, "clientInfo": {}},
        },
    ],
)
def test_anything_but_a_plain_initialize_is_left_to_fastmcp(message: Any) -> None:
    assert initialize_reply(message, allow_write=False) is None


def test_string_ids_are_echoed() -> None:
    reply = initialize_reply({**request(), "id": "abc"}, allow_write=False)
    assert reply is not None and reply["id"] == "abc"


@pytest.mark.integration
def test_a_bad_kb_still_stops_the_real_server_with_exit_1(tmp_path: Path) -> None:
    """The front may have answered initialize; the KB error still ends the process cleanly."""
    done = subprocess.run(
        [str(EXECUTABLE), "--kb", str(tmp_path)],
        input=json.dumps(request()) + "\n",
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 1
    assert "pinakes-mcp: error:" in done.stderr and "No pinakes.toml" in done.stderr
    for line in done.stdout.splitlines():  # at most the initialize reply, nothing else
        assert json.loads(line)["result"]["serverInfo"]["name"] == "pinakes"


def test_the_front_door_imports_no_framework_or_engine() -> None:
    """What runs before the front answers: none of fastmcp, the SDK, pydantic, numpy or core."""
    code = (
        "import sys, pinakes_mcp.launch, pinakes_mcp.front; "
        "heavy = ('fastmcp', 'mcp', 'mcp_types', 'pydantic', 'numpy', 'pinakes_core', 'anyio'); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
