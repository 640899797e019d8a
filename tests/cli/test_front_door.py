"""``pnk --help`` and ``pnk --version`` load neither numpy nor pydantic nor the engine (issue 37).

Each case runs the real entry point (``pinakes_cli.door:main``, what the ``pnk`` script calls)
in a fresh interpreter and reports what it printed, its exit code and every module it loaded.
The first ``--help`` or ``--version`` of an installation is click's; later ones are read from
the front door's cache (:mod:`pinakes_cli.door`), which each test keeps in its own folder.
A top-level import of the engine, numpy or pydantic anywhere on the way (a command module,
render, a plugin's entry module, ``pinakes_core/__init__``) fails these tests. The last case
shows the probe sees a lazy import when a command really opens a KB.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: what the front door must not load: the engine's heavy stacks and its modules.
HEAVY = {
    "numpy",
    "pydantic",
    "pydantic_core",
    "rich",
    "pinakes_core.kb",
    "pinakes_core.models",
    "pinakes_core.config",
    "pinakes_core.search",
    "pinakes_core.index",
}

_PROBE = textwrap.dedent(
    """
    import json, sys

    args = sys.argv[1:]
    sys.argv = ["pnk", *args]
    from pinakes_cli.door import main

    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    report = {"code": code, "modules": sorted(sys.modules)}
    print("\\n" + json.dumps(report), file=sys.stderr)
    """
)


def _run(args: list[str], cwd: Path) -> tuple[str, int, set[str]]:
    stdout, _, code, loaded = _run_full(args, cwd)
    return stdout, code, loaded


def _door_cache(cwd: Path) -> Path:
    """The front door's cache for a run in ``cwd``: beside it, since ``python -c`` puts ``cwd`` on
    ``sys.path`` and a change to a folder on ``sys.path`` rightly empties the cache."""
    return cwd.parent / f"{cwd.name}-door-cache"


def _run_full(
    args: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[str, str, int, set[str]]:
    """Run pnk with ``args``; return its stdout, the rest of its stderr, exit code and modules.

    ``env`` is added to this process's environment; the front door's cache is
    :func:`_door_cache` unless ``env`` names another.
    """
    env = {**os.environ, "PINAKES_FRONT_DOOR_CACHE": str(_door_cache(cwd)), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
    )
    *stderr, last = proc.stderr.strip().splitlines()
    report = json.loads(last)
    return proc.stdout, "\n".join(stderr), report["code"], set(report["modules"])


#: what a cached answer must not load either: click, pluggy and the engine's package.
CLICK_AND_CORE = {
    "click",
    "pluggy",
    "pinakes_core.plugins",
    "pinakes_cli.main",
    "pinakes_cli.root",
}


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_help_and_version_load_no_engine(args: list[str], tmp_path: Path) -> None:
    stdout, code, loaded = _run(args, tmp_path)
    assert code in (0, None)
    if args == ["--version"]:
        assert stdout.startswith("pnk, version ")
    else:
        # The whole command list is there, the plugin's `pnk mcp` included.
        assert "Commands:" in stdout
        for command in ("search", "sync", "show", "fleet", "ask", "plugins", "mcp"):
            assert f"\n  {command} " in stdout, command
    assert "pinakes_cli.main" in loaded  # the first run is click's
    # Plugin commands come through core's plugin manager, which stays light.
    assert "pinakes_core.plugins" in loaded
    assert not HEAVY & loaded, sorted(HEAVY & loaded)
    assert not {"numpy", "pydantic", "rich", "scipy", "fastmcp"} & {m.split(".")[0] for m in loaded}
    if args != ["--version"]:  # --version reads pnk's own version from the metadata
        # No package on the path reads its version from the metadata before it is asked for.
        assert "importlib.metadata" not in loaded

    # The second run prints the same, byte for byte, from the cache: no click, no plugin scan.
    again, code, loaded = _run(args, tmp_path)
    assert code in (0, None)
    assert again == stdout
    assert "pinakes_cli.door" in loaded
    assert not CLICK_AND_CORE & loaded, sorted(CLICK_AND_CORE & loaded)
    # Of core, only the keying shared with pinakes-mcp's front (and the package's lazy init).
    core = {m for m in loaded if m.split(".")[0] == "pinakes_core"}
    assert core == {"pinakes_core", "pinakes_core.kept"}, sorted(core)
    assert "typing" not in loaded


def _hello_plugin(site: Path, summary: str) -> None:
    """A real distribution under ``site`` whose ``pinakes`` entry module adds ``pnk hello``."""
    info = site / "hello_plugin-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: hello-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[pinakes]\nhello = hello_plugin_entry\n", encoding="utf-8"
    )
    (site / "hello_plugin_entry.py").write_text(
        textwrap.dedent(
            f"""
            import click
            import pluggy

            hookimpl = pluggy.HookimplMarker("pinakes")

            @hookimpl
            def register_commands(cli):
                @cli.command()
                def hello():
                    \"\"\"{summary}\"\"\"

            """
        ),
        encoding="utf-8",
    )


def test_the_cached_help_follows_the_plugins_installed_and_their_code(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {"PYTHONPATH": str(site)}
    _hello_plugin(site, "Say hello.")
    first, _, _, loaded = _run_full(["--help"], tmp_path, env)
    assert "\n  hello " in first and "Say hello." in first
    assert "click" in loaded
    cached, _, _, loaded = _run_full(["--help"], tmp_path, env)
    assert cached == first and "click" not in loaded

    # The plugin's code changes (an editable install): the next run asks click again.
    _hello_plugin(site, "Say hello to everyone in the room.")
    edited, _, _, loaded = _run_full(["--help"], tmp_path, env)
    assert "Say hello to everyone in the room." in edited and "click" in loaded

    # The plugin is uninstalled: its command goes with it, though its module is still there.
    shutil.rmtree(site / "hello_plugin-0.1.dist-info")
    gone, _, _, loaded = _run_full(["--help"], tmp_path, env)
    assert "hello" not in gone and "\n  mcp " in gone and "click" in loaded
    cached, _, _, loaded = _run_full(["--help"], tmp_path, env)
    assert cached == gone and "click" not in loaded


def test_an_ascii_stdout_gets_what_click_writes_to_it_cached_or_not(tmp_path: Path) -> None:
    # click takes an ASCII stdout for a misconfigured locale and writes UTF-8 to it (the help
    # holds "SRC → DST"); the front door writes the cached answer the same way.
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    env["PINAKES_FRONT_DOOR_CACHE"] = str(_door_cache(tmp_path))

    def pnk_help() -> bytes:
        script = (
            "import sys; sys.argv = ['pnk', '--help']; from pinakes_cli.door import main; main()"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, timeout=120, cwd=tmp_path, env=env
        )
        assert proc.returncode == 0, proc.stderr.decode()
        return proc.stdout

    first = pnk_help()
    assert "SRC → DST".encode() in first
    assert pnk_help() == first  # from the cache


def test_the_cache_can_be_turned_off_and_a_bad_cache_file_is_ignored(tmp_path: Path) -> None:
    off = {"PINAKES_FRONT_DOOR_CACHE": ""}
    for _ in range(2):
        stdout, _, code, loaded = _run_full(["--version"], tmp_path, off)
        assert code in (0, None) and stdout.startswith("pnk, version ") and "click" in loaded
    assert not _door_cache(tmp_path).exists()

    stdout, _, _ = _run(["--version"], tmp_path)
    (kept,) = _door_cache(tmp_path).iterdir()
    kept.write_text("pnk-front-door 1\nsomething else\n0\npnk, version 0.0.0\n", encoding="utf-8")
    again, code, loaded = _run(["--version"], tmp_path)
    assert again == stdout and "click" in loaded  # the stale file was not believed
    assert kept.read_text(encoding="utf-8").endswith(stdout)  # and was replaced


def test_core_finds_the_plugins_without_importlib_metadata() -> None:
    # Importing importlib.metadata (email, zipfile, csv, ...) costs a pnk start more than a
    # third of `import click`; core reads the entry points itself.
    script = textwrap.dedent(
        """
        import json, sys
        from pinakes_core.plugins import entry_points

        names = [entry.name for entry in entry_points("pinakes")]
        print(json.dumps({"plugins": names, "modules": sorted(sys.modules)}))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    report = json.loads(proc.stdout)
    assert {"graph", "mcp"} <= set(report["plugins"])
    assert "importlib.metadata" not in report["modules"]
    assert not HEAVY & set(report["modules"]), sorted(HEAVY & set(report["modules"]))


