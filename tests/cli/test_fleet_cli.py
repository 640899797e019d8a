"""`pnk fleet` and `pnk adopt` through click's runner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_kb
from pinakes_cli.main import cli
from pinakes_core.manage.registry import registry_path


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


@pytest.mark.model
def test_search_several_kbs_and_link_across(tmp_path: Path) -> None:
    one = make_kb(tmp_path / "one", {"raft.md": "# Raft\n\nRaft elects a leader.\n"}, name="one")
    two = make_kb(tmp_path / "two", {"paxos.md": "# Paxos\n\nPaxos has proposers.\n"}, name="two")
    assert run("fleet", "add", str(one))[0] == 0
    assert run("fleet", "add", str(two))[0] == 0
    code, out, _ = run("search", "leader election", "--kb", "one", "--kb", str(two), "--json")
    assert code == 0, out
    result = json.loads(out)
    assert {h["kb"] for h in result["hits"]} == {"one", "two"}
    assert [k["name"] for k in result["kbs"]] == ["one", "two"]
    code, fleet_out, _ = run(
        "search", "leader election", "--fleet", "--format", "files", "--min-score", "0"
    )
    assert code == 0
    assert fleet_out.split() == [str(one.resolve() / "raft.md"), str(two.resolve() / "paxos.md")]
    # A list of matches leaves out the paxos note, which says neither word (issue 35).
    code, fleet_out, err = run("search", "leader election", "--fleet", "--format", "files")
    assert code == 0 and fleet_out.split() == [str(one.resolve() / "raft.md")]
    assert "left out 1 of 2 hits" in err
    code, table, _ = run("search", "leader election", "--fleet")
    assert code == 0 and "[one] raft.md" in table
    code, _, err = run("search", "x", "--fleet", "--kb", "one")
    assert code == 2 and "not both" in err
    code, out, _ = run("search", "x", "--fleet", "--doc", "raft.md", "--json")
    assert code == 1 and "names a document in one KB only" in json.loads(out)["error"]["message"]

    code, out, _ = run(
        "--kb", str(one), "link", "raft.md", "paxos.md", "--to-kb", "two", "--rel", "cites"
    )
    assert code == 0 and "pnk://" in out
    assert run("--kb", str(one), "sync")[0] == 0
    code, out, _ = run("--kb", str(one), "links", "raft.md")
    assert code == 0 and "[two] paxos.md" in out


def test_a_symlinked_fleet_registry_stays_a_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The registry's atomic rewrite replaced a dotfiles symlink with a detached copy (and
    # pinakes.toml, a hook, a sidecar written the same way would have been too).
    real = tmp_path / "dotfiles" / "fleet.toml"
    real.parent.mkdir()
    real.write_text("# my fleet\n", "utf-8")
    link = tmp_path / "config" / "fleet.toml"
    link.parent.mkdir()
    link.symlink_to(real)
    monkeypatch.setenv("PINAKES_FLEET", str(link))
    notes = make_kb(tmp_path / "notes", {"a.md": "# A\n\nAlpha.\n"}, name="notes")
    code, _, err = run("fleet", "add", str(notes))
    assert code == 0, err
    assert link.is_symlink() and "notes" in real.read_text("utf-8")
