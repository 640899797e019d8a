"""The stdio front: answer MCP ``initialize`` at once, and a first search, before fastmcp loads.

Importing fastmcp (and the MCP SDK's types for five protocol versions, HTTP, auth and
telemetry modules under it) costs well over the ~0.6 s a host should wait for ``initialize``,
and most of the time to a first search. Neither reply needs it: ``initialize``'s is the
server's name, version and instructions (:mod:`pinakes_mcp.about`), its capabilities and the
negotiated protocol version; a search's is ``pinakes_search``'s body run on the open KBs
(:mod:`pinakes_mcp.early`). So the process takes over stdin and stdout first (this module
imports only the standard library), answers what it can itself, and meanwhile opens the KBs;
fastmcp is imported once the front has nothing to do (:meth:`StdioFront.wait_for_turn`),
then reads the same stream:

- the **reader** thread reads the client's messages from the real stdin. The handshake
  (``initialize`` and ``notifications/initialized``) is passed into the pipe that becomes the
  server's stdin (so fastmcp's session state is what it would have been); so is every message
  the front does not answer itself, in the order it came. A message the front answered is
  never passed on, so no call runs twice. Until :meth:`StdioFront.hand_over` the front answers
  ``ping``, the lists of :data:`KEPT_LISTS` from fastmcp's own reply kept at an earlier start
  (:mod:`pinakes_core.kept`; none kept or a stale one: fastmcp answers, and its reply is
  kept), and a ``tools/call`` of a tool in :data:`pinakes_mcp.early.TOOLS` whose arguments
  validate, once the KBs are warm (not while a KB's first sync runs, nor while one warms up
  for a request that asks for progress); once it passed a
  tool call on (a write, a refused search), the calls after it follow it to fastmcp;
- the **writer** thread passes the server's output to the real stdout, except fastmcp's own
  reply to the replayed ``initialize``, which is compared with the one already sent (a
  difference is logged as a warning) and dropped.

Only a plain, well-formed ``initialize`` as the first message is answered here; anything else
(another first message, unknown fields, a batch) is left to fastmcp, which then answers it and
everything after it as it always did, only later. The capabilities and the version negotiation
below are fastmcp's (``mcp_types.version``), checked against it by the tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from pinakes_mcp.about import NAME, VERSION, instructions
from pinakes_mcp.trust import fix_surrogate_escapes

if TYPE_CHECKING:
    from pinakes_mcp.served import Registry

__all__ = [
    "CACHE_ENV",
    "CAPABILITIES",
    "HANDSHAKE_VERSIONS",
    "IDLE_S",
    "KEPT_LISTS",
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

#: the lists a host asks for at start whose reply depends only on the installed code and the
#: server's options (``resources/list`` names the KBs' documents: never kept).
KEPT_LISTS = ("tools/list", "prompts/list", "resources/templates/list")
#: the folder of the kept lists (default: ``mcp-front`` in Pinakes' user cache folder); set to
#: an empty string, nothing is kept or read.
CACHE_ENV = "PINAKES_MCP_FRONT_CACHE"
_FORMAT = "pinakes-mcp-front 1"

#: seconds without a message (and with none being answered) after which fastmcp loads.
IDLE_S = 0.25

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
    anything slow is imported, :meth:`attach` once the KBs are open, :meth:`wait_for_turn`
    before importing fastmcp, :meth:`hand_over` just before the server reads, and
    :meth:`close` once the server returned. While it holds them, file descriptor 1 points at
    stderr, so a library writing to stdout cannot corrupt the protocol; ``sys.stdout`` is the
    pipe the server writes its messages to.
    """

    def __init__(self, *, allow_write: bool, idle: float = IDLE_S) -> None:
        self.allow_write = allow_write
        self.idle = idle
        #: the ``initialize`` reply this front sent, until fastmcp's own one was dropped.
        self.answered: dict[str, Any] | None = None
        #: the ids of the requests this front answered itself, in order (never passed on).
        self.answered_here: list[Any] = []
        self._lock = threading.Lock()
        self._wire_in: IO[bytes] | None = None
        self._wire_out: IO[bytes] | None = None
        self._writer: threading.Thread | None = None
        self._registry: Registry | None = None
        self._attached = threading.Event()
        self._state = threading.Condition()
        self._fronting = False  # the handshake was answered here: the front may answer more
        self._initialized = False  # notifications/initialized came (fastmcp serves from then)
        self._handed_over = False
        self._passing = False  # a tool call (or a batch, a bad line) was passed on
        self._wanted = False  # fastmcp must load: a message was passed on for it to answer
        self._answered_a_call = False
        self._busy = False
        self._ended = False  # the client closed stdin
        self._last = time.monotonic()
        self._protocol: str | None = None
        #: the list requests passed on to fastmcp whose replies are to be kept, by id.
        self._keeping: dict[Any, tuple[str, str, str]] = {}

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

    def attach(self, registry: Registry) -> None:
        """The KBs are open (their warm-up started): the front may run tool calls on them."""
        self._registry = registry
        with self._state:
            self._last = max(self._last, time.monotonic())
        self._attached.set()

    def wait_for_turn(self) -> bool:
        """Wait until fastmcp should load; ``False`` if it need not (the client has gone).

        fastmcp loads once a message was passed on for it to answer, once the front answered a
        tool call (later ones are answered by whichever is ready first), or once no message
        came for :attr:`idle` seconds while the front answered none: importing it while the
        front runs a search would make both wait for each other (one interpreter lock). When
        the client closed stdin and every request was answered here, nothing needs fastmcp.
        """
        with self._state:
            while True:
                if self._ended and not self._wanted:
                    return False
                if self._wanted or self._answered_a_call:
                    return True
                quiet = time.monotonic() - self._last
                if not self._busy and quiet >= self.idle:
                    return True
                self._state.wait(timeout=None if self._busy else self.idle - quiet)

    def hand_over(self) -> None:
        """Pass every message from now on to fastmcp, which is about to read."""
        with self._state:
            self._handed_over = True

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
                        self._fronting = self._answer(line)
                        if not self._fronting:  # fastmcp answers it, and all after it
                            with self._state:
                                self._wanted = True
                                self._state.notify_all()
                    elif self._answer_here(line):
                        continue
                    feed.write(line)
        except OSError:  # the server stopped reading, or the client's stdout is gone
            pass
        finally:
            with self._state:
                self._ended = True
                self._state.notify_all()

    def _answer(self, line: bytes) -> bool:
        try:
            message = json.loads(line)
        except ValueError:
            return False
        reply = initialize_reply(message, allow_write=self.allow_write)
        if reply is None:
            log.debug("The first message is not a plain initialize: fastmcp answers it.")
            return False
        self.answered = reply  # before the server can see the request, so its reply is dropped
        self._protocol = reply["result"]["protocolVersion"]
        self._send(_encode(reply))
        log.debug(
            "Answered initialize (protocol %s) before the server loaded.",
            reply["result"]["protocolVersion"],
        )
        return True

    def _answer_here(self, line: bytes) -> bool:
        """Answer the message in ``line`` if the front can; else mark it for fastmcp.

        Returns whether it was answered (then it is not passed on).
        """
        with self._state:
            self._last = time.monotonic()
            if not self._fronting:
                return False
            late = self._handed_over or self._passing
            self._busy = not late
        if late:  # fastmcp answers; a list it gives is still kept for the next start
            self._note_list(line)
            return False
        answered = False
        try:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if isinstance(message, dict):
                answered = self._reply_to(message)
            return answered
        finally:
            with self._state:
                self._busy = False
                self._last = time.monotonic()
                if not answered and not _handshake(message):
                    self._wanted = True
                    # Tool calls reach fastmcp in the order they came: none overtakes one
                    # passed on (a search sent after a write is not run before it).
                    self._passing |= not isinstance(message, dict) or message.get("method") in (
                        "tools/call",
                        None,
                    )
                self._state.notify_all()

    def _reply_to(self, message: dict[str, Any]) -> bool:
        """Send the reply to ``message`` if the front can give fastmcp's; whether it did."""
        if message.get("method") == "notifications/initialized":
            self._initialized = True
            return False
        if not self._initialized or message.get("jsonrpc") != "2.0" or "id" not in message:
            return False
        request_id, method = message["id"], message.get("method")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return False
        params = message.get("params")
        if method == "ping" and set(message) <= {"jsonrpc", "id", "method", "params"}:
            if params not in (None, {}):
                return False
            result: dict[str, Any] | None = {}
        elif method == "tools/call":
            result = self._call(params)
        elif method in KEPT_LISTS and set(message) <= {"jsonrpc", "id", "method", "params"}:
            if params not in (None, {}):
                return False  # a cursor or _meta: fastmcp's
            result = self._kept_list(request_id, method)
        else:
            return False
        if result is None:
            return False
        self.answered_here.append(request_id)
        self._send(_encode({"jsonrpc": "2.0", "id": request_id, "result": result}))
        return True

    def _list_file(self, method: str) -> tuple[str, str] | None:
        """Where ``method``'s reply is kept, and its header; ``None`` when keeping is off."""
        folder = os.environ.get(CACHE_ENV)
        if folder == "":
            return None
        from pinakes_core.kept import user_cache

        name = f"{method.replace('/', '-')}-{'write' if self.allow_write else 'read'}"
        header = f"{_FORMAT} {method} protocol={self._protocol} allow_write={self.allow_write}"
        path = os.path.join(folder or os.path.join(user_cache(), "mcp-front"), f"{name}.json")
        return path, header

    def _note_list(self, line: bytes) -> None:
        """Keep fastmcp's reply to ``line`` if it asks for one of :data:`KEPT_LISTS`."""
        if b"list" not in line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if (
            isinstance(message, dict)
            and message.get("method") in KEPT_LISTS
            and message.get("params") in (None, {})
            and "id" in message
        ):
            where = self._list_file(message["method"])
            if where is not None:
                from pinakes_core.kept import installation

                with self._state:
                    self._keeping[message["id"]] = (*where, installation())

    def _kept_list(self, request_id: Any, method: str) -> dict[str, Any] | None:
        """The reply fastmcp gave ``method`` the last time, as kept, if it is still true.

        If none is kept (or it is stale), ``None``: the request goes to fastmcp, and its reply
        is kept by the writer for the next start.
        """
        where = self._list_file(method)
        if where is None:
            return None
        from pinakes_core.kept import installation, kept

        path, header = where
        text = kept(path, header)
        if text is not None:
            try:
                result = json.loads(text)
            except ValueError:
                result = None
            if isinstance(result, dict):
                log.debug("Answered %s with fastmcp's reply kept in %s.", method, path)
                return result
        with self._state:
            self._keeping[request_id] = (path, header, installation())
        return None

    def _call(self, params: Any) -> dict[str, Any] | None:
        """Run a read-only tool call here, or ``None`` to leave it to fastmcp."""
        if not isinstance(params, dict) or not set(params) <= {"name", "arguments", "_meta"}:
            return None
        meta = params.get("_meta", {})
        if not isinstance(meta, dict) or not set(meta) <= {"progressToken"}:
            return None
        self._attached.wait()
        registry = self._registry
        assert registry is not None
        from pinakes_mcp.early import TOOLS, call

        if params.get("name") not in TOOLS:
            return None
        for served in registry:
            if "progressToken" in meta and not served.ready.is_set():
                return None  # fastmcp relays the warm-up's progress (toolkit.wait_until_ready)
            while not served.ready.wait(0.05):
                if served.syncing.is_set():
                    return None  # a first sync: fastmcp waits for it, answering the rest
        result = call(registry, params["name"], params.get("arguments", {}))
        if result is not None:
            self._answered_a_call = True
            log.debug("Answered tools/call %s before the server loaded.", params["name"])
        return result

    def _write(self, server_out: IO[bytes]) -> None:
        broken = False
        with server_out:
            for line in iter(server_out.readline, b""):
                if self.answered is not None and self._own_reply(line):
                    continue
                if self._keeping:
                    self._keep(line)
                if broken:
                    continue  # keep draining, or the server would block on a full pipe
                try:
                    self._send(line)
                except OSError:
                    broken = True

    def _keep(self, line: bytes) -> None:
        """If ``line`` is fastmcp's reply to a list request to keep, keep its result."""
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or "method" in message:
            return
        with self._state:
            where = self._keeping.pop(message.get("id"), None)
        result = message.get("result")
        if where is None or not isinstance(result, dict) or "nextCursor" in result:
            return
        from pinakes_core.kept import keep

        path, header, found = where
        keep(path, header, json.dumps(result, ensure_ascii=False), found)

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


def _handshake(message: Any) -> bool:
    """Whether ``message`` is ``notifications/initialized`` (replayed into fastmcp, not a task)."""
    return isinstance(message, dict) and message.get("method") == "notifications/initialized"
