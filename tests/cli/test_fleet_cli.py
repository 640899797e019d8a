"""`pnk fleet` and `pnk adopt` through click's runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_kb
from pinakes_cli.main import cli
from pinakes_core.registry import registry_path


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


def test_fleet_add_list_remove_and_a_moved_kb(tmp_path: Path) -> None:
    notes = make_kb(tmp_path / "notes", {"a.md": "# A\n\nAlpha.\n"}, name="notes")
    make_kb(tmp_path / "garden", {"t.md": "# T\n\nTomatoes.\n"}, name="garden")
    code, out, _ = run("fleet", "add", str(notes), "--json")
    assert code == 0 and json.loads(out)["action"] == "added"
    code, out, _ = run("fleet", "add", str(tmp_path / "garden"), "--name", "veg")
    assert code == 0 and out.startswith("veg (")
    code, out, _ = run("fleet", "list", "--json")
    listed = json.loads(out)
    assert [(k["name"], k["state"], k["status"]["synced"]) for k in listed] == [
        ("notes", "ok", False),
        ("veg", "ok", False),
    ]
    assert listed[0]["status"]["stale"]["new"] == 1

    shutil.move(notes, tmp_path / "moved")
    code, out, _ = run("fleet", "list")
    assert code == 0 and "missing" in out
    code, out, _ = run("fleet", "add", str(tmp_path / "moved"))
    assert code == 0 and "found again" in out
    assert registry_path().read_text().count("[[kb]]") == 2

    code, out, err = run("fleet", "remove", "nope")
    assert code == 1 and "No KB called 'nope'" in err and "Traceback" not in err
    code, out, _ = run("fleet", "remove", "veg")
    assert code == 0 and "its files are untouched" in out
    assert (tmp_path / "garden" / "t.md").exists()
    code, out, err = run("fleet", "add", str(tmp_path))
    assert code == 1 and "pnk init" in err


def test_adopt_dry_run_and_for_real(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "n.md").write_text("---\nid: abc\ntitle: N [bold]x[/]\n---\nText.\n")
    code, out, _ = run("adopt", str(vault), "--dry-run")
    assert code == 0 and "Dry run" in out and "obsidian vault, 1 documents" in out
    assert "N [bold]x[/]" in out  # user text printed literally, never as markup
    assert not (vault / "pinakes.toml").exists()
    code, out, _ = run("adopt", str(vault), "--json")
    report = json.loads(out)
    assert report["wrote_config"] and report["flavour"] == "obsidian"
    assert (vault / "pinakes.toml").exists()
    code, out, _ = run("adopt", str(vault))
    assert code == 0 and "is a KB already" in out


@pytest.mark.model
def test_fleet_sync_reports_each_kb(tmp_path: Path) -> None:
    for name in ("one", "two"):
        make_kb(tmp_path / name, {"a.md": f"# {name}\n\nText about {name}.\n"}, name=name)
        assert run("fleet", "add", str(tmp_path / name))[0] == 0
    code, out, _ = run("fleet", "sync", "--json")
    assert code == 0
    report = json.loads(out)
    assert [(k["name"], len(k["report"]["added"])) for k in report["kbs"]] == [
        ("one", 1),
        ("two", 1),
    ]
    (tmp_path / "two" / "pinakes.toml").write_text("[kb]\nname = 'two'\n")  # broken config
    code, out, err = run("fleet", "sync")
    assert code == 1, (out, err)
