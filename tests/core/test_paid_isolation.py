"""The free path never imports litellm; without the ``ask`` extra, ``pnk ask`` says what to install.

Both run in fresh subprocesses: an import hook records (and refuses) every attempt to import
litellm while the real CLI commands and the real MCP server (fastmcp in-memory client) run.
The embedder is the FAKE hash model (the model is not what is under test).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import make_kb
from pinakes_core.paid.llm import install_hint

TESTS = Path(__file__).resolve().parents[1]


def script(body: str) -> str:
    return f"TESTS_DIR = {str(TESTS)!r}\n" + body


_GUARD = """
import importlib.abc, sys
attempts = []

class NoLitellm(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "litellm":
            attempts.append(name)
            raise ImportError("litellm is blocked in this test")
        return None

sys.meta_path.insert(0, NoLitellm())
sys.path.insert(0, TESTS_DIR)
from conftest import FakeHashEmbedder
import pinakes_core.kb
pinakes_core.kb.load_embedder = lambda config: FakeHashEmbedder()
from pinakes_cli.main import cli

def run(*args):
    try:
        cli.main(list(args), standalone_mode=False, obj={})
    except SystemExit as exc:
        return exc.code or 0
    return 0
"""

FREE_PATH = _GUARD + textwrap.dedent(
    """
    root = sys.argv[1]
    for args in (["sync"], ["search", "raft leader"], ["links", "raft.md"], ["doctor"],
                 ["status"], ["budget"], ["review"], ["show", "raft.md"], ["--help"],
                 ["ask", "--help"]):
        code = run("--kb", root, *args)
        assert code == 0, (args, code)

    import anyio
    from fastmcp import Client
    from pinakes_core import KB
    from pinakes_mcp import create_server

    async def serve():
        kb = KB.open(root, embedder=FakeHashEmbedder())
        async with Client(create_server([kb])) as client:
            await client.call_tool("pinakes_search", {"query": "raft leader"})
            await client.call_tool("pinakes_read", {"doc": "raft.md"})
            await client.call_tool("pinakes_links", {"doc": "raft.md"})
            await client.call_tool("pinakes_kbs", {})

    anyio.run(serve)
    assert attempts == [], attempts
    assert not [m for m in sys.modules if m.split(".")[0] == "litellm"]
    print("OK")
    """
)


def test_free_commands_and_the_mcp_server_never_import_litellm(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    proc = subprocess.run(
        [sys.executable, "-c", script(FREE_PATH), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("OK")


MISSING_EXTRA = _GUARD + textwrap.dedent(
    """
    from click.testing import CliRunner
    result = CliRunner().invoke(cli, ["--kb", sys.argv[1], "ask", "how does raft work"], obj={})
    print(result.exit_code)
    print(result.output)
    assert attempts == [] or all(a == "litellm" for a in attempts), attempts
    """
)


def test_ask_without_the_extra_names_the_install_command(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    proc = subprocess.run(
        [sys.executable, "-c", script(MISSING_EXTRA), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    code, _, output = proc.stdout.partition("\n")
    assert code == "1"
    assert "needs the optional paid-path extra (litellm)" in output
    # The command for this environment's install route (a workspace clone here; each route's
    # command is checked in test_paid_routes.py and, installed for real, test_install_routes.py).
    assert f"Install it: {install_hint()}" in output
    assert "Traceback" not in output
