"""The stdio front's own tool calls reply exactly as fastmcp does, and are never run twice.

In-process: :func:`pinakes_mcp.early.call` (what the front runs) against fastmcp's own reply,
through its client, for the same request on the same KB: content, structured content and
``isError``, tool errors included; a call whose arguments fastmcp refuses is not run by the
front at all. Over real stdio (:mod:`tests.mcp.test_mcp_stdio`'s kind): the front answers the
first search, fastmcp answers what the front cannot, each request once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client

from conftest import FakeHashEmbedder, doc_ids, make_kb
from pinakes_core import KB
from pinakes_mcp import tools
from pinakes_mcp.early import call
from pinakes_mcp.front import CACHE_ENV
from pinakes_mcp.served import Registry
from pinakes_mcp.server import build_server

EXECUTABLE = Path(sys.executable).with_name("pinakes-mcp")

FILES: dict[str, str | bytes] = {
    "raft.md": (
        "---\ntitle: Raft consensus\ntags: [consensus]\nstatus: draft\n---\n"
        "# Raft\n\nRaft elects a leader with randomized election timeouts. See "
        "[Paxos](notes/paxos.md).\n\n"
        "## Safety\n\nA candidate needs a majority of votes before it becomes leader.\n"
    ),
    "notes/paxos.md": (
        "---\ntags: [consensus]\n---\n# Paxos\n\n"
        "Paxos reaches agreement with proposers, acceptors and learners.\n"
    ),
    "runbooks/deploy.md": (
        "# Deploy\n\nRun the migration, then roll the pods one by one.\n\n"
        "## Rollback\n\nIf error E-4012 appears, roll back with the previous image tag.\n"
    ),
    "big.md": "# Big\n\n" + " ".join(f"word{i}" for i in range(40_000)) + "\n",
}

#: search arguments that succeed, fail in the tool, or are refused by argument validation.
SEARCHES: list[dict[str, Any]] = [
    {"query": "how does raft elect a leader"},
    {"query": "leader", "k": 2, "per_doc": False},
    {"query": "consensus", "tags": ["consensus"], "path": "notes/", "min_score": 0.0},
    {"query": "raft", "meta": ["status=draft"], "source_type": ["markdown"]},
    {"query": "raft", "modified_after": "7d", "modified_before": "2999-01-01"},
    {"query": "E-4012 rollback", "entities": ["E-4012"], "concepts": ["undo a deploy"]},
    {"query": "raft", "docs": ["raft.md", "notes/paxos.md"]},
    {"query": "word1 word2 word3", "k": 50},  # one long hit: the reply budget cuts its text
    {"query": "nothing matches zyzzyva", "tags": ["no-such-tag"]},
    {"query": "raft", "kb": "nope"},  # tool errors from here on
    {"query": "raft", "path": "/etc"},
    {"query": "raft", "docs": ["../outside.md"]},
    {"query": "raft", "modified_after": "last tuesday"},
    {"query": "raft", "meta": ["status=="]},
]
REFUSED: list[dict[str, Any]] = [
    {"query": "raft", "k": 0},
    {"query": "raft", "k": "many"},
    {"query": "x" * 2_001},
    {"k": 3},
    {"query": "raft", "colour": "blue"},
    {"query": "raft", "tags": [""]},
    {"query": "raft", "source_type": ["video"]},
]


def _wire(result: Any) -> dict[str, Any]:
    """A result as JSON on the wire, the timings (which differ run to run) left out."""
    data = dict(result)
    if isinstance(data.get("structuredContent"), dict):
        data["structuredContent"] = {
            k: v for k, v in data["structuredContent"].items() if k != "timings_ms"
        }
        text = json.loads(data["content"][0]["text"])
        text.pop("timings_ms")
        data["content"] = [{**data["content"][0], "text": text}]
    return data


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KB]:
    root = make_kb(tmp_path_factory.mktemp("front-calls") / "notes", FILES, name="notes")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    kb.sync()
    yield kb
    kb.close()


@pytest.fixture
def registry(notes: KB) -> Registry:
    return Registry([notes])


@pytest.fixture
async def client(registry: Registry) -> AsyncIterator[Client[Any]]:
    # legacy: the handshake (initialize) a host does over stdio, the only one the front answers
    async with Client(build_server(registry), mode="legacy") as c:
        for served in registry:
            served.ready.wait()
        yield c


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", SEARCHES)
async def test_a_search_replies_as_fastmcp_does(
    client: Client[Any], registry: Registry, arguments: dict[str, Any]
) -> None:
    theirs = await client.call_tool_mcp("pinakes_search", arguments)
    ours = call(registry, "pinakes_search", arguments)
    assert ours is not None
    wire = theirs.model_dump(mode="json", by_alias=True, exclude_none=True)
    # The SDK's model fills this in on the client's side; a 2025-06-18 reply on the wire has
    # none (the stdio test below compares real lines).
    assert wire.pop("resultType") == "complete"
    assert _wire(ours) == _wire(wire)
    # The text block is the structured content's JSON as fastmcp writes it, key order too.
    if not ours["isError"]:
        assert list(json.loads(ours["content"][0]["text"])) == list(ours["structuredContent"])


@pytest.mark.anyio
@pytest.mark.parametrize("arguments", REFUSED)
async def test_arguments_fastmcp_refuses_are_left_to_it(
    client: Client[Any], registry: Registry, arguments: dict[str, Any]
) -> None:
    theirs = await client.call_tool_mcp("pinakes_search", arguments)
    assert theirs.is_error  # fastmcp's caller-errors middleware words it
    assert call(registry, "pinakes_search", arguments) is None


def test_other_tools_and_non_objects_are_left_to_fastmcp(registry: Registry) -> None:
    for thread in registry.start_warming():
        thread.join()
    assert call(registry, "pinakes_read", {"doc": "raft.md"}) is None
    assert call(registry, "pinakes_write_note", {"path": "x.md", "text": "x"}) is None
    assert call(registry, "pinakes_search", ["raft"]) is None


# -- over real stdio ------------------------------------------------------------------------


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return (json.dumps(message) + "\n").encode()


def _search(request_id: int, **arguments: Any) -> bytes:
    return _request(request_id, "tools/call", {"name": "pinakes_search", "arguments": arguments})


class _Server:
    """A real ``pinakes-mcp`` over pipes: send lines, collect every reply by id."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by finish)
        self.proc = subprocess.Popen(
            [str(EXECUTABLE), "--kb", str(root), "--log-level", "DEBUG", "--no-watch", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,  # a file: DEBUG logs would fill a pipe nobody reads meanwhile
        )
        self.replies: dict[Any, list[dict[str, Any]]] = {}

    def send(self, *lines: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(lines))
        self.proc.stdin.flush()

    def reply(self, request_id: Any, timeout: float = 240) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while request_id not in self.replies:
            assert time.monotonic() < deadline, f"no reply to {request_id}"
            line = self.proc.stdout.readline()
            assert line, f"the server closed stdout before replying to {request_id}"
            message = json.loads(line)
            if "id" in message and "method" not in message:
                self.replies.setdefault(message["id"], []).append(message)
        return self.replies[request_id][0]

    def finish(self) -> str:
        """Close stdin; every further reply is collected; stderr is returned."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        for line in self.proc.stdout:
            message = json.loads(line)
            if "id" in message and "method" not in message:
                self.replies.setdefault(message["id"], []).append(message)
        self.proc.wait(timeout=60)
        self.log.seek(0)
        stderr = self.log.read().decode()
        self.log.close()
        assert self.proc.returncode == 0, stderr
        return stderr


HANDSHAKE = (
    _request(
        1,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "front-calls", "version": "0"},
        },
    )
    + b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n'
)


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    files = {name: text for name, text in FILES.items() if name != "big.md"}  # the real model
    root = make_kb(tmp_path_factory.mktemp("front-calls") / "notes", files, name="notes")
    subprocess.run(
        [str(EXECUTABLE.with_name("pnk")), "--kb", str(root), "sync"],
        check=True,
        capture_output=True,
    )
    return root


@pytest.mark.integration
@pytest.mark.model
def test_the_front_answers_the_first_search_and_fastmcp_the_same_later(kb_root: Path) -> None:
    """Search and tool-error replies from the front equal fastmcp's to the same requests."""
    server = _Server(kb_root)
    asked = [SEARCHES[0], SEARCHES[2], SEARCHES[9], SEARCHES[12]]
    server.send(HANDSHAKE, _request(2, "ping"))
    server.send(*(_search(10 + n, **arguments) for n, arguments in enumerate(asked)))
    for n in range(len(asked)):
        server.reply(10 + n)
    # resources/list depends on the KB's documents: only fastmcp answers it, so it loads now;
    # once it answered, every later request is fastmcp's.
    server.send(_request(3, "resources/list"))
    server.reply(3)
    server.send(*(_search(20 + n, **arguments) for n, arguments in enumerate(asked)))
    for n in range(len(asked)):
        server.reply(20 + n)
    stderr = server.finish()
    assert stderr.count("Answered tools/call pinakes_search before the server loaded.") == 4
    assert server.replies[2] == [{"jsonrpc": "2.0", "id": 2, "result": {}}]
    for n in range(len(asked)):
        (front,), (fastmcp,) = server.replies[10 + n], server.replies[20 + n]
        assert _wire(front["result"]) == _wire(fastmcp["result"]), asked[n]
    assert server.replies[10][0]["result"]["isError"] is False
    assert server.replies[12][0]["result"]["isError"] is True
    assert all(len(replies) == 1 for replies in server.replies.values())


@pytest.mark.integration
@pytest.mark.model
def test_what_the_front_cannot_answer_fastmcp_answers_once(kb_root: Path) -> None:
    """A write, a refused search and an unknown method before fastmcp loaded: each run once.

    The calls after the write follow it to fastmcp, in order; the search before it is the
    front's.
    """
    server = _Server(kb_root, "--allow-write")
    append = {"name": "pinakes_append", "arguments": {"path": "raft.md", "text": "okapi once"}}
    server.send(
        HANDSHAKE,
        _search(2, query="raft"),
        _request(3, "tools/call", append),
        _search(4, query="paxos"),
        _search(5, query="raft", k=0),
        _request(6, "no/such/method"),
    )
    replies = {n: server.reply(n) for n in range(2, 7)}
    server.send(_search(7, query="okapi"))
    found = server.reply(7)
    stderr = server.finish()
    assert stderr.count("Answered tools/call pinakes_search before the server loaded.") == 1
    assert replies[2]["result"]["isError"] is False
    assert replies[3]["result"]["isError"] is False, replies[3]
    assert (kb_root / "raft.md").read_text("utf-8").count("okapi once") == 1
    assert replies[4]["result"]["structuredContent"]["hits"][0]["path"] == "notes/paxos.md"
    assert replies[5]["result"]["content"][0]["text"] == (
        "pinakes_search: 'k' must be an integer from 1 to 50; got 0."
    )
    assert replies[6]["error"]["code"] == -32601
    assert found["result"]["structuredContent"]["hits"][0]["doc_id"] == doc_ids(kb_root)["raft.md"]
    assert all(len(replies) == 1 for replies in server.replies.values())


@pytest.mark.integration
@pytest.mark.model
def test_the_lists_fastmcp_gave_are_kept_and_a_stale_copy_is_not_believed(
    kb_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools/list and kin: fastmcp's reply, kept; given from the copy while nothing changed."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "kept"))
    lists = {2: "tools/list", 3: "prompts/list", 4: "resources/templates/list"}

    def run() -> tuple[dict[int, dict[str, Any]], str]:
        server = _Server(kb_root)
        server.send(HANDSHAKE, *(_request(n, method) for n, method in lists.items()))
        replies = {n: server.reply(n) for n in lists}
        return replies, server.finish()

    first, stderr = run()
    assert "with fastmcp's reply kept" not in stderr
    assert len(list((tmp_path / "kept").iterdir())) == 3
    again, stderr = run()
    assert again == first
    for method in lists.values():
        assert f"Answered {method} with fastmcp's reply kept" in stderr, method
    assert "Starting MCP server" not in stderr  # nothing in this session needed fastmcp
    # A module the lists came from changes (an edit to an editable install): not believed.
    module = Path(tools.__file__)
    before = module.stat()
    try:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
        stale, stderr = run()
    finally:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert stale == first
    assert "with fastmcp's reply kept" not in stderr


@pytest.mark.integration
@pytest.mark.model
def test_a_search_during_a_first_sync_is_left_to_fastmcp(tmp_path: Path) -> None:
    """A never-synced KB: fastmcp waits for its first sync and answers; the front does not."""
    files = {name: text for name, text in FILES.items() if name != "big.md"}
    root = make_kb(tmp_path / "fresh", files, name="fresh")
    server = _Server(root)
    server.send(HANDSHAKE, _search(2, query="how does raft elect a leader"), _request(3, "ping"))
    found = server.reply(2)
    pong = server.reply(3)
    stderr = server.finish()
    assert "syncing" in stderr
    assert "Answered tools/call" not in stderr
    assert found["result"]["structuredContent"]["hits"][0]["path"] == "raft.md"
    assert pong["result"] == {}
    assert all(len(replies) == 1 for replies in server.replies.values())
