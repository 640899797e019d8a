"""Identities survive renames and collisions; a hostile ignore line cannot hang a sync (issue 34).

- A note renamed with its sidecar while a new note takes the old path (a daily note rolling
  over) keeps its id; the new note gets a new one.
- Two sidecars claiming one id: the store's first holder keeps it through ``--rebuild``; with
  no index at all (a fresh clone) path order decides nothing: both are indexed under stand-in
  ids, a warning says so, and ``doctor --fix`` re-ids neither.
- ``*a*a*a*a*a*a*a*a*a*a*a*ab`` in .gitignore (or ``[sync] exclude``) with a long name of ``a``
  finishes (the pattern is cut to a superset), leaving that file out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rel_helpers import env, sync
from rel_ledger import record

from conftest import FakeHashEmbedder
from pinakes_core import KB
from pinakes_core.read.sidecar import read_sidecar, write_skeleton

ID_A = "01JA00000000000000000000AA"
ID_X = "01JA00000000000000000000XX"


def _doc_ids(root: Path) -> dict[str, str]:
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        return {
            str(r[1]): str(r[0])
            for r in kb.store().conn.execute("SELECT doc_id, path FROM documents")
        }


def test_a_note_moved_with_its_sidecar_keeps_its_id(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    KB.init(root)
    (root / "today.md").write_text("# Monday\n\nstandup notes about the release\n")
    write_skeleton(root / "today.md.pnk.yaml", ID_A)
    sync(root)
    assert _doc_ids(root)["today.md"] == ID_A
    # Rolled over: yesterday's note and sidecar move, a new note appears at the old path.
    (root / "today.md").rename(root / "monday.md")
    (root / "today.md.pnk.yaml").rename(root / "monday.md.pnk.yaml")
    (root / "today.md").write_text("# Tuesday\n\nplanning notes for the sprint\n")
    report = sync(root)
    ids = _doc_ids(root)
    assert ids["monday.md"] == ID_A
    assert ids["today.md"] != ID_A
    assert not [s for s in report.skipped if "monday" in s.path]
    assert read_sidecar(root / "monday.md.pnk.yaml").id == ID_A
    record("identity", tried=1)


def _twins(root: Path) -> None:
    root.mkdir()
    KB.init(root)
    for name in ("zeta.md", "alpha.md"):
        (root / name).write_text(f"# {name}\n\ntext of {name}\n")
    write_skeleton(root / "zeta.md.pnk.yaml", ID_X)


def test_the_first_holder_keeps_a_repeated_id_through_a_rebuild(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    _twins(root)
    sync(root)  # zeta holds X
    (root / "alpha.md.pnk.yaml").write_text(f"id: {ID_X}\n")  # a copy sorts first by path
    sync(root)
    assert _doc_ids(root).get("zeta.md") == ID_X
    sync(root, rebuild=True)
    assert _doc_ids(root).get("zeta.md") == ID_X
    assert "alpha.md" not in _doc_ids(root)  # the copy is left out, as before
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.doctor(fix=True)
    assert read_sidecar(root / "zeta.md.pnk.yaml").id == ID_X  # the holder keeps it
    assert read_sidecar(root / "alpha.md.pnk.yaml").id != ID_X
    record("identity", tried=2)


def test_a_fresh_clone_does_not_let_path_order_pick_the_holder(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    _twins(root)
    write_skeleton(root / "alpha.md.pnk.yaml", ID_X)
    report = sync(root)  # no index: nothing says which came first
    ids = _doc_ids(root)
    assert ID_X not in ids.values()
    assert set(ids) == {"alpha.md", "zeta.md"}  # both still searchable
    assert any(ID_X in w and "stand-in" in w for w in report.warnings)
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        fixed = kb.doctor(fix=True).fixed
    assert any("left" in f and ID_X in f for f in fixed)
    assert read_sidecar(root / "alpha.md.pnk.yaml").id == ID_X  # the user chooses
    assert read_sidecar(root / "zeta.md.pnk.yaml").id == ID_X
    record("identity", tried=2)


_SYNC = """
import sys
from pathlib import Path
from conftest import FakeHashEmbedder
from pinakes_core import KB
with KB.open(Path(sys.argv[1]), embedder=FakeHashEmbedder()) as kb:
    report = kb.sync()
    print(sorted(r[0] for r in kb.store().conn.execute("SELECT path FROM documents")))
"""


def test_a_backtracking_ignore_line_cannot_hang_a_sync(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    KB.init(root)
    hostile = "*a*a*a*a*a*a*a*a*a*a*a*ab"
    with (root / ".gitignore").open("a") as handle:
        handle.write(f"{hostile}\n")
    config = root / "pinakes.toml"
    config.write_text(config.read_text().replace("[sync]\n", f'[sync]\nexclude = ["{hostile}x"]\n'))
    (root / ("a" * 40 + ".md")).write_text("# A\n\nall a\n")
    (root / ("a" * 30 + "b")).mkdir()
    (root / ("a" * 30 + "b") / "hidden.md").write_text("# Hidden\n\nignored\n")
    (root / "keep.md").write_text("# Keep\n\nkept\n")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SYNC, str(root)],
            env=env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        record("identity", tried=1, hangs=1)
        raise
    assert done.returncode == 0, done.stderr
    assert "keep.md" in done.stdout and "hidden.md" not in done.stdout
    record("identity", tried=1)
