"""Process memory as the benchmarks read it: shared by ``scale.py`` and ``mcp_latency.py``.

A module of its own so neither benchmark script imports the other (issue 37: ``scale`` needs
``mcp_latency``'s server measurement, ``mcp_latency`` this reading).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["proc_memory_mb"]


def proc_memory_mb(pid: int | str = "self") -> dict[str, float]:
    """Resident memory of a process from ``/proc/<pid>/status``: ``VmRSS`` and ``VmHWM`` (peak), MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)  # the kernel reports kB
    return out
