"""A hostile MCP client: traversal and oversize attempts over stdio and HTTP (issue 12).

The real ``pinakes-mcp`` entry point runs in a subprocess (``fake_server.py``: only the
embedder is fake; one test runs the real executable with the real model). Every request must
be answered within seconds, none may return what lies outside the KB, and every reply must
stay within its budget.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rel_helpers import HERE, StdioSession, http_server, post, sync
from rel_ledger import record

from conftest import SMALL_KB, doc_ids, make_kb
from pinakes_mcp.tools import MAX_READ_TOKENS, RESULT_BUDGET_TOKENS

SECRET = "OUTSIDE-SECRET-51c9"
ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


def _hostile_kb(base: Path, *, synced: bool = True, heavy: bool = True) -> Path:
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# {SECRET}\n\n{SECRET}\n")
    files: dict[str, str | bytes] = {
        **SMALL_KB,
        "swapped.md": "# Swapped\n\nThis file becomes a symlink after the sync.\n",
    }
    heavy_files: dict[str, str | bytes] = {
        "big.md": "# Big\n\n"
        + "".join(f"## Part {i}\n\n" + "lorem ipsum " * 400 + "\n\n" for i in range(60)),
        "manylinks.md": "# Many links\n\n" + " ".join(f"[[missing-{i}]]" for i in range(3_000)),
        "tagged.md": "---\ntags: ["
        + ", ".join(f"tag{i}" for i in range(256))
        + "]\n---\n# Tagged\n",
    }
    root = make_kb(base / "notes", {**files, **(heavy_files if heavy else {})}, name="notes")
    (root / "outlink.md").symlink_to(outside / "secret.md")
    (root / "notes" / "escape").symlink_to(outside)
    if synced:
        sync(root)
        _swap(root)
    return root


def _swap(root: Path) -> None:
    """Replace an indexed document by a symlink to the outside secret."""
    (root / "swapped.md").unlink()
    (root / "swapped.md").symlink_to(root.parent / "outside" / "secret.md")


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _hostile_kb(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def session(kb_root: Path) -> Iterator[StdioSession]:
    # --no-watch: the index must keep the swapped document, as if its change were unseen.
    server = StdioSession(
        [sys.executable, str(HERE / "fake_server.py"), "--kb", str(kb_root), "--no-watch"]
    )
    yield server
    server.close()


TRAVERSALS = [
    "../outside/secret.md",
    "notes/../../outside/secret.md",
    "notes\\..\\..\\outside\\secret.md",
    "%2e%2e/outside/secret.md",
    "/etc/passwd",
    "~/.ssh/id_rsa",
    "C:\\Windows\\win.ini",
    "file:///etc/passwd",
    "pnk://other-kb/" + ULID,
    "pnk://notes/../../etc/passwd",
    "outlink.md",
    "notes/escape/secret.md",
    "swapped.md",
    "raft.md\x00.txt",
    "\ud800",
    "a" * 999,
    " ",
]


@pytest.mark.parametrize("ref", TRAVERSALS, ids=range(len(TRAVERSALS)))
def test_no_reference_reads_outside_the_kb(session: StdioSession, ref: str) -> None:
    for tool, args in (
        ("pinakes_read", {"doc": ref}),
        ("pinakes_links", {"doc": ref}),
        ("pinakes_read", {"doc": "raft.md", "kb": ref}),
        ("pinakes_search", {"query": "secret", "path": ref}),
    ):
        is_error, text = session.call(tool, args)
        assert SECRET not in text, (tool, args)
        if tool != "pinakes_search":
            assert is_error, (tool, args, text[:300])
        record("MCP traversal attempts (stdio)", tried=1, escapes=int(SECRET in text))


def test_resources_refuse_traversal(session: StdioSession, kb_root: Path) -> None:
    for uri in (
        "pnk://notes/../../etc/passwd",
        "pnk://notes/%2e%2e%2foutside",
        f"pnk://other/{ULID}",
        "file:///etc/passwd",
        f"pnk://notes/{doc_ids(kb_root)['swapped.md']}",
    ):
        reply = session.request("resources/read", {"uri": uri})
        assert "error" in reply, uri
        assert SECRET not in json.dumps(reply)
        record("MCP traversal attempts (stdio)", tried=1)


OVERSIZE: list[tuple[str, dict[str, Any]]] = [
    ("pinakes_search", {"query": "x" * 2_001}),
    ("pinakes_search", {"query": "raft", "k": 10**6}),
    ("pinakes_search", {"query": "raft", "tags": [f"t{i}" for i in range(1_000)]}),
    ("pinakes_search", {"query": "raft", "tags": ["x" * 10_000]}),
    ("pinakes_read", {"doc": "big.md", "max_tokens": 10**9}),
    ("pinakes_read", {"doc": "big.md", "section": "x" * 100_000}),
    ("pinakes_links", {"doc": "raft.md", "depth": 10**9}),
    ("pinakes_links", {"doc": "raft.md", "query": "q" * 100_000}),
]


@pytest.mark.parametrize(("tool", "args"), OVERSIZE, ids=range(len(OVERSIZE)))
def test_oversize_arguments_are_refused(
    session: StdioSession, tool: str, args: dict[str, Any]
) -> None:
    is_error, text = session.call(tool, args)
    assert is_error, text[:300]
    assert len(text) < 5_000  # one sentence, not a dump of the argument
    record("MCP oversize attempts (stdio)", tried=1)


def test_replies_stay_within_budget(session: StdioSession) -> None:
    checks = [
        (
            ("pinakes_read", {"doc": "big.md", "max_tokens": MAX_READ_TOKENS}),
            MAX_READ_TOKENS + RESULT_BUDGET_TOKENS,
        ),
        (("pinakes_read", {"doc": "tagged.md"}), 4_000 + RESULT_BUDGET_TOKENS),
        (("pinakes_links", {"doc": "manylinks.md"}), RESULT_BUDGET_TOKENS),
        (("pinakes_search", {"query": "lorem ipsum part", "k": 50}), RESULT_BUDGET_TOKENS + 3_000),
    ]
    for (tool, args), budget in checks:
        is_error, text = session.call(tool, args)
        assert not is_error, text[:300]
        # The text content and the structured content each carry the reply once.
        assert len(text) / 2 / 4 <= budget * 1.05, (tool, len(text))
        record("MCP oversize attempts (stdio)", tried=1)


def test_http_refuses_hostile_hosts_and_origins(kb_root: Path) -> None:
    hostile = [
        {"Host": "attacker.example"},
        {"Host": "localhost.attacker.example"},
        {"Host": "127.0.0.1.nip.io"},
        {"Host": "[::1]:1"},
        {"Host": ""},
        {"Origin": "http://attacker.example"},
        {"Origin": "http://localhost.attacker.example"},
        {"Origin": "null"},
        {"Origin": "file://"},
        {"Origin": "chrome-extension://abcdef"},
    ]
    with http_server(kb_root) as (port, _):
        for headers in hostile:
            status = post(port, headers)
            assert status in (400, 403, 421), (headers, status)
            record("MCP hostile Host/Origin (HTTP)", tried=1, escapes=int(status == 200))
        assert post(port, {"Origin": f"http://127.0.0.1:{port}"}) == 200
        # A request the JSON parser refuses (a lone surrogate escape) is still answered.
        body = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"q":"\\ud800"}}'
        assert post(port, {}, body) in (200, 400)


@pytest.mark.model
@pytest.mark.integration
def test_the_real_executable_with_the_real_model_answers_hostile_requests(tmp_path: Path) -> None:
    root = _hostile_kb(tmp_path, synced=False, heavy=False)
    executable = Path(sys.executable).with_name("pinakes-mcp")
    # The server syncs the never-synced KB with the real model before it answers.
    server = StdioSession([str(executable), "--kb", str(root)], start_timeout=600)
    _swap(root)
    try:
        for tool, args in [
            ("pinakes_search", {"query": "\ud800 raft"}),
            ("pinakes_search", {"query": "raft", "path": "\udcff"}),
            ("pinakes_read", {"doc": "../outside/secret.md"}),
            ("pinakes_read", {"doc": "swapped.md"}),
            ("pinakes_links", {"doc": "\udfff"}),
        ]:
            _, text = server.call(tool, args, timeout=120)
            assert SECRET not in text
        is_error, text = server.call(
            "pinakes_search", {"query": "how does raft elect a leader"}, timeout=120
        )
        assert not is_error and "raft.md" in text
    finally:
        server.close()
