"""Shared pieces of the reliability suite: fake-embedder syncs in and out of process."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from conftest import FakeHashEmbedder
from pinakes_core import KB, SyncReport

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
#: A ~400-byte YAML alias bomb: 9**9 leaves once expanded, read as the tags (as it was found).
BOMB = (
    "a: &a [x,x,x,x,x,x,x,x,x]\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
    )
    + "tags: *i\n"
)


class SlowFakeEmbedder(FakeHashEmbedder):
    """The FAKE hash embedder, sleeping per batch so that a sync takes a while (for races)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def embed_documents(
        self, texts: Sequence[str], progress: Callable[[int], None] | None = None
    ) -> np.ndarray:
        time.sleep(self.delay)
        return super().embed_documents(texts, progress)


def remove_tree(path: Path) -> None:
    """Delete a folder tree of any depth (``shutil.rmtree`` recurses and fails past ~1,000)."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=True)


def sync(root: Path, *, rebuild: bool = False) -> SyncReport:
    """Sync ``root`` in this process with the fake embedder."""
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        return kb.sync(rebuild=rebuild)


def env() -> dict[str, str]:
    """The environment for child Python processes (tests/ importable, quiet tokenizers)."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS), str(HERE), os.environ.get("PYTHONPATH", "")]),
        "TOKENIZERS_PARALLELISM": "false",
    }


def sync_process(
    root: Path, *args: str, delay: float = 0.0, **kwargs: Any
) -> subprocess.Popen[str]:
    """Start ``fake_sync.py`` on ``root`` in another process (``--rebuild`` etc. in ``args``)."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "fake_sync.py"), str(root), "--delay", str(delay), *args],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


class StdioSession:
    """A raw JSON-RPC session with an MCP server subprocess over stdio (no SDK in between).

    Raw, so that a test can send exactly the bytes a hostile client would, and so that a
    request the server never answers shows up as a timeout instead of a hang.
    """

    def __init__(self, command: Sequence[str], *, start_timeout: float = 120.0) -> None:
        self.proc = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env(),
        )
        self._next = 0
        init = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "hostile", "version": "0"},
            },
            timeout=start_timeout,
        )
        assert init["result"]["serverInfo"]["name"] == "pinakes", init
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        # ensure_ascii: a lone surrogate goes out as a "\ud800" escape, as JSON clients send it.
        self.proc.stdin.write(json.dumps(message).encode("ascii") + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
        """Send one request; return its reply, or fail if none comes within ``timeout``."""
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no answer to {method} {params!r:.200} within {timeout} s")
            reply = json.loads(self.proc.stdout.readline() or b"null")
            assert reply is not None, "the server closed stdout"
            if reply.get("id") == self._next:
                return dict(reply)

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 30.0) -> tuple[bool, str]:
        """Call a tool; returns (is_error, the reply's text)."""
        reply = self.request("tools/call", {"name": tool, "arguments": arguments}, timeout)
        if "error" in reply:
            return True, json.dumps(reply["error"])
        result = reply["result"]
        text = "".join(part.get("text", "") for part in result.get("content", []))
        return bool(result.get("isError")), text + json.dumps(result.get("structuredContent"))

    def close(self) -> str:
        """Stop the server; returns its stderr."""
        self.proc.kill()
        _, err = self.proc.communicate(timeout=30)
        return err.decode("utf-8", "replace")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def http_server(
    root: Path, *extra: str, token: str | None = None
) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """Serve ``root`` over HTTP with ``fake_server.py`` on a free port until the block ends."""
    port = free_port()
    environment = env()
    if token:
        environment["PINAKES_MCP_TOKEN"] = token
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "fake_server.py"),
            "--kb",
            str(root),
            "--transport",
            "http",
            "--port",
            str(port),
            *extra,
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.1)
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
).encode()


def post(port: int, headers: dict[str, str], body: bytes = INITIALIZE) -> int:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
