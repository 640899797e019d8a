"""Agent writes and sidecar edits under concurrency keep every writer's words (issue 34, group 2).

Before: appends read the whole note and replaced it without a lock (3–5 of 10 parallel appends
survived; a user's ``>>`` lines were lost), sidecar link edits were read-modify-write across
processes (2–3 of 8 links survived), and several ``write_note(overwrite=false)`` calls on one
new path all answered "created".
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from rel_helpers import env, sync
from rel_ledger import record

from pinakes_core import KB
from pinakes_core.errors import PinakesError
from pinakes_core.manage.writing import append, write_note
from pinakes_core.read.sidecar import read_sidecar, write_skeleton


def _kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    KB.init(root)
    (root / "log.md").write_text("# Log\n\nfirst line\n\n## Inbox\n\nold item\n\n## Done\n\nx\n")
    return root


def _parallel(count: int, call: Callable[[int], object]) -> list[object]:
    """Run ``call(i)`` for i in range(count) in threads started together; results or errors."""
    results: list[object] = [None] * count
    start = threading.Barrier(count)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = call(i)
        except Exception as exc:  # collected and asserted by the caller
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_parallel_appends_all_arrive(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    with KB.open(root) as kb:
        results = _parallel(10, lambda i: append(kb, "log.md", f"entry-{i}"))
        sections = _parallel(6, lambda i: append(kb, "log.md", f"task-{i}", section="Inbox"))
    assert all(getattr(r, "action", None) == "appended" for r in [*results, *sections]), results
    text = (root / "log.md").read_text()
    assert all(f"entry-{i}" in text for i in range(10))
    assert all(f"task-{i}" in text.split("## Done")[0] for i in range(6))
    assert text.startswith("# Log\n\nfirst line\n")
    record("write races", tried=16, changed_bytes=0)


def test_appends_never_drop_another_writers_lines(tmp_path: Path) -> None:
    """A shell appending with ``>>`` while Pinakes appends: every line of both survives."""
    root = _kb(tmp_path)
    note = root / "log.md"
    lines = 3000
    shell = subprocess.Popen(
        [
            "sh",
            "-c",
            f'i=0; while [ $i -lt {lines} ]; do echo "shell-$i" >> "$1"; i=$((i+1)); done',
            "sh",
            str(note),
        ]
    )
    with KB.open(root) as kb:
        for i in range(40):
            append(kb, "log.md", f"agent-{i}")
            if i % 8 == 0:  # a section edit too: it must notice the shell's lines and re-read
                try:
                    append(kb, "log.md", f"sect-{i}", section="Inbox")
                except PinakesError as exc:  # only "kept changing" is an allowed refusal
                    assert "kept changing" in str(exc)
    assert shell.wait(timeout=120) == 0
    text = note.read_text()
    missing = [i for i in range(lines) if f"shell-{i}\n" not in text]
    assert missing == []
    assert all(f"agent-{i}\n" in text for i in range(40))
    record("write races", tried=lines + 45, changed_bytes=len(missing))


_LINKER = """
import sys
from pathlib import Path
from pinakes_core.read.sidecar import append_link
append_link(Path(sys.argv[1]), {"to": sys.argv[2], "rel": "mentions"}, root=Path(sys.argv[3]))
"""


def test_processes_adding_links_to_one_sidecar_keep_all(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    side = root / "log.md.pnk.yaml"
    write_skeleton(side, "01JA0000000000000000000000")
    targets = [f"note-{i}.md" for i in range(8)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _LINKER, str(side), target, str(root.resolve())], env=env()
        )
        for target in targets
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * 8
    links = {link.to for link in read_sidecar(side).links}
    assert links == set(targets)
    record("write races", tried=8, changed_bytes=8 - len(links))


def test_one_new_note_is_created_once(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    with KB.open(root) as kb:
        results = _parallel(6, lambda i: write_note(kb, "new/idea.md", f"version {i}"))
    created = [r for r in results if getattr(r, "action", None) == "created"]
    refused = [r for r in results if isinstance(r, PinakesError)]
    assert len(created) == 1 and len(refused) == 5, results
    assert all("already exists" in str(r) for r in refused)
    body = (root / "new" / "idea.md").read_text()
    assert body in {f"version {i}\n" for i in range(6)}  # whole, one writer's
    assert not [p for p in (root / "new").iterdir() if p.name.endswith(".tmp")]
    record("write races", tried=6)


def test_a_read_only_note_is_not_written(tmp_path: Path) -> None:
    root = _kb(tmp_path)
    note = root / "log.md"
    before = note.read_bytes()
    note.chmod(0o444)
    with KB.open(root) as kb:
        for call in (
            lambda: append(kb, "log.md", "more"),
            lambda: append(kb, "log.md", "more", section="Inbox"),
            lambda: write_note(kb, "log.md", "replaced", overwrite=True),
        ):
            with pytest.raises(PinakesError, match="read-only"):
                call()
    assert note.read_bytes() == before
    record("write races", tried=3)


def test_a_long_name_gets_its_sidecar_and_leftover_temps_go(tmp_path: Path) -> None:
    """Names of 233–255 bytes: the temp name no longer passes the 255-byte limit."""
    root = _kb(tmp_path)
    name = "n" * (255 - len(".md.pnk.yaml")) + ".md"
    (root / name).write_text("# Long\n\nlong name\n")
    # What a write killed with -9 leaves: an unlocked temp file in the user's folder.
    leftover = root / ".pnk-k9x2ab7q.tmp"
    leftover.write_text("half a note")
    write_skeleton(root / (name + ".pnk.yaml"), "01JA0000000000000000000001")
    sync(root)
    assert read_sidecar(root / (name + ".pnk.yaml")).id == "01JA0000000000000000000001"
    assert not leftover.exists()
    assert len(os.fsencode(name + ".pnk.yaml")) == 255
    record("write races", tried=2)
