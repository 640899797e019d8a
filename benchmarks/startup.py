"""Start-up cost (issue 14): what a user pays per ``pnk`` process and per MCP server start.

On a copy of ``examples/distsys-notes`` (synced once before timing), each figure is the median
(min–max) of ``--runs`` fresh processes, after one untimed run so the page cache is warm:

1. **cold search** — ``pnk --kb DIR search "…" --json``, whole process wall time;
2. **no-change sync** — ``pnk --kb DIR sync --json`` with nothing changed;
3. **MCP ready** — ``pinakes-mcp --kb DIR`` over stdio: wall time from process start until its
   reply to ``initialize`` arrives (the host's view of "server ready"), and until the first
   ``pinakes_search`` call returns (fastmcp, the KBs, the model and vectors load meanwhile),
   with the server process's own CPU time at each moment (read from ``/proc``);
4. **imports** — ``python -X importtime`` of the cold search: the top packages by their own
   import time, summed over their modules (one run; noisy, read it as a ranking);
5. **front door against the yardstick** (issue 37) — ``pnk --help``, ``pnk --version`` and the
   cold search, each as a ratio to ``python -c "import numpy, pydantic"`` measured in the same
   rounds: every round runs the yardstick, then each command once, and a figure's ratio is the
   median of its per-round ratios, so load that comes and goes weighs on both sides alike.
   Targets: ``--help``/``--version`` ≤ 0.3×, cold search ≤ 2×. ``pnk --help``/``--version``
   are answered from the front door's cache after an installation's first run (kept in a
   temporary folder here); the ``first run`` rows turn the cache off (what the first pays).

Load average (1 min) is read before and after; the machine is shared, so compare figures from
the same run. Child processes run without ``PYTHONDONTWRITEBYTECODE`` (the untimed first run
writes the bytecode caches, as any installed tool's first run does); with it set, every start
compiles every module from source and costs several times more. ``--pythonpath DIR`` runs
another copy of the packages (e.g. ``git archive`` of main) with the same interpreter, for a
before/after pair in one window.

``--installed`` measures where users run ``pnk``: it builds the five wheels
(``uv build --all-packages --wheel``), creates a fresh venv (``uv venv``), installs pinakes-cli,
pinakes-mcp and pinakes-graph from those wheels (``uv pip install``, their dependencies from the
index through uv's cache), as ``uv tool install pinakes-cli --with pinakes-mcp`` would, and runs
the front-door rows (5) with that venv's python and ``pnk``: a venv holding only Pinakes and its
dependencies, with far fewer distributions for the entry-point scan than the workspace's.

    uv run python benchmarks/startup.py            # Markdown
    uv run python benchmarks/startup.py --json
    uv run python benchmarks/startup.py --installed   # the front door in a fresh install
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "distsys-notes"
QUERY = "how does leader election work"
BIN = Path(sys.executable).parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def log(message: str) -> None:
    print(f"[startup {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall seconds, CPU seconds (user + system) and the finished process of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, env=ENV)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, done


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of ``argv``."""
    seconds, cpu, _ = run_timed(argv)
    return seconds, cpu


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "n": len(values),
    }


