"""Issue 11 items 3-8, 10, 11 through `pnk`: slices, formats, filters, notes, JSON errors,
watch, plugin commands and host setup. The example KB runs with the real model."""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import threading
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from rich.console import Console

from conftest import FakeHashEmbedder, make_kb
from pinakes_cli import render
from pinakes_cli.main import cli
from pinakes_cli.plugins import KNOWN_COMMANDS, _missing
from pinakes_core import KB, SearchResult
from pinakes_core.index.watching import watch, watched_folders

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("surf") / "distsys-notes"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pinakes"))
    return target


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


def search(kb: Path, *args: str) -> dict[str, object]:
    code, out, err = run("--kb", str(kb), "search", *args, "--json")
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def hit_paths(data: dict[str, object]) -> set[str]:
    hits = data["hits"]
    assert isinstance(hits, list)
    return {h["path"] for h in hits}


@pytest.mark.model
def test_show_slices(kb_dir: Path) -> None:
    code, out, err = run(
        "--kb", str(kb_dir), "show", "consensus/raft.md", "--lines", "8-10", "--json"
    )
    assert code == 0, err
    doc = json.loads(out)
    whole = (kb_dir / "consensus/raft.md").read_text("utf-8").split("\n")
    assert doc["lines"] == [8, 10] and doc["text"] == "\n".join(whole[7:10]) + "\n"
    assert doc["meta"] == {
        "title": "Raft",
        "tags": ["consensus", "raft", "replication"],
        "aliases": ["Raft consensus"],
        "year": 2014,
        "status": "reviewed",
    }
    code, out, _ = run(
        "--kb", str(kb_dir), "show", "consensus/raft.md", "--section", "Terms and roles"
    )
    assert code == 0 and re.search(r"section\s+Raft › Terms and roles", out)
    assert "## Terms and roles" in out and "## Leader election" not in out
    code, out, _ = run(
        "--kb", str(kb_dir), "show", "consensus/raft.md", "--max-tokens", "40", "--json"
    )
    doc = json.loads(out)
    assert doc["truncated"] is True and doc["tokens"] <= 40 < doc["total_tokens"]
    code, _, err = run("--kb", str(kb_dir), "show", "consensus/raft.md", "--lines", "900-910")
    assert code == 1 and "starts past the end" in err
    assert run("--kb", str(kb_dir), "show", "consensus/raft.md", "--lines", "x")[0] == 2


@pytest.mark.model
def test_search_formats_and_highlighting(kb_dir: Path) -> None:
    code, out, _ = run("--kb", str(kb_dir), "search", "raft leader", "--format", "files", "-k", "4")
    assert code == 0
    files = out.split()
    assert files and len(files) == len(set(files)) and all(f.endswith(".md") for f in files)
    code, out, _ = run("--kb", str(kb_dir), "search", "raft leader", "--format", "md", "-k", "2")
    assert out.startswith("# Search: raft leader") and "\n## 1. " in out and "\n> " in out
    code, out, _ = run("--kb", str(kb_dir), "search", "raft leader", "--format", "json")
    assert json.loads(out)["query"] == "raft leader"
    data = json.loads(out)
    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=300)
    render.render_search(console, SearchResult.model_validate(data))
    styled = console.file.getvalue()  # type: ignore[attr-defined]
    assert re.search(r"\x1b\[1;33m(Raft|leader)", styled), "query words are highlighted"
    assert "\x1b[1;33mthe" not in styled.lower(), "stopwords are not"


@pytest.mark.model
def test_search_filters(kb_dir: Path) -> None:
    assert hit_paths(search(kb_dir, "consensus", "--meta", "status=draft", "-k", "20")) == {
        "consensus/leader-election.md",
        "consensus/two-phase-commit.md",
    }
    assert hit_paths(search(kb_dir, "consensus", "--meta", "year<2000", "-k", "20")) == {
        "consensus/paxos.md",
        "consensus/two-phase-commit.md",
    }
    assert hit_paths(
        search(kb_dir, "consensus", "--meta", "status in reviewed", "--meta", "year>2000")
    ) == {"consensus/raft.md"}
    assert hit_paths(search(kb_dir, "leader", "--doc", "consensus/paxos.md")) == {
        "consensus/paxos.md"
    }
    assert hit_paths(search(kb_dir, "leader", "--modified-after", "1d")) != set()
    assert hit_paths(search(kb_dir, "leader", "--modified-before", "2000-01-01")) == set()
    code, _, err = run("--kb", str(kb_dir), "search", "x", "--modified-after", "someday")
    assert code == 2 and "not a date" in err


