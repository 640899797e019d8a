"""The stdio front: answer MCP ``initialize`` at once while fastmcp and the KBs load behind it.

Importing fastmcp (and the MCP SDK's types for five protocol versions, HTTP, auth and
telemetry modules under it) costs well over the ~0.6 s a host should wait for ``initialize``.
The reply itself needs none of it: it is the server's name, version and instructions
(:mod:`pinakes_mcp.about`), its capabilities and the negotiated protocol version. So the
process takes over stdin and stdout first (this module imports only the standard library),
answers ``initialize`` itself, and meanwhile loads the server, which then reads the same
stream from the start:

- the **reader** thread reads the client's messages from the real stdin and passes every one,
  the ``initialize`` included, into a pipe that becomes the server's stdin (so fastmcp sees
  the real handshake and its session state is what it would have been);
- the **writer** thread passes the server's output to the real stdout, except fastmcp's own
  reply to that replayed ``initialize``, which is compared with the one already sent (a
  difference is logged as a warning) and dropped.

Only a plain, well-formed ``initialize`` as the first message is answered here; anything else
(another first message, unknown fields, a batch) is left to fastmcp, which then answers it as
it always did, only later. The capabilities and the version negotiation below are fastmcp's
(``mcp_types.version``), checked against it by the tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from typing import IO, Any

from pinakes_mcp.about import NAME, VERSION, instructions
from pinakes_mcp.trust import fix_surrogate_escapes

__all__ = [
    "CAPABILITIES",
    "HANDSHAKE_VERSIONS",
    "StdioFront",
    "initialize_reply",
    "negotiate",
]

log = logging.getLogger(__name__)

#: the protocol versions the MCP SDK under fastmcp negotiates through ``initialize``, oldest
#: first (``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS``).
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
#: the server's capabilities as fastmcp declares them for this server.
CAPABILITIES: dict[str, dict[str, bool]] = {
    "logging": {},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": False, "listChanged": True},
    "tools": {"listChanged": True},
}

_CLIENT_INFO_TEXT = frozenset({"name", "version", "title", "description", "websiteUrl"})


def negotiate(requested: str) -> str:
    """The protocol version to answer: the client's if the SDK speaks it, else the latest."""
    return requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]


def _plain_initialize(message: Any) -> bool:
    """Whether ``message`` is an ``initialize`` request fastmcp surely accepts as it is."""
    if not isinstance(message, dict) or set(message) != {"jsonrpc", "id", "method", "params"}:
        return False
    request_id, params = message["id"], message["params"]
    if message["jsonrpc"] != "2.0" or message["method"] != "initialize":
        return False
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return False
    if not isinstance(params, dict) or set(params) != {
        "protocolVersion",
        "capabilities",
        "clientInfo",
    }:
        return False
    client, capabilities = params["clientInfo"], params["capabilities"]
    return (
        isinstance(params["protocolVersion"], str)
        and isinstance(capabilities, dict)
        and all(isinstance(value, dict) for value in capabilities.values())
        and isinstance(client, dict)
        and {"name", "version"} <= set(client) <= _CLIENT_INFO_TEXT
        and all(isinstance(value, str) for value in client.values())
    )


def initialize_reply(message: Any, *, allow_write: bool) -> dict[str, Any] | None:
    """The reply fastmcp gives ``message`` if it is a plain ``initialize`` request, else ``None``.

    Args:
        message: one decoded JSON-RPC message.
        allow_write: whether the write tools are on (their instructions are added).
    """
    if not _plain_initialize(message):
        return None
    return {
        "jsonrpc": "2.0",
        "id": message["id"],
        "result": {
            "protocolVersion": negotiate(message["params"]["protocolVersion"]),
            "capabilities": {key: dict(value) for key, value in CAPABILITIES.items()},
            "serverInfo": {"name": NAME, "version": VERSION},
            "instructions": instructions(allow_write=allow_write),
        },
    }