def repeat(argv: list[str], runs: int) -> dict[str, float]:
    timed(argv)  # warm the page cache (and any per-user cache) once, untimed
    pairs = [timed(argv) for _ in range(runs)]
    out = spread([wall for wall, _ in pairs])
    # CPU time is what the process itself cost: far less sensitive to a loaded machine.
    out["cpu_median"] = round(statistics.median(cpu for _, cpu in pairs), 3)
    return out


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _reply(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("pinakes-mcp closed stdout before replying")
        message = json.loads(line)
        if message.get("id") == request_id:
            return dict(message)


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, all threads) process ``pid`` has used so far (Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mcp_once(
    kb: Path, command: list[str] | None = None, *, listing: bool = False
) -> tuple[float, float, float, float]:
    """Seconds from spawning ``pinakes-mcp`` to its ``initialize`` reply and first search.

    ``command`` starts the server instead of the installed ``pinakes-mcp`` (``--kb`` and
    ``--log-level`` are appended), e.g. another tree's entry point.

    With ``listing``, the client asks ``tools/list`` before the search, as a host does.

    Also the server process's own CPU seconds at each of the two moments: far less sensitive to
    a loaded machine than the wall time (a quiet machine's wall time is about this, minus what
    the warm-up threads ran in parallel).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*(command or [str(BIN / "pinakes-mcp")]), "--kb", str(kb), "--log-level", "WARNING"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "startup-bench", "version": "0"},
                },
            },
        )
        _reply(proc, 1)
        ready = time.perf_counter() - t0
        cpu_ready = _cpu_seconds(proc.pid)
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        if listing:
            _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
            _reply(proc, 3)
        _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "pinakes_search", "arguments": {"query": QUERY}},
            },
        )
        answer = _reply(proc, 2)
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise SystemExit(f"pinakes_search failed: {answer}")
        first = time.perf_counter() - t0
        cpu_first = _cpu_seconds(proc.pid)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return ready, first, cpu_ready, cpu_first


#: what a process pays to load numpy and pydantic: the front door's yardstick (issue 37).
YARDSTICK_CODE = "import numpy, pydantic"


def floor_discovery(tree: Path) -> str:
    """Code for the floor row: click, pluggy and a scan of the ``pinakes`` entry points.

    That is what ``pnk --help`` cannot skip. The scan is the one ``tree``'s core uses: its own
    reader (``pinakes_core.plugins.entry_points``) where ``tree`` has one, else
    ``importlib.metadata``'s, as before it had (its ``plugins`` module then loads the engine, so
    the row must not import it).
    """
    plugins = tree / "packages" / "pinakes-core" / "src" / "pinakes_core" / "plugins.py"
    if not plugins.is_file():  # a flat copy of the packages (--pythonpath)
        plugins = tree / "pinakes_core" / "plugins.py"
    if "def entry_points(" in plugins.read_text(encoding="utf-8"):
        return "import click, pluggy; from pinakes_core.plugins import entry_points; entry_points('pinakes')"
    return (
        "import click, importlib.metadata, pluggy; importlib.metadata.entry_points(group='pinakes')"
    )


def against_yardstick(
    commands: dict[str, list[str]], runs: int, python: str = sys.executable
) -> dict[str, dict[str, float]]:
    """Each command's spread and its median ratio to :data:`YARDSTICK_CODE`, in the same rounds.

    The yardstick runs under ``python``. One untimed round first (page cache, bytecode); then
    ``runs`` rounds of the yardstick and every command once each. Ratios are taken per round,
    wall and CPU, then their median.
    """
    yardstick = [python, "-c", YARDSTICK_CODE]
    for argv in (yardstick, *commands.values()):
        timed(argv)
    rounds: dict[str, list[tuple[float, float]]] = {"yardstick": []}
    rounds.update({name: [] for name in commands})
    for _ in range(runs):
        rounds["yardstick"].append(timed(yardstick))
        for name, argv in commands.items():
            rounds[name].append(timed(argv))
    base = rounds["yardstick"]
    out: dict[str, dict[str, float]] = {}
    for name, pairs in rounds.items():
        row = spread([wall for wall, _ in pairs])
        row["cpu_median"] = round(statistics.median(cpu for _, cpu in pairs), 3)
        ratios = [(w / bw, c / bc) for (w, c), (bw, bc) in zip(pairs, base, strict=True)]
        row["ratio"] = round(statistics.median(r for r, _ in ratios), 2)
        row["cpu_ratio"] = round(statistics.median(r for _, r in ratios), 2)
        out[name] = row
    return out


def front_door(bin_dir: Path, kb: Path, runs: int, tree: Path) -> dict[str, dict[str, float]]:
    """The front-door rows (5) with the python and ``pnk`` of ``bin_dir``, running ``tree``."""
    python, pnk = str(bin_dir / "python"), str(bin_dir / "pnk")
    uncached = ["env", "PINAKES_FRONT_DOOR_CACHE=", pnk]
    return against_yardstick(
        {
            # The untimed first round fills the front door's cache (pinakes_cli/door.py), so
            # these two are what every run after an installation's first pays ...
            "help": [pnk, "--help"],
            "version": [pnk, "--version"],
            # ... and these what the first pays: click, the command modules, the plugin scan.
            "help_uncached": [*uncached, "--help"],
            "version_uncached": [*uncached, "--version"],
            # The floors under --help: click, and what finding plugin commands costs.
            "floor_click": [python, "-c", "import click"],
            "floor_discovery": [python, "-c", floor_discovery(tree)],
            "cold_search": [pnk, "--kb", str(kb), "search", QUERY, "--json"],
        },
        runs,
        python,
    )


def installed_venv(tmp: Path) -> Path:
    """Build the wheels, install them into a fresh venv under ``tmp``; return its ``bin``.

    pinakes-cli, pinakes-mcp and pinakes-graph (and so pinakes-core) come from the wheels just
    built, named by file so no index can stand in for them; their dependencies come from the
    index (uv's cache makes that fast). The venv uses this interpreter's Python.
    """
    wheels, venv = tmp / "wheels", tmp / "venv"

    def uv(*argv: str) -> None:
        done = subprocess.run(["uv", *argv], cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"uv {' '.join(argv)} failed:\n{done.stderr}")

    log("building the wheels")
    uv("build", "--all-packages", "--wheel", "--out-dir", str(wheels))
    log("installing them into a fresh venv")
    uv("venv", "--python", sys.executable, str(venv))
    files = [
        str(next(wheels.glob(f"{dist.replace('-', '_')}-*.whl")))
        for dist in ("pinakes-core", "pinakes-cli", "pinakes-mcp", "pinakes-graph")
    ]
    python = str(venv / "bin" / "python")
    uv("pip", "install", "--python", python, "--find-links", str(wheels), *files)
    return venv / "bin"


def distribution_count(python: str) -> int:
    """How many distributions ``python`` sees (what an entry-point scan walks)."""
    done = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(len(list(m.distributions())))"],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    )
    return int(done.stdout)


def mcp_ready(
    kb: Path, runs: int, command: list[str] | None = None, *, listing: bool = False
) -> dict[str, dict[str, float]]:
    mcp_once(kb, command, listing=listing)
    runs_ = [mcp_once(kb, command, listing=listing) for _ in range(runs)]
    out = {
        "initialize": spread([r[0] for r in runs_]),
        "first_search": spread([r[1] for r in runs_]),
    }
    out["initialize"]["cpu_median"] = round(statistics.median(r[2] for r in runs_), 3)
    out["first_search"]["cpu_median"] = round(statistics.median(r[3] for r in runs_), 3)
    return out


def import_profile(kb: Path, top: int = 10) -> list[tuple[str, float]]:
    """Own import time per top-level package (ms) for one cold ``pnk search``."""
    done = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            "from pinakes_cli.main import main; main()",
            "--kb",
            str(kb),
            "search",
            QUERY,
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        env=ENV,
    )
    own: dict[str, float] = defaultdict(float)
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        try:
            self_us, _cumulative, name = (part.strip() for part in line[12:].split("|", 2))
            own[name.strip().split(".")[0]] += int(self_us) / 1000
        except ValueError:
            continue
    ranked = sorted(own.items(), key=lambda item: -item[1])[:top]
    return [(name, round(ms, 1)) for name, ms in ranked]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kb", type=Path, default=EXAMPLE, help="KB to copy (default: example)")
    parser.add_argument("--pythonpath", type=Path, help="run the packages found in this folder")
    parser.add_argument(
        "--installed",
        action="store_true",
        help="only the front-door rows, in a fresh venv installed from freshly built wheels",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.pythonpath:
        ENV["PYTHONPATH"] = str(args.pythonpath.resolve())
    # The front door's cache in a folder of this run's own, never the user's.
    door_cache = tempfile.TemporaryDirectory(prefix="pinakes-door-")
    ENV["PINAKES_FRONT_DOOR_CACHE"] = door_cache.name
    ENV["PINAKES_MCP_FRONT_CACHE"] = os.path.join(door_cache.name, "mcp-front")
    if args.installed:
        installed(args)
        return
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="pinakes-startup-") as tmp:
        kb = Path(tmp) / "kb"
        shutil.copytree(args.kb, kb, ignore=shutil.ignore_patterns(".pinakes"))
        pnk = str(BIN / "pnk")
        log("first sync")
        timed([pnk, "--kb", str(kb), "sync", "--json"])
        timed([pnk, "--kb", str(kb), "sync", "--json"])  # the first may still calibrate
        out: dict[str, Any] = {"python_pass": repeat([sys.executable, "-c", "pass"], args.runs)}
        log("cold search")
        out["cold_search"] = repeat([pnk, "--kb", str(kb), "search", QUERY, "--json"], args.runs)
        log("no-change sync")
        out["nochange_sync"] = repeat([pnk, "--kb", str(kb), "sync", "--json"], args.runs)
        log("import pinakes_core")
        out["import_core"] = repeat([sys.executable, "-c", "import pinakes_core"], args.runs)
        log("MCP")
        out["mcp"] = mcp_ready(kb, args.runs)
        out["imports_top"] = import_profile(kb)
        log("front door against the yardstick")
        tree = args.pythonpath.resolve() if args.pythonpath else REPO
        out["front_door"] = front_door(BIN, kb, args.runs, tree)
    out["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.json:
        print(json.dumps(out, indent=2))
        return

    row = _row
    print(f"{out['date']}, load average (1 min) before/after: {out['load_1min']}\n")
    print("| figure | median | min–max | CPU median |\n|---|--:|--:|--:|")
    print(row("`python -c pass`", out["python_pass"]))
    print(row("`python -c 'import pinakes_core'`", out["import_core"]))
    print(row("cold `pnk search --json`", out["cold_search"]))
    print(row("no-change `pnk sync`", out["nochange_sync"]))
    print(row("MCP `initialize` reply after start", out["mcp"]["initialize"]))
    print(row("MCP first `pinakes_search` reply after start", out["mcp"]["first_search"]))
    print_front_door(out["front_door"])
    print("\nOwn import time by package (cold search, one run):\n")
    print("| package | ms |\n|---|--:|")
    for name, ms in out["imports_top"]:
        print(f"| {name} | {ms} |")


def installed(args: argparse.Namespace) -> None:
    """``--installed``: the front-door rows in a fresh venv installed from built wheels."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="pinakes-installed-") as tmp:
        bin_dir = installed_venv(Path(tmp))
        kb = Path(tmp) / "kb"
        shutil.copytree(args.kb, kb, ignore=shutil.ignore_patterns(".pinakes"))
        pnk = str(bin_dir / "pnk")
        log("first sync")
        timed([pnk, "--kb", str(kb), "sync", "--json"])
        timed([pnk, "--kb", str(kb), "sync", "--json"])  # the first may still calibrate
        out: dict[str, Any] = {"distributions": distribution_count(str(bin_dir / "python"))}
        log("front door against the yardstick (installed venv)")
        out["front_door"] = front_door(bin_dir, kb, args.runs, REPO)
    out["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"{out['date']}, a fresh venv of pinakes-cli + pinakes-mcp + pinakes-graph from wheels "
        f"({out['distributions']} distributions), load average (1 min) before/after: "
        f"{out['load_1min']}"
    )
    print_front_door(out["front_door"])


def _row(label: str, s: dict[str, float]) -> str:
    cpu = f"{s['cpu_median']:.3f} s" if "cpu_median" in s else "—"
    return f"| {label} | {s['median']:.3f} s | {s['min']:.3f}–{s['max']:.3f} s | {cpu} |"


def print_front_door(rows: dict[str, dict[str, float]]) -> None:
    """The front-door table: each row's spread and its ratios to the yardstick."""
    print('\nAgainst the yardstick `python -c "import numpy, pydantic"`, in the same rounds:\n')
    print("| figure | median | min–max | CPU median | × yardstick | × yardstick (CPU) | target |")
    print("|---|--:|--:|--:|--:|--:|--:|")
    labels = {
        "yardstick": ("`python -c 'import numpy, pydantic'`", "1"),
        "help": ("`pnk --help`", "≤ 0.3"),
        "version": ("`pnk --version`", "≤ 0.3"),
        "help_uncached": ("`pnk --help`, first run (cache off)", "—"),
        "version_uncached": ("`pnk --version`, first run (cache off)", "—"),
        "cold_search": ("cold `pnk search --json`", "≤ 2"),
        "floor_click": ("floor: `python -c 'import click'`", "—"),
        "floor_discovery": ("floor: click + pluggy + entry-point scan", "—"),
    }
    for name, s in rows.items():
        label, target = labels[name]
        print(f"{_row(label, s)} {s['ratio']:.2f} | {s['cpu_ratio']:.2f} | {target} |")


if __name__ == "__main__":
    main()
