"""pinakes_core.kept: an answer kept on disk is believed only while all it came from is unchanged."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pinakes_core.kept import installation, keep, kept, loaded_files


def test_a_kept_answer_is_given_back_while_nothing_changed(tmp_path: Path) -> None:
    path = str(tmp_path / "cache" / "answer.txt")
    keep(path, "test 1 width=80", "the answer\nover lines\n", installation())
    assert kept(path, "test 1 width=80") == "the answer\nover lines\n"
    assert kept(path, "test 1 width=60") is None  # another header: another answer
    assert kept(str(tmp_path / "none.txt"), "test 1 width=80") is None


def test_a_changed_module_file_or_path_folder_makes_it_stale(tmp_path: Path) -> None:
    folder = tmp_path / "site"
    folder.mkdir()
    module = folder / "kept_probe_module.py"
    module.write_text("X = 1\n", "utf-8")
    sys.path.insert(0, str(folder))
    try:
        import kept_probe_module  # noqa: F401

        assert str(module) in (loaded_files() or [])
        path = str(tmp_path / "answer.txt")
        keep(path, "h", "text", installation())
        assert kept(path, "h") == "text"
        module.write_text("X = 22\n", "utf-8")  # another size
        assert kept(path, "h") is None
        keep(path, "h", "text", installation())
        assert kept(path, "h") == "text"
        (folder / "new_dist-1.0.dist-info").mkdir()  # the path folder's time moves
        stamp = os.stat(folder).st_mtime_ns
        os.utime(folder, ns=(stamp, stamp + 1_000_000_000))
        assert kept(path, "h") is None
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("kept_probe_module", None)


def test_a_damaged_file_is_not_believed(tmp_path: Path) -> None:
    path = tmp_path / "answer.txt"
    keep(str(path), "h", "text", installation())
    path.write_text(path.read_text("utf-8").replace("\n", "\n9999\n", 1), "utf-8")
    assert kept(str(path), "h") is None