@pytest.mark.model
def test_empty_results_say_why(kb_dir: Path) -> None:
    data = search(kb_dir, "raft", "--tag", "no-such-tag")
    assert data["hits"] == [] and "No document has the tag 'no-such-tag'" in str(data["note"])
    data = search(kb_dir, "raft", "--path", "nowhere/")
    assert "No document path starts with 'nowhere/'" in str(data["note"])
    code, out, _ = run("--kb", str(kb_dir), "search", "raft", "--meta", "status=lost")
    assert code == 0 and out.startswith("no hits: ") and "status=lost" in out


@pytest.mark.model
def test_errors_print_as_json_with_json(kb_dir: Path) -> None:
    code, out, err = run("--kb", str(kb_dir), "show", "nope.md", "--json")
    assert code == 1 and err == ""
    error = json.loads(out)["error"]
    assert error["type"] == "DocumentNotFoundError" and "nope.md" in error["message"]
    code, out, _ = run("--kb", str(kb_dir), "search", "x", "--meta", "bad key", "--format", "json")
    assert code == 1 and json.loads(out)["error"]["type"] == "MetaFilterError"


@pytest.mark.model
def test_link_json(kb_dir: Path) -> None:
    code, out, err = run(
        "--kb",
        str(kb_dir),
        "link",
        "consensus/paxos.md",
        "fundamentals/cap-theorem.md",
        "--rel",
        "contrasts-with",
        "--json",
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["sidecar"] == "consensus/paxos.md.pnk.yaml"
    assert "rel: contrasts-with" in data["after"] and "contrasts-with" not in data["before"]


def test_plugins_lists_what_is_installed() -> None:
    code, out, _ = run("plugins", "--json")
    assert code == 0
    data = json.loads(out)
    names = {d["distribution"]: d["version"] for d in data["distributions"]}
    assert names["pinakes-cli"] and names["pinakes-mcp"]
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["mcp"]["hooks"] == ["register_commands"] and plugins["mcp"]["loaded"]
    assert data["missing_commands"] == {}
    assert "mcp" in cli.commands and set(KNOWN_COMMANDS) <= set(cli.commands)


def test_a_missing_command_says_what_to_install() -> None:
    group = click.Group("pnk-test")
    group.add_command(_missing("mcp", "pinakes-mcp", "Serve KBs to agents over MCP."))
    from pinakes_cli.root import _Group

    wrapper = _Group("pnk", commands=group.commands)
    result = CliRunner().invoke(wrapper, ["mcp", "--kb", "x"], obj={})
    assert result.exit_code == 1
    assert "pnk mcp needs the pinakes-mcp package" in result.stderr
    assert "pip install pinakes-mcp" in result.stderr
    assert (
        "not installed: pip install pinakes-mcp" in CliRunner().invoke(wrapper, ["--help"]).stdout
    )


def test_front_ends_do_not_import_each_other() -> None:
    cli_src = Path(__file__).resolve().parents[2] / "packages" / "pinakes-cli" / "src"
    for module in cli_src.rglob("*.py"):
        assert "pinakes_mcp" not in module.read_text("utf-8"), module
    code = (
        "import sys, pinakes_cli.main as m; "
        "assert 'mcp' in m.cli.commands; "
        "assert 'fastmcp' not in sys.modules and 'pinakes_mcp.server' not in sys.modules, "
        "sorted(k for k in sys.modules if 'mcp' in k)"
    )
    import subprocess

    subprocess.run([sys.executable, "-c", code], check=True)


def test_watch_syncs_at_start_and_after_changes(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    kb = KB.open(root, embedder=FakeHashEmbedder())
    stop = threading.Event()
    events: list[int] = []

    def sync(count: int) -> None:
        kb.sync()
        events.append(count)

    worker = threading.Thread(
        target=watch, args=(root, sync), kwargs={"debounce_ms": 100, "stop": stop}
    )
    worker.start()
    try:
        deadline = time.time() + 20
        while not events and time.time() < deadline:
            time.sleep(0.05)
        assert events == [0], "the catch-up sync runs at start"
        (root / "new.md").write_text("# New\n\nzebra stripes\n", "utf-8")
        while len(events) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert len(events) >= 2 and events[1] > 0
        assert kb.search("zebra stripes").hits[0].path == "new.md"
    finally:
        stop.set()
        worker.join(10)
        kb.close()
    assert not worker.is_alive()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_watch_ignores_a_symlink_out_of_the_kb_and_sees_new_folders(tmp_path: Path) -> None:
    # notify's recursive watch followed `root.md -> /` and walked the whole file system, dying
    # with PermissionError on the first folder it could not watch (/proc/1/task/1/fdinfo, even
    # as root); `pnk watch` exited with a traceback and the MCP server stopped re-syncing.
    root = make_kb(tmp_path / "kb")
    (root / "outside").symlink_to("/proc")
    (root / "loop").symlink_to(".")
    (root / "site" / "node_modules" / "pkg").mkdir(parents=True)  # never indexed: not watched
    folders = {p.relative_to(root).as_posix() for p in watched_folders(root)}
    assert "outside" not in folders and "loop" not in folders and "." in folders
    assert "site" in folders and not any("node_modules" in f for f in folders)
    kb = KB.open(root, embedder=FakeHashEmbedder())
    stop = threading.Event()
    events: list[int] = []
    failures: list[BaseException] = []

    def sync(count: int) -> None:
        kb.sync()
        events.append(count)

    def run() -> None:
        try:
            watch(root, sync, debounce_ms=100, stop=stop)
        except BaseException as exc:  # the test reports it below
            failures.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    try:
        deadline = time.time() + 30
        while not events and not failures and time.time() < deadline:
            time.sleep(0.05)
        (root / "fresh" / "deeper").mkdir(parents=True)
        time.sleep(0.5)  # the folder's own event restarts the watch on the new folders
        (root / "fresh" / "deeper" / "late.md").write_text("# Late\n\nokapi herds\n", "utf-8")
        while time.time() < deadline and not failures:
            hits = kb.search("okapi herds", channels=["bm25"]).hits
            if hits and hits[0].path == "fresh/deeper/late.md":
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"the new folder's file was never synced: {failures}")
    finally:
        stop.set()
        worker.join(10)
        kb.close()
    assert not failures and not worker.is_alive()


# -- pnk mcp config (item 10) ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("claude-desktop", "mcpServers"),
        ("claude-code", "mcpServers"),
        ("cursor", "mcpServers"),
        ("vscode", "servers"),
    ],
)
def test_mcp_config_prints_absolute_command(tmp_path: Path, host: str, key: str) -> None:
    kb = make_kb(tmp_path / "notes")
    code, out, err = run("mcp", "config", "--host", host, "--kb", str(kb), "--json")
    assert code == 0, err
    entry = json.loads(out)["config"][key]["pinakes"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).name == "pinakes-mcp"
    assert entry["args"] == ["--kb", str(kb.resolve())]
    assert (entry.get("type") == "stdio") == (host in ("vscode", "claude-code"))


