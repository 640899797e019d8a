"""Core reads the ``pinakes`` entry points without importlib.metadata, and finds what it finds.

:func:`pinakes_core.plugins.entry_points` reads ``entry_points.txt`` from the distribution
folders on ``sys.path`` itself (issue 37: importing importlib.metadata costs ``pnk --help``
more than a third of ``import click``). These tests hold it to importlib.metadata's answer:
on this environment's every group, and on folders built to hit the corners (the same
distribution twice on the path, spellings of a name, comments, an egg-info, a zip).
"""

from __future__ import annotations

import importlib.metadata
import sys
import zipfile
from pathlib import Path

import pytest

from pinakes_core.plugins import EntryPoint, _scan, _Unreadable, entry_points


def _theirs(group: str) -> list[tuple[str, str]]:
    return [(e.name, e.value) for e in importlib.metadata.entry_points(group=group)]


def _ours(group: str) -> list[tuple[str, str]]:
    # The reader itself, not its fallback to importlib.metadata.
    return [(e.name, e.value) for e in _scan(group, sys.path)]


def test_every_group_of_this_environment_matches_importlib_metadata() -> None:
    groups = {e.group for d in importlib.metadata.distributions() for e in d.entry_points}
    assert "pinakes" in groups and len(groups) > 5
    for group in sorted(groups):
        assert _ours(group) == _theirs(group), group
    assert ("graph", "pinakes_graph.plugin") in _ours("pinakes")


def test_the_importlib_metadata_backports_finder_changes_nothing() -> None:
    # Importing the backport (litellm and others do) puts its own finder on sys.meta_path; it
    # lists the same folders after PathFinder, so the reader must neither fail nor fall back.
    backport = pytest.importorskip("importlib_metadata")
    assert any(type(f).__module__ == backport.__name__ for f in sys.meta_path)
    for group in ("pinakes", "console_scripts"):
        assert _ours(group) == _theirs(group), group


def _dist(site: Path, folder: str, entry_points_txt: str | None) -> None:
    info = site / folder
    info.mkdir(parents=True)
    name = folder.partition("-")[0]
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n", encoding="utf-8"
    )
    if entry_points_txt is not None:
        (info / "entry_points.txt").write_text(entry_points_txt, encoding="utf-8")


def test_corners_match_importlib_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _dist(first, "alpha_plugin-1.0.dist-info", "[pinakes]\nalpha = alpha_mod\n")
    # The same distribution later on the path, spelt differently: the first one wins.
    _dist(second, "Alpha.Plugin-2.0.dist-info", "[pinakes]\nalpha2 = alpha_two\n")
    _dist(
        second,
        "beta-0.1.dist-info",
        "# a comment\n\n[other]\nx = y\n[ pinakes ]\nnope = no\n"
        "[pinakes]\n  beta =  beta_mod.sub : hooks.impl [extra]  \n",
    )
    _dist(second, "gamma-3.egg-info", "[pinakes]\ngamma = gamma_mod\n")
    _dist(second, "delta-1.dist-info", None)  # no entry points at all
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(second)])
    assert _ours("pinakes") == _theirs("pinakes")
    assert sorted(_ours("pinakes")) == [
        ("alpha", "alpha_mod"),
        ("beta", "beta_mod.sub : hooks.impl [extra]"),
        ("gamma", "gamma_mod"),
    ]
    assert _ours("other") == _theirs("other") == [("x", "y")]


def test_a_zip_on_the_path_is_read_through_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\n")
        zf.writestr("zipped-1.dist-info/entry_points.txt", "[pinakes]\nzipped = zipped_mod\n")
    monkeypatch.setattr(sys, "path", [str(archive)])
    with pytest.raises(_Unreadable):
        _scan("pinakes", sys.path)
    found = [(e.name, e.value) for e in entry_points("pinakes")]
    assert found == _theirs("pinakes") == [("zipped", "zipped_mod")]


def test_load_imports_the_module_and_follows_the_attribute(tmp_path: Path) -> None:
    assert EntryPoint("x", "json").load() is sys.modules["json"]
    assert EntryPoint("x", "os.path:join").load() is sys.modules["os"].path.join
    assert EntryPoint("x", "importlib.metadata : EntryPoint.load [extra]").load() is (
        importlib.metadata.EntryPoint.load
    )
    with pytest.raises(ModuleNotFoundError):
        EntryPoint("x", "no_such_module_anywhere").load()
