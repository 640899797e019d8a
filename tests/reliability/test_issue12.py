"""Issue 12's ten "must fix" items: one regression test (or more) each.

Every test here failed on main at 9c07bc4 and passes with the fix; see docs/reliability.md.
The MCP ones (items 8 and 9) run the real ``pinakes-mcp`` entry point in a subprocess
(``fake_server.py``: only the embedder is the fake one).
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from rel_helpers import (
    BOMB,
    HERE,
    StdioSession,
    env,
    free_port,
    http_server,
    post,
    remove_tree,
    sync,
    sync_process,
)
from rel_watchdog import LIMIT_BYTES, run_guarded

from conftest import FakeHashEmbedder, doc_ids, make_kb, scalar
from pinakes_core import KB, LockError, PinakesError, SyncReport
from pinakes_core.read.sidecar import append_link

ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
OTHER = "01ARZ3NDEKTSV4RRFFQ69G5FAW"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _skips(report: SyncReport, path: str) -> list[str]:
    return [s.reason for s in report.skipped if s.path == path]


def _guarded_sync(root: Path, timeout: float = 60.0) -> SyncReport:
    """Sync in a forked child under the 1.5 GB ceiling; fail on a hang, a blow-up or a crash."""
    outcome = run_guarded(lambda: sync(root).model_dump_json(), timeout=timeout)
    assert not outcome.hung, f"sync hung (killed after {timeout:.0f} s)"
    assert outcome.error_type is None, outcome.error
    assert outcome.peak_rss < LIMIT_BYTES, f"peak RSS {outcome.peak_rss / 2**20:.0f} MB"
    return SyncReport.model_validate_json(outcome.value)


# -- 1. resource exhaustion from one file -----------------------------------------------------


def test_1_frontmatter_alias_bomb_is_refused_with_a_warning(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"bomb.md": f"---\n{BOMB}---\n# Bomb\n\nstill indexed\n"})
    report = _guarded_sync(root)
    assert report.added == ["bomb.md"]
    assert any("bomb.md" in w and "frontmatter" in w and "nodes" in w for w in report.warnings)


def test_1_sidecar_alias_bomb_leaves_the_document_out(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nfine\n", "bomb.md": "# Bomb\n"})
    (root / "bomb.md.pnk.yaml").write_text(f"id: {ULID}\n{BOMB}")
    report = _guarded_sync(root)
    assert report.added == ["a.md"]
    (reason,) = _skips(report, "bomb.md")
    assert "nodes" in reason


def test_1_sidecar_symlinked_to_dev_zero_is_not_read(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nfine\n", "z.md": "# Z\n"})
    (root / "z.md.pnk.yaml").symlink_to("/dev/zero")
    report = _guarded_sync(root, timeout=30)
    assert report.added == ["a.md"]
    (reason,) = _skips(report, "z.md")
    assert "outside the KB" in reason


def test_1_sidecar_that_is_a_fifo_never_hangs_sync(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nfine\n", "f.md": "# F\n"})
    os.mkfifo(root / "f.md.pnk.yaml")
    report = _guarded_sync(root, timeout=30)
    assert report.added == ["a.md"]
    (reason,) = _skips(report, "f.md")
    assert "not a regular file" in reason


def test_1_document_swapped_for_a_fifo_after_sync_is_not_read(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nfine\n"})
    sync(root)
    (root / "a.md").unlink()
    os.mkfifo(root / "a.md")

    def read() -> str:
        with KB.open(root, embedder=FakeHashEmbedder()) as kb:
            try:
                kb.read("a.md")
            except PinakesError as exc:
                return str(exc)
            return "read"

    outcome = run_guarded(read, timeout=20)
    assert not outcome.hung and "not a regular file" in outcome.value


# -- 2. sidecars through symlinks leading outside the KB ---------------------------------------


def test_2_a_sidecar_symlinked_outside_the_kb_is_never_indexed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text(f"id: {ULID}\ntitle: SECRET TITLE\ntags: [secret-tag]\naliases: [secret]\n")
    root = make_kb(tmp_path / "kb", {"note.md": "# Note\n\nhello\n"})
    (root / "note.md.pnk.yaml").symlink_to(outside)
    report = sync(root)
    (reason,) = _skips(report, "note.md")
    assert "leads outside the KB" in reason
    assert scalar(root, "SELECT COUNT(*) FROM documents WHERE title LIKE '%SECRET%'") == 0
    assert scalar(root, "SELECT COUNT(*) FROM doc_tags WHERE tag = 'secret-tag'") == 0
    # A link write never goes through it either.
    assert outside.read_text().startswith(f"id: {ULID}\n")


def test_2_link_writes_refuse_a_sidecar_symlinked_outside(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n", "b.md": "# B\n"})
    sync(root)
    outside = tmp_path / "outside.yaml"
    outside.write_text("id: 01ARZ3NDEKTSV4RRFFQ69G5FAX\n")
    side = root / "a.md.pnk.yaml"
    side.unlink()
    side.symlink_to(outside)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb, pytest.raises(PinakesError) as info:
        kb.add_link("a.md", "b.md", "cites")
    assert "outside the KB" in str(info.value)
    assert outside.read_text() == "id: 01ARZ3NDEKTSV4RRFFQ69G5FAX\n"
    assert side.is_symlink()


# -- 3. one name or one depth fails every sync --------------------------------------------------


def test_3_a_file_name_that_is_not_utf8_is_one_skip_line(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"ok.md": "# Ok\n\nfine\n"})
    base = os.fsencode(root)
    with open(os.path.join(base, b"lat\xe9.md"), "wb") as handle:
        handle.write(b"# Latin\n")
    os.mkdir(os.path.join(base, b"dir\xff"))
    with open(os.path.join(base, b"dir\xff", b"inner.md"), "wb") as handle:
        handle.write(b"# Inner\n")
    report = sync(root)
    assert report.added == ["ok.md"]
    assert [s.path for s in report.skipped] == ["dir\\xff", "lat\\xe9.md"]
    assert all("UTF-8" in s.reason for s in report.skipped)
    json.dumps(report.model_dump())  # printable: no surrogates left
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.status()
        kb.doctor()


def test_3_folders_nested_1100_deep_are_one_skip_line(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"top.md": "# Top\n\nfine\n"})
    deep = os.fsencode(root)
    os.chdir(deep)  # build the tower with short relative paths
    try:
        for _ in range(1_100):
            os.mkdir(b"d")
            os.chdir(b"d")
        Path("bottom.md").write_text("# Bottom\n")
    finally:
        os.chdir(tmp_path)
    try:
        report = sync(root)
        assert report.added == ["top.md"]
        (skip,) = report.skipped
        assert "nested more than" in skip.reason
        with KB.open(root, embedder=FakeHashEmbedder()) as kb:
            kb.status()
            kb.doctor()
    finally:
        remove_tree(root / "d")  # pytest's own clean-up of old temp folders recurses


# -- 4. text that cannot be split ---------------------------------------------------------------


def test_4_text_without_spaces_is_cut_by_tokens(tmp_path: Path) -> None:
    blob = base64.b64encode(os.urandom(60_000)).decode()
    root = make_kb(tmp_path / "kb", {"blob.md": f"# Blob\n\n{'x' * 300_000}\n\n{blob}\n"})
    sync(root)
    count, longest, most = (
        scalar(root, "SELECT COUNT(*) FROM chunks"),
        scalar(root, "SELECT MAX(LENGTH(text)) FROM chunks"),
        scalar(root, "SELECT MAX(tokens) FROM chunks"),
    )
    assert count > 100
    assert longest <= 256 * 16
    assert most <= 256


def test_4_data_uris_are_shortened_before_chunking(tmp_path: Path) -> None:
    image = base64.b64encode(os.urandom(300_000)).decode()
    root = make_kb(
        tmp_path / "kb",
        {"pic.md": f"# Picture\n\n![plot](data:image/png;base64,{image})\n\nCaption words.\n"},
    )
    sync(root)
    assert scalar(root, "SELECT COUNT(*) FROM chunks") == 1
    text = scalar(root, "SELECT text FROM chunks")
    assert "data:image/png;base64,…" in text and "Caption words." in text


@pytest.mark.anyio
async def test_4_a_giant_first_hit_is_cut_to_the_reply_budget(tmp_path: Path) -> None:
    from fastmcp import Client

    from pinakes_mcp.server import create_server
    from pinakes_mcp.tools import RESULT_BUDGET_TOKENS

    root = make_kb(tmp_path / "kb", {"big.md": "# Big\n\nkumquat orchard notes\n"})
    sync(root)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb, sqlite_chunk_made_huge(root):
        async with Client(create_server([kb])) as client:
            result = await client.call_tool("pinakes_search", {"query": "kumquat"})
    reply = result.structured_content
    assert reply is not None and reply["hits"]
    assert reply["hits"][0]["text_truncated"] is True
    assert reply["truncated"] is True
    assert len(json.dumps(reply["hits"], ensure_ascii=False)) / 4 <= RESULT_BUDGET_TOKENS + 50


@contextlib.contextmanager
def sqlite_chunk_made_huge(root: Path) -> Iterator[None]:
    """Make the chunk's text 2 MB, as a store written before the hard split could hold.

    Chunking no longer makes such a chunk; the reply cap must hold whatever the store holds.
    """
    import sqlite3

    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        conn.execute("UPDATE chunks SET text = ? WHERE ordinal = 0", ("kumquat " * 250_000,))
        conn.commit()
    finally:
        conn.close()
    yield


# -- 5. crash windows ------------------------------------------------------------------------


def test_5_a_kill_before_link_resolution_is_healed_by_the_next_sync(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n\nSee [b](b.md).\n", "b.md": "# B\n"})

    def killed_sync() -> None:
        import pinakes_core.index.sync

        def die(*args: Any, **kwargs: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)

        pinakes_core.index.sync.resolve_all = die  # type: ignore[assignment]
        sync(root)

    outcome = run_guarded(killed_sync, timeout=60)
    assert outcome.killed_by == signal.SIGKILL
    assert scalar(root, "SELECT COUNT(*) FROM documents") == 2  # the documents committed
    assert sync(root).added == []  # nothing changed on disk ...
    dst = scalar(root, "SELECT dst_doc FROM links WHERE target = 'b.md'")
    assert dst == doc_ids(root)["b.md"]  # ... and yet the links are resolved


def test_5_a_temp_file_left_by_a_killed_sidecar_write_is_removed(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"a.md": "# A\n"})

    def killed_write() -> None:
        import pinakes_core.read.sidecar

        real_replace = os.replace

        def die_on_sidecars(src: Any, dst: Any) -> None:
            if str(dst).endswith(".pnk.yaml"):  # between the temp write and its rename
                os.kill(os.getpid(), signal.SIGKILL)
            real_replace(src, dst)

        pinakes_core.read.sidecar.os.replace = die_on_sidecars  # type: ignore[assignment]
        sync(root)

    outcome = run_guarded(killed_write, timeout=60)
    assert outcome.killed_by == signal.SIGKILL
    (temp,) = [p for p in root.iterdir() if p.name.endswith(".tmp")]
    assert temp.name.startswith(".pnk-")  # the short temp name (issue 34)
    report = sync(root)
    assert report.added == ["a.md"]
    assert not [p for p in root.iterdir() if p.name.endswith(".tmp")]


def test_5_a_live_writers_temp_file_is_left_alone(tmp_path: Path) -> None:
    import fcntl

    root = make_kb(tmp_path / "kb", {"a.md": "# A\n"})
    temp = root / ".a.md.pnk.yaml.abcd1234.tmp"
    temp.write_text("id: x\n")
    with temp.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a writer holds it until its rename
        sync(root)
        assert temp.exists()
    sync(root)
    assert not temp.exists()


# -- 6. the lock race ------------------------------------------------------------------------


def test_6_a_sync_that_holds_the_lock_before_writing_its_pid_still_holds_it(
    tmp_path: Path,
) -> None:
    root = make_kb(tmp_path / "kb")
    lock = root / ".pinakes" / "sync.lock"
    lock.parent.mkdir()
    # Another sync between creating the lock and writing its pid: the file is empty.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            "fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('in the window', flush=True)\n"
            "time.sleep(60)\n",
            str(lock),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "in the window"
        assert lock.read_text() == ""
        with pytest.raises(LockError):
            sync(root)
        assert lock.exists()
    finally:
        holder.kill()
        holder.wait()
    assert len(sync(root).added) == 4


# -- 7. readers during --rebuild -------------------------------------------------------------


def test_7_readers_keep_answering_during_another_process_rebuild(tmp_path: Path) -> None:
    files: dict[str, str | bytes] = {
        f"n{i:03d}.md": f"# Note {i}\n\nRaft leader election note {i}.\n" for i in range(120)
    }
    root = make_kb(tmp_path / "kb", files)
    sync(root)
    reader = KB.open(root, embedder=FakeHashEmbedder())
    first_store = reader.store().path
    (root / "zebra.md").write_text("# Zebra\n\nThe zebra crossing note.\n")
    rebuild = sync_process(root, "--rebuild", delay=0.15)  # ~3 s: one batch of a few chunks
    answers = fresh_answers = 0
    try:
        while rebuild.poll() is None:
            assert len(reader.search("raft leader election", k=5).hits) == 5
            assert reader.read("n007.md").title == "Note 7"
            answers += 1
            with KB.open(root, embedder=FakeHashEmbedder()) as fresh:
                assert len(fresh.search("raft leader election", k=5).hits) == 5
                fresh_answers += 1
            time.sleep(0.05)
    finally:
        _, err = rebuild.communicate(timeout=120)
    assert rebuild.returncode == 0, err
    assert answers >= 3 and fresh_answers >= 3, (answers, fresh_answers)
    # After the swap the long-lived reader notices it and sees the rebuilt store.
    hits = reader.search("zebra crossing", k=1).hits
    assert hits and hits[0].path == "zebra.md"
    assert reader.store().path != first_store
    reader.close()
    # Once nobody reads the old generation, its files go at the next sync.
    sync(root)
    assert not first_store.exists()
    assert not Path(f"{first_store}-wal").exists()


def test_7_a_killed_rebuild_leaves_the_current_store_untouched(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    before = (root / ".pinakes" / "index.db").resolve()

    def killed_rebuild() -> None:
        import pinakes_core.index.sync

        def die(*args: Any, **kwargs: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)

        pinakes_core.index.sync.resolve_all = die  # type: ignore[assignment]
        sync(root, rebuild=True)

    assert run_guarded(killed_rebuild, timeout=60).killed_by == signal.SIGKILL
    assert (root / ".pinakes" / "index.db").resolve() == before
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        assert len(kb.search("raft", k=3).hits) == 3
    sync(root)  # and the half-built generation is cleaned away
    generations = sorted(p.name for p in (root / ".pinakes").glob("index.*.db"))
    assert generations == [before.name]


# -- 8. query and argument hardening ---------------------------------------------------------

BAD_ARGUMENTS: list[tuple[dict[str, Any], str]] = [
    ({"k": 0}, "k must be"),
    ({"k": -1}, "k must be"),
    ({"k": 2**63}, "k must be"),
    ({"k": True}, "k must be"),
    ({"k": "5"}, "k must be"),
    ({"tags": "time"}, "tags must be a list"),
    ({"tags": [1]}, "must be a string"),
    ({"entities": "E-4012"}, "entities must be a list"),
    ({"channels": "bm25"}, "channels must be a list"),
    ({"doc_ids": ["raft.md"]}, "not a document ULID"),
    ({"path": ".."}, "not a folder inside the KB"),
    ({"path": "/"}, "not a folder inside the KB"),
    ({"path": "../x"}, "not a folder inside the KB"),
    ({"path": "~/notes"}, "not a folder inside the KB"),
    ({"path": "C:/notes"}, "not a folder inside the KB"),
    ({"modified_after": float("nan")}, "finite"),
    ({"modified_after": float("inf")}, "finite"),
    ({"modified_before": float("-inf")}, "finite"),
    ({"modified_after": "yesterday"}, "UNIX time or a datetime"),
]


@pytest.fixture
def synced(tmp_path: Path) -> Iterator[KB]:
    root = make_kb(tmp_path / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        yield kb


@pytest.mark.parametrize(("args", "needle"), BAD_ARGUMENTS, ids=[str(a) for a, _ in BAD_ARGUMENTS])
def test_8_bad_arguments_are_one_clear_sentence(
    synced: KB, args: dict[str, Any], needle: str
) -> None:
    with pytest.raises(PinakesError) as info:
        synced.search("leader", **args)
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "args",
    [
        {"modified_after": 1e20},
        {"modified_after": -1e20},
        {"modified_after": datetime(9999, 12, 31)},
        {"modified_before": datetime(1, 1, 1)},
        {"tags": ["\ud800"]},
        {"path": "\udcff/"},
        {"entities": ["\ud800"]},
        {"concepts": ["\udfff x"]},
    ],
    ids=str,
)
def test_8_extreme_values_are_sanitised(synced: KB, args: dict[str, Any]) -> None:
    result = synced.search("leader", **args)
    assert isinstance(result.hits, list)
    json.dumps(result.model_dump())


@pytest.mark.parametrize("query", ["\ud800", "raft \udcff leader", "\udfff" * 50, "x\ud83e"])
def test_8_lone_surrogates_in_the_query_are_replaced(synced: KB, query: str) -> None:
    result = synced.search(query)
    assert "\ufffd" in result.query
    json.dumps(result.model_dump())
    assert isinstance(synced.search(query, channels=["bm25"]).hits, list)


def test_8_bad_references_and_link_arguments(synced: KB) -> None:
    for ref in ("\ud800", "", "x" * 5_000, "../../etc/passwd", "/etc/passwd"):
        with pytest.raises(PinakesError):
            synced.read(ref)
    with pytest.raises(PinakesError):
        synced.links("raft.md", depth=0)
    with pytest.raises(PinakesError):
        synced.links("raft.md", depth=-1)


def test_8_every_hostile_request_over_stdio_is_answered(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    # StdioSession fails on any request that gets no answer within its time limit.
    server = StdioSession([sys.executable, str(HERE / "fake_server.py"), "--kb", str(root)])
    try:
        for tool, args in [
            ("pinakes_search", {"query": "\ud800"}),
            ("pinakes_search", {"query": "raft", "tags": ["\udcff"]}),
            ("pinakes_search", {"query": "raft", "path": "\ud800/"}),
            ("pinakes_search", {"query": "raft", "path": ".."}),
            ("pinakes_search", {"query": "raft", "k": 2**63}),
            ("pinakes_search", {"query": "raft", "k": -1}),
            ("pinakes_read", {"doc": "\ud800"}),
            ("pinakes_read", {"doc": "../../etc/passwd"}),
            ("pinakes_links", {"doc": "raft.md", "depth": 2**63}),
            ("pinakes_links", {"doc": "\udfff", "rel": "\ud800"}),
        ]:
            server.call(tool, args)
    finally:
        server.close()


# -- 9. HTTP transport trust -----------------------------------------------------------------


def test_9_http_refuses_foreign_host_and_origin(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    with http_server(root, "--allow-host", "notes.internal") as (port, _):
        assert post(port, {"Host": "attacker.example"}) == 421
        assert post(port, {"Host": f"attacker.example:{port}"}) == 421
        assert post(port, {"Origin": "http://attacker.example"}) == 403
        assert post(port, {"Origin": "null"}) == 403
        assert post(port, {}) == 200
        assert (
            post(port, {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}) == 200
        )
        assert post(port, {"Host": "notes.internal"}) == 200


def test_9_http_bearer_token(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    with http_server(root, token="s3cret-token") as (port, _):
        assert post(port, {}) == 401
        assert post(port, {"Authorization": "Bearer wrong"}) == 401
        assert post(port, {"Authorization": "Bearer s3cret-token"}) == 200


def test_9_a_non_loopback_bind_needs_a_token(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "fake_server.py"),
            "--kb",
            str(root),
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "PINAKES_MCP_TOKEN" in proc.stderr


@pytest.mark.anyio
async def test_9_resource_mistakes_are_one_log_line(tmp_path: Path) -> None:
    from fastmcp import Client
    from fastmcp.exceptions import ResourceError
    from mcp.shared.exceptions import MCPError

    from pinakes_mcp.server import create_server

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = make_kb(tmp_path / "kb", name="notes")
    logger = logging.getLogger("fastmcp.server.server")
    handler = Keep(level=logging.DEBUG)
    logger.addHandler(handler)
    try:
        with KB.open(root, embedder=FakeHashEmbedder()) as kb:
            kb.sync()
            async with Client(create_server([kb])) as client:
                with pytest.raises((ResourceError, MCPError)) as info:
                    await client.read_resource(f"pnk://notes/{OTHER}")
    finally:
        logger.removeHandler(handler)
    assert "No document" in str(info.value)
    mistakes = [r for r in records if "Error reading resource" in r.getMessage()]
    assert mistakes and all(r.exc_info is None and r.levelname == "WARNING" for r in mistakes)
    assert "No document" in mistakes[0].getMessage()


# -- 10. sidecar writes keep the file's conventions ------------------------------------------

CONVENTIONS = {
    "crlf": f"id: {ULID}\r\nlinks:\r\n  - to: a.md\r\n    rel: cites\r\n",
    "bom": f"\ufeffid: {ULID}\ntags: [a]\n",
    "markers": f"---\nid: {ULID}\nlinks:\n- to: a.md\n...\n",
    "tilde-in-flow": f"id: {ULID}\nextra: [a, ~, b]\nlinks: [{{to: a.md}}]\n",
    "long-line": f"id: {ULID}\ntitle: {'word ' * 1_200}end\nlinks:\n  - to: a.md\n",
    "trailing-comment": f"id: {ULID}\nlinks:\n  - to: a.md\n# the end\n",
}


@pytest.mark.parametrize("name", list(CONVENTIONS))
def test_10_appending_a_link_changes_nothing_but_the_new_lines(tmp_path: Path, name: str) -> None:
    path = tmp_path / "x.md.pnk.yaml"
    original = CONVENTIONS[name]
    path.write_bytes(original.encode("utf-8"))
    before, after = append_link(path, {"to": f"pnk://{OTHER}", "rel": "cites"})
    assert before == original
    assert path.read_bytes() == after.encode("utf-8")
    # Only insertions: every character of the original is still there, in order ...
    matcher = difflib.SequenceMatcher(None, original, after, autojunk=False)
    assert {op for op, *_ in matcher.get_opcodes()} <= {"equal", "insert"}
    assert after.count(OTHER) == 1
    # ... and, but for a flow list growing in its line, every original line is intact.
    if name != "tilde-in-flow":
        lines = iter(after.splitlines(keepends=True))
        assert all(line in lines for line in original.splitlines(keepends=True))
    if name == "crlf":
        assert "\n" not in after.replace("\r\n", "")
    if name == "trailing-comment":
        assert after.endswith("# the end\n")