def test_a_command_help_loads_no_engine_either(tmp_path: Path) -> None:
    stdout, code, loaded = _run(["search", "--help"], tmp_path)
    assert code in (0, None) and "--fleet" in stdout
    assert not HEAVY & loaded, sorted(HEAVY & loaded)


def test_the_probe_sees_the_engine_when_a_command_opens_a_kb(tmp_path: Path) -> None:
    # Not a KB: `pnk status` fails with one clean message, after importing the engine to try.
    _, code, loaded = _run(["--kb", str(tmp_path), "status"], tmp_path)
    assert code == 1
    assert {"pinakes_core.kb", "pydantic"} <= loaded


def _broken_plugin(site: Path) -> dict[str, str]:
    """Put a real distribution whose ``pinakes`` entry module fails to import under ``site``."""
    info = site / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[pinakes]\nbroken = broken_plugin_entry\n", encoding="utf-8"
    )
    (site / "broken_plugin_entry.py").write_text(
        "raise RuntimeError('boom at import')\n", encoding="utf-8"
    )
    return {"PYTHONPATH": str(site)}


@pytest.mark.parametrize("args", [["--help"], ["plugins"]])
def test_a_broken_plugin_is_reported_once_and_the_others_still_load(
    args: list[str], tmp_path: Path
) -> None:
    # `pnk plugins` asks the plugin manager for its listing after the commands were collected:
    # one manager, so one scan and one warning, not one per manager.
    env = _broken_plugin(tmp_path / "site")
    for _ in range(2):  # a run with a broken plugin is never cached: it warns every time
        stdout, stderr, code, loaded = _run_full(args, tmp_path, env)
        assert code in (0, None)
        assert stderr.count("failed to load") == 1, stderr
    assert "'broken'" in stderr and "boom at import" in stderr
    if args == ["--help"]:
        assert "\n  mcp " in stdout and "(not installed" not in stdout  # the others loaded
        assert not HEAVY & loaded, sorted(HEAVY & loaded)
    else:
        assert "plugin broken (broken_plugin_entry): failed to load" in stdout
        assert "plugin mcp (pinakes_mcp.plugin): register_commands" in stdout
