"""Run a function in a forked child under a memory ceiling and a time limit (issue 12).

The child gets ``RLIMIT_AS`` = what it has mapped at fork time + 1.5 GB, so a blow-up fails
inside the child instead of exhausting the machine; its peak resident memory comes back from
``wait4``. A child that does not finish in time is SIGKILLed and reported as a hang. What the
function returns (or the exception it raised, by type name and message) comes back through a
pipe.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LIMIT_BYTES = int(1.5 * 1024**3)

# The tokenizers library must not use its thread pool in a forked child.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass
class Outcome:
    """What happened to one guarded call."""

    value: Any = None
    error_type: str | None = None  # the exception's class name, when one escaped
    error: str | None = None
    pinakes_error: bool = False  # the escaped exception was a PinakesError
    hung: bool = False
    killed_by: int | None = None  # a signal that ended the child
    peak_rss: int = 0  # bytes
    seconds: float = 0.0

    @property
    def over_memory(self) -> bool:
        return self.peak_rss > LIMIT_BYTES or self.error_type == "MemoryError"

    @property
    def foreign(self) -> bool:
        """An exception that is not a PinakesError escaped (a bug, per STYLE's Errors)."""
        return self.error_type is not None and not self.pinakes_error


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * resource.getpagesize()


def run_guarded(fn: Callable[[], Any], *, timeout: float = 60.0) -> Outcome:
    """Call ``fn()`` in a forked child with the memory ceiling and ``timeout`` seconds."""
    from pinakes_core import PinakesError

    read_fd, write_fd = os.pipe()
    ceiling = _mapped_bytes() + LIMIT_BYTES
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        code = 0
        try:
            resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
            try:
                payload: dict[str, Any] = {"value": fn()}
            except BaseException as exc:
                payload = {
                    "error_type": type(exc).__name__,
                    "error": (str(exc) or repr(exc))[:2000]
                    + (
                        ""
                        if isinstance(exc, PinakesError)
                        else "\n" + traceback.format_exc()[-3000:]
                    ),
                    "pinakes_error": isinstance(exc, PinakesError),
                }
            try:
                data = pickle.dumps(payload)
            except Exception as exc:
                data = pickle.dumps({"error_type": "PicklingError", "error": str(exc)})
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(data)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    os.set_blocking(read_fd, False)
    outcome = Outcome()
    deadline = started + timeout
    chunks: list[bytes] = []
    status = 0
    usage = None

    def drain() -> None:
        while True:
            try:
                chunk = os.read(read_fd, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                return
            chunks.append(chunk)

    while True:
        drain()  # the child may write more than a pipe holds
        waited, status, usage = os.wait4(pid, os.WNOHANG)
        if waited:
            break
        if time.perf_counter() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            outcome.hung = True
            break
        time.sleep(0.01)
    drain()
    os.close(read_fd)
    data = b"".join(chunks)
    outcome.seconds = time.perf_counter() - started
    outcome.peak_rss = usage.ru_maxrss * 1024 if usage is not None else 0
    if os.WIFSIGNALED(status):
        outcome.killed_by = os.WTERMSIG(status)
    if data and not outcome.hung:
        for key, value in pickle.loads(data).items():
            setattr(outcome, key, value)
    elif not outcome.hung:
        outcome.error_type = "ChildDied"
        outcome.error = f"the child exited with status {status} and no answer"
    return outcome
