"""The house's layering (issue 37, docs/architecture.md): no import circle anywhere.

``lint-imports`` (the contracts in ``pyproject.toml``) checks the rooms' order and keeps the KB
facade's services from reaching back to it; its contract types cannot say "no circle between
any two modules". These tests do, with grimp (the graph import-linter itself builds), counting
imports inside functions and under ``if TYPE_CHECKING:``; and they check the benchmark scripts,
which are not a package, the same way from their source.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("pinakes_core", "pinakes_graph", "pinakes_ner", "pinakes_cli", "pinakes_mcp")


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_circles_finds_a_circle_and_only_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_no_import_circle_between_modules_of_the_packages() -> None:
    graph = grimp.build_graph(*PACKAGES)
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    # A package's __init__ importing its own modules is how a package exports names; a module
    # importing its package back (``from pinakes_core import X``) closes a circle and counts.
    assert circles(edges) == []


def _benchmark_imports(folder: Path) -> dict[str, set[str]]:
    scripts = {p.stem: p for p in folder.glob("*.py")}
    edges: dict[str, set[str]] = {name: set() for name in scripts}
    for name, path in scripts.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module.split(".")[0]]
            else:
                continue
            edges[name].update(t for t in targets if t in scripts and t != name)
    return edges


def test_no_import_circle_between_benchmark_scripts() -> None:
    edges = _benchmark_imports(REPO / "benchmarks")
    assert edges, "benchmarks/ has no scripts"
    assert circles(edges) == []


def test_the_layering_contract_holds() -> None:
    """The same check ``make lint`` and ``.ci/run`` run, so a broken contract fails the suite."""
    command = Path(sys.executable).with_name("lint-imports")
    assert command.is_file(), f"{command} is missing: import-linter is in the dev group"
    done = subprocess.run(
        [str(command), "--no-cache"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