def test_mcp_config_merges_without_clobbering(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes")
    config = tmp_path / "claude_desktop_config.json"
    other = {"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}
    config.write_text(json.dumps(other), "utf-8")
    args = ("mcp", "config", "--host", "claude-desktop", "--kb", str(kb), "--file", str(config))
    code, out, err = run(*args, "--write")
    assert code == 0, err
    merged = json.loads(config.read_text("utf-8"))
    assert merged["theme"] == "dark" and merged["mcpServers"]["other"] == {"command": "x"}
    assert merged["mcpServers"]["pinakes"]["args"] == ["--kb", str(kb.resolve())]
    assert json.loads((tmp_path / "claude_desktop_config.json.bak").read_text("utf-8")) == other
    code, out, _ = run(*args, "--write")
    assert code == 0 and "nothing written" in out
    assert not (tmp_path / "claude_desktop_config.json.bak2").exists()
    code, out, _ = run(*args, "--write", "--no-watch", "--json")
    assert json.loads(out)["action"] == "replaced"
    assert (
        json.loads(config.read_text("utf-8"))["mcpServers"]["pinakes"]["args"][-1] == "--no-watch"
    )
    assert (tmp_path / "claude_desktop_config.json.bak2").exists()


def test_mcp_config_refuses_a_file_it_cannot_parse(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "notes")
    config = tmp_path / "mcp.json"
    config.write_text('{\n  // a comment\n  "servers": {}\n}\n', "utf-8")
    before = config.read_text("utf-8")
    code, _, err = run(
        "mcp", "config", "--host", "vscode", "--kb", str(kb), "--file", str(config), "--write"
    )
    assert code == 1 and "is not plain JSON" in err and "Traceback" not in err
    assert config.read_text("utf-8") == before


def test_mcp_config_write_keeps_a_symlink_its_mode_bom_and_line_ends(tmp_path: Path) -> None:
    # A dotfiles-managed config (a symlink) was replaced by a detached copy, a 0644 file came
    # back 0600, and a Windows file (BOM, CRLF) was refused for its BOM.
    kb = make_kb(tmp_path / "notes")
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_bytes(b'\xef\xbb\xbf{\r\n  "mcpServers": {"other": {"command": "x"}}\r\n}\r\n')
    real.chmod(0o644)
    link = tmp_path / ".mcp.json"
    link.symlink_to(real)
    code, _, err = run(
        "mcp", "config", "--host", "claude-code", "--kb", str(kb), "--file", str(link), "--write"
    )
    assert code == 0, err
    assert link.is_symlink() and link.resolve() == real
    raw = real.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf{\r\n") and b"\n" not in raw.replace(b"\r\n", b"")
    assert set(json.loads(raw.decode("utf-8-sig"))["mcpServers"]) == {"other", "pinakes"}
    assert real.stat().st_mode & 0o777 == 0o644


def test_mcp_config_write_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    # A link into a dotfiles checkout that was not there made --write create the checkout's
    # folders and a fresh config at the link's target.
    kb = make_kb(tmp_path / "notes")
    link = tmp_path / ".mcp.json"
    link.symlink_to(tmp_path / "dotfiles" / "mcp" / "mcp.json")
    code, _, err = run(
        "mcp", "config", "--host", "claude-code", "--kb", str(kb), "--file", str(link), "--write"
    )
    assert code == 1 and "which does not exist" in err and "Traceback" not in err
    assert link.is_symlink() and not (tmp_path / "dotfiles").exists()
    # ... nor through a folder link that dangles, nor a link that loops (both were tracebacks).
    (tmp_path / "cfgdir").symlink_to(tmp_path / "missing-dotfiles")
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    for file, complaint in (
        (tmp_path / "cfgdir" / "mcp.json", "which does not exist"),
        (loop, "loops"),
    ):
        code, _, err = run(
            "mcp", "config", "--host", "cursor", "--kb", str(kb), "--file", str(file), "--write"
        )
        assert code == 1 and complaint in err and "Traceback" not in err, err
    assert not (tmp_path / "missing-dotfiles").exists()


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ('{"mcpServers": {}}'.encode("utf-16"), "is not UTF-8 text"),
        (b'{"a": 1, "a": 2}', "the key 'a' appears twice"),
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
    ],
)
def test_mcp_config_write_refuses_what_it_cannot_rewrite_faithfully(
    tmp_path: Path, content: bytes, complaint: str
) -> None:
    # UTF-16 and a 100,000-deep nest were tracebacks; a duplicate key was silently dropped.
    kb = make_kb(tmp_path / "notes")
    config = tmp_path / "mcp.json"
    config.write_bytes(content)
    code, _, err = run(
        "mcp", "config", "--host", "cursor", "--kb", str(kb), "--file", str(config), "--write"
    )
    assert code == 1 and complaint in err and "Traceback" not in err
    assert config.read_bytes() == content
    assert not list(tmp_path.glob("mcp.json.bak*"))