def _encode(message: dict[str, Any]) -> bytes:
    # The layout fastmcp writes: compact, UTF-8, one message a line.
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class StdioFront:
    """Holds the process's stdin and stdout from start-up until the server has stopped.

    Use :meth:`possible` to see whether this process's ``sys.stdin``/``sys.stdout`` are its
    file descriptors 0 and 1 (not when a test harness replaced them), :meth:`start` before
    anything slow is imported, and :meth:`close` once the server returned. While it holds
    them, file descriptor 1 points at stderr, so a library writing to stdout cannot corrupt
    the protocol; ``sys.stdout`` is the pipe the server writes its messages to.
    """

    def __init__(self, *, allow_write: bool) -> None:
        self.allow_write = allow_write
        #: the ``initialize`` reply this front sent, until fastmcp's own one was dropped.
        self.answered: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._wire_in: IO[bytes] | None = None
        self._wire_out: IO[bytes] | None = None
        self._writer: threading.Thread | None = None

    @staticmethod
    def possible() -> bool:
        """Whether ``sys.stdin`` and ``sys.stdout`` are the process's descriptors 0 and 1."""
        try:
            return sys.stdin.fileno() == 0 and sys.stdout.fileno() == 1
        except (AttributeError, OSError, ValueError):
            return False

    def start(self) -> None:
        """Take over stdin and stdout and start the reader and writer threads."""
        sys.stdout.flush()
        self._wire_in = os.fdopen(os.dup(0), "rb")
        self._wire_out = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        feed_read, feed_write = os.pipe()
        os.dup2(feed_read, 0)
        os.close(feed_read)
        out_read, out_write = os.pipe()
        sys.stdout = open(out_write, "w", encoding="utf-8", buffering=1)  # noqa: SIM115
        feed = os.fdopen(feed_write, "wb", buffering=0)
        server_out = os.fdopen(out_read, "rb")
        reader = threading.Thread(
            target=self._read, args=(feed,), name="pinakes-stdin", daemon=True
        )
        self._writer = threading.Thread(
            target=self._write, args=(server_out,), name="pinakes-stdout", daemon=True
        )
        reader.start()
        self._writer.start()

    def close(self) -> None:
        """After the server stopped: pass on what it still wrote, then let go of stdout."""
        if self._writer is None:
            return
        with contextlib.suppress(OSError):
            sys.stdout.close()  # the writer reads to the end of the pipe, then stops
        sys.stdout = sys.__stdout__
        self._writer.join(timeout=10)
        self._writer = None

    def _send(self, data: bytes) -> None:
        assert self._wire_out is not None
        with self._lock:
            self._wire_out.write(data)
            self._wire_out.flush()

    def _read(self, feed: IO[bytes]) -> None:
        assert self._wire_in is not None
        first = True
        try:
            with feed:
                for line in iter(self._wire_in.readline, b""):
                    line = fix_surrogate_escapes(line)
                    if first:
                        first = False
                        self._answer(line)
                    feed.write(line)
        except OSError:  # the server stopped reading, or the client's stdout is gone
            pass

    def _answer(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        reply = initialize_reply(message, allow_write=self.allow_write)
        if reply is None:
            log.debug("The first message is not a plain initialize: fastmcp answers it.")
            return
        self.answered = reply  # before the server can see the request, so its reply is dropped
        self._send(_encode(reply))
        log.debug(
            "Answered initialize (protocol %s) before the server loaded.",
            reply["result"]["protocolVersion"],
        )

    def _write(self, server_out: IO[bytes]) -> None:
        broken = False
        with server_out:
            for line in iter(server_out.readline, b""):
                if self.answered is not None and self._own_reply(line):
                    continue
                if broken:
                    continue  # keep draining, or the server would block on a full pipe
                try:
                    self._send(line)
                except OSError:
                    broken = True

    def _own_reply(self, line: bytes) -> bool:
        """Whether ``line`` is fastmcp's reply to the replayed ``initialize`` (then dropped)."""
        sent = self.answered
        assert sent is not None
        try:
            message = json.loads(line)
        except ValueError:
            return False
        if not isinstance(message, dict) or "method" in message or message.get("id") != sent["id"]:
            return False
        self.answered = None
        if message == sent:
            log.debug("fastmcp's own initialize reply matches the one sent at start-up.")
        else:
            log.warning(
                "fastmcp answered initialize differently from the start-up reply: %s (sent: %s)",
                line.decode("utf-8", "replace").strip(),
                _encode(sent).decode().strip(),
            )
        return True
