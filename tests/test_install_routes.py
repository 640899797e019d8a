"""Issue 11 item 2: every documented install route, from a clone, in fresh environments.

Builds the five wheels (`uv build --all-packages`), checks them for PyPI (`twine check
--strict`, metadata, lockstep versions), installs them into a fresh venv with pip and with uv,
installs the `pnk` and `pinakes-mcp` tools with `uv tool install`, and starts the MCP host
snippet from docs/mcp.md that runs the global `pinakes-mcp`. Dependencies come from the
package index (uv's and pip's caches make repeat runs quick).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from email.parser import HeaderParser
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.model]

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "distsys-notes"
DISTRIBUTIONS = ("pinakes-core", "pinakes-graph", "pinakes-ner", "pinakes-cli", "pinakes-mcp")
#: what a user installs to get pnk and pinakes-mcp (ner is optional).
RUNTIME = ("pinakes-core", "pinakes-graph", "pinakes-cli", "pinakes-mcp")


def sh(*args: str | Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    proc = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
        cwd=REPO,
    )
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    sh("uv", "build", "--all-packages", "--out-dir", out)
    return out


def wheel(dist: Path, name: str) -> Path:
    (found,) = dist.glob(f"{name.replace('-', '_')}-*-py3-none-any.whl")
    return found


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("kb") / "distsys-notes"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pinakes"))
    return target


def test_wheels_are_ready_for_pypi(dist: Path) -> None:
    built = sorted([*dist.glob("*.whl"), *dist.glob("*.tar.gz")])
    assert len(built) == 2 * len(DISTRIBUTIONS)
    sh(sys.executable, "-m", "twine", "check", "--strict", *built)
    versions = set()
    for name in DISTRIBUTIONS:
        project = tomllib.loads((REPO / "packages" / name / "pyproject.toml").read_text("utf-8"))
        version = project["project"]["version"]
        versions.add(version)
        for dep in project["project"]["dependencies"]:
            if dep.startswith("pinakes-"):
                assert dep.endswith(f"=={version}"), f"{name}: {dep} is not pinned in lockstep"
        with zipfile.ZipFile(wheel(dist, name)) as archive:
            meta_name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            meta = HeaderParser().parsestr(archive.read(meta_name).decode("utf-8"))
            assert any(n.endswith("licenses/LICENSE") for n in archive.namelist()), name
        assert meta["Version"] == version and meta["License-Expression"] == "MIT"
        assert meta["Description-Content-Type"] == "text/markdown"
        assert "../../README.md" not in (meta.get_payload() or ""), "a relative link breaks on PyPI"
        assert any(
            c.startswith("Programming Language :: Python :: 3.11")
            for c in meta.get_all("Classifier")
        )
        assert {u.split(",")[0] for u in meta.get_all("Project-URL")} >= {"Homepage", "Source"}
    assert len(versions) == 1, f"versions are not in lockstep: {versions}"
    # Issue 36: the reader model ships inside pinakes-core, and the wheel stays small.
    core = wheel(dist, "pinakes-core")
    with zipfile.ZipFile(core) as archive:
        names = set(archive.namelist())
    for name in ("reader.onnx", "tokenizer.json", "provenance.json"):
        assert f"pinakes_core/data/reader/{name}" in names, name
    assert core.stat().st_size <= 30 * 1024 * 1024


def _check_installed(bin_dir: Path, kb: Path) -> None:
    suffix = ".exe" if os.name == "nt" else ""
    pnk, server = bin_dir / f"pnk{suffix}", bin_dir / f"pinakes-mcp{suffix}"
    assert re.search(r"pnk, version \d", sh(pnk, "--version"))
    found = json.loads(sh(pnk, "search", "how does raft pick a new leader", "--kb", kb, "--json"))
    assert any(hit["path"] == "consensus/raft.md" for hit in found["hits"])
    assert "--allow-write" in sh(server, "--help")
    plugins = json.loads(sh(pnk, "plugins", "--json"))
    assert plugins["missing_commands"] == {}, "pnk mcp comes from pinakes-mcp"
    assert "Serve KBs over MCP" in sh(pnk, "mcp", "--help")


def _ask_install_hint(bin_dir: Path, kb: Path, env: dict[str, str] | None = None) -> str:
    """The install command `pnk ask` prints without the paid-path extra (issue 35.3)."""
    proc = subprocess.run(
        [str(bin_dir / "pnk"), "ask", "what is raft", "--kb", str(kb)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**(env or os.environ), "COLUMNS": "500"},
        check=False,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    match = re.search(r"hint: Install it: (.+)", proc.stderr)
    assert match, proc.stderr[-2000:]
    return match.group(1).strip()


def test_pip_install_from_the_wheels(dist: Path, kb: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "pip-venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    sh(bin_dir / "python", "-m", "pip", "install", "--quiet", *(wheel(dist, n) for n in RUNTIME))
    _check_installed(bin_dir, kb)
    assert re.fullmatch(
        re.escape(str(bin_dir)) + r"/python[0-9.]* -m pip install 'pinakes-cli\[ask\]'",
        _ask_install_hint(bin_dir, kb),
    )


def test_uv_pip_install_from_the_wheels(dist: Path, kb: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "uv-venv"
    sh("uv", "venv", "--quiet", "--python", sys.executable, env_dir)
    python = env_dir / "bin" / "python"
    sh("uv", "pip", "install", "--quiet", "--python", python, *(wheel(dist, n) for n in RUNTIME))
    _check_installed(env_dir / "bin", kb)
    # uv's venv has no pip: the hint installs with uv into that interpreter.
    assert re.fullmatch(
        r"uv pip install --python " + re.escape(str(env_dir / "bin")) + r"/python[0-9.]* "
        r"'pinakes-cli\[ask\]'",
        _ask_install_hint(env_dir / "bin", kb),
    )


def _host_snippet() -> dict[str, object]:
    """The first docs/mcp.md host snippet whose command is the installed `pinakes-mcp`."""
    text = (REPO / "docs" / "mcp.md").read_text("utf-8")
    for block in re.findall(r"```json\n(.*?)```", text, re.S):
        data = json.loads(block)
        for entry in data.get("mcpServers", {}).values():
            if entry.get("command") == "pinakes-mcp":
                assert isinstance(entry, dict)
                return entry
    raise AssertionError("docs/mcp.md has no snippet running the installed pinakes-mcp")


def test_uv_tool_install_gives_global_commands_and_the_host_snippet_runs(
    dist: Path, kb: Path, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    core = [
        a
        for n in ("pinakes-core", "pinakes-graph", "pinakes-mcp")
        for a in ("--with", wheel(dist, n))
    ]
    sh(
        "uv",
        "tool",
        "install",
        "--quiet",
        wheel(dist, "pinakes-cli"),
        *core,
        "--with-executables-from",
        "pinakes-mcp",
        env=env,
    )
    bin_dir = tmp_path / "bin"
    _check_installed(bin_dir, kb)

    entry = _host_snippet()
    # The snippet's first KB becomes the example KB; further --kb pairs are dropped (a second
    # KB of the same name would be refused).
    given = [str(a) for a in entry["args"]]  # type: ignore[union-attr]
    args: list[str] = []
    pairs = iter(given)
    for arg in pairs:
        if arg != "--kb":
            args.append(arg)
        elif "--kb" not in args:
            next(pairs)
            args += ["--kb", str(kb)]
        else:
            next(pairs)
    params = StdioServerParameters(
        command=str(entry["command"]),
        args=args,
        env={**env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )

    async def session() -> None:
        with anyio.fail_after(180):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
                init = await client.initialize()
                assert init.server_info.name == "pinakes"
                result = await client.call_tool("pinakes_search", {"query": "raft leader", "k": 2})
                assert not result.is_error, result.content

    anyio.run(session)

    # Without the paid-path extra, `pnk ask` names a `uv tool install` that keeps the tool's
    # other packages; run as printed (the wheels found in dist/, litellm from the index), it
    # adds the extra and `pnk ask --dry-run` prices a call.
    hint = _ask_install_hint(bin_dir, kb, env)
    assert hint.startswith("uv tool install 'pinakes-cli[ask]' "), hint
    assert "--with pinakes-mcp" in hint and "--with-executables-from pinakes-mcp" in hint
    sh("bash", "-c", hint, env={**env, "UV_FIND_LINKS": str(dist)})
    proc = subprocess.run(
        [str(bin_dir / "pnk"), "ask", "how does raft elect a leader", "--kb", str(kb), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "COLUMNS": "500"},
        check=False,
    )
    assert proc.returncode == 0 and "worst case €" in proc.stderr, proc.stderr[-2000:]
    assert "--with-executables-from pinakes-mcp" in hint and (bin_dir / "pinakes-mcp").exists()
