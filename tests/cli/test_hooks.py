"""Git hooks in a real temporary repository: install, a commit syncs, chaining, uninstall."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from pinakes_cli.main import cli
from pinakes_core import KB
from pinakes_core.errors import HookError
from pinakes_core.manage.hooks import CHAINED, HOOKS, hooks_status, install_hooks, uninstall_hooks

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PREVIOUS = b'#!/bin/sh\n# the user\'s own hook\necho "$1" >> "$(git rev-parse --show-toplevel)/previous-ran"\n'


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(autouse=True)
def clean_git_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A git that reads no global or system config (a user's core.hooksPath would leak in)."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(key, raising=False)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    return repo


def _kb(repo: Path, sub: str = "docs/kb") -> Path:
    root = repo / sub
    KB.init(root)
    (root / "first.md").write_text("# First\n\nThe first note.\n")
    return root


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _wait_for(predicate, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def _status(root: Path) -> dict:
    code, out, err = run("--kb", str(root), "status", "--json")
    assert code == 0, err
    return json.loads(out)


def _status_while_syncing(root: Path) -> dict:
    """`pnk status` polled while a background sync may be creating the store.

    A status read in the instant the first sync creates the store can fail (the store has no
    schema version yet); that counts as "not synced yet", not as a failed test.
    """
    code, out, _ = run("--kb", str(root), "status", "--json")
    return json.loads(out) if code == 0 else {"documents": 0, "last_sync": None}


@pytest.mark.model
def test_a_commit_syncs_in_the_background_and_the_old_hook_still_runs(repo: Path) -> None:
    root = _kb(repo)
    hooks_dir = repo / ".git" / "hooks"
    previous = hooks_dir / "post-commit"
    previous.write_bytes(PREVIOUS)
    previous.chmod(0o750)
    before = _snapshot(hooks_dir)
    code, out, err = run("--kb", str(root), "hooks", "install")
    assert code == 0, err
    assert "kept the existing post-commit hook" in out
    assert _status(root)["synced"] is False
    git(repo, "add", "-A")
    started = time.time()
    git(repo, "commit", "-qm", "first")
    # The old hook ran, synchronously, with its arguments.
    assert (repo / "previous-ran").exists()
    # The background sync makes the commit visible in `pnk status`.

    def synced() -> bool:  # documents are visible a moment before the sync stamps its time
        status = _status_while_syncing(root)
        return status["documents"] == 1 and (status["last_sync"] or 0) >= started - 1

    assert _wait_for(synced)
    assert _wait_for(lambda: (root / ".pinakes" / "hook-sync.json").exists())
    outcome = json.loads((root / ".pinakes" / "hook-sync.json").read_text())
    assert outcome["ok"] is True and outcome["added"] == 1
    # A second commit adds a document; the hook syncs it too.
    (root / "second.md").write_text("# Second\n\nAnother note.\n")
    git(repo, "add", "-A")
    second = time.time()
    git(repo, "commit", "-qm", "second")
    assert _wait_for(lambda: _status_while_syncing(root)["documents"] == 2)

    def finished() -> bool:  # the background sync has exited: no process outlives the test
        data = json.loads((root / ".pinakes" / "hook-sync.json").read_text())
        return float(data.get("finished", 0)) >= second

    assert _wait_for(finished)
    code, out, _ = run("--kb", str(root), "doctor", "--json")
    checks = {f["check"]: f for f in json.loads(out)["findings"]}
    assert checks["git-hooks"]["severity"] == "info" and "refresh" in checks["git-hooks"]["message"]
    # Uninstall restores the old hook byte for byte (and its mode) and removes the rest.
    code, out, err = run("--kb", str(root), "hooks", "uninstall")
    assert code == 0, err
    assert _snapshot(hooks_dir) == before


def test_install_is_idempotent_and_uninstall_leaves_no_trace(repo: Path) -> None:
    root = _kb(repo)
    hooks_dir = repo / ".git" / "hooks"
    before = _snapshot(hooks_dir)
    first = install_hooks(root, ["/usr/bin/python3", "-m", "pinakes_cli"])
    assert {h.state for h in first.hooks} == {"installed"} and len(first.changed) == 4
    text = (hooks_dir / "post-merge").read_text()
    assert "docs/kb" in text and "/usr/bin/python3 -m pinakes_cli hooks sync" in text
    assert os.access(hooks_dir / "post-merge", os.X_OK)
    again = install_hooks(root, ["/usr/bin/python3", "-m", "pinakes_cli"])
    assert again.changed == []
    uninstall_hooks(root)
    assert _snapshot(hooks_dir) == before
    assert {h.state for h in hooks_status(root).hooks} == {"absent"}


def test_core_hooks_path_is_honoured(repo: Path) -> None:
    root = _kb(repo)
    git(repo, "config", "core.hooksPath", ".githooks")
    report = install_hooks(root, ["/usr/bin/python3", "-m", "pinakes_cli"])
    assert Path(report.hooks_dir) == (repo / ".githooks").resolve()
    assert all((repo / ".githooks" / name).exists() for name in HOOKS)
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    uninstall_hooks(root)
    assert list((repo / ".githooks").iterdir()) == []


def test_two_kbs_in_one_repository_share_the_hooks(repo: Path) -> None:
    docs, notes = _kb(repo, "docs"), _kb(repo, "team/notes")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_bytes(PREVIOUS)
    hook.chmod(0o755)
    install_hooks(docs, ["/usr/bin/python3", "-m", "pinakes_cli"])
    install_hooks(notes, ["/usr/bin/python3", "-m", "pinakes_cli"])
    text = hook.read_text()
    assert "# pinakes-kb: docs\n" in text and "# pinakes-kb: team/notes\n" in text
    assert hook.with_name("post-checkout" + CHAINED).read_bytes() == PREVIOUS
    uninstall_hooks(docs)
    assert {h.state for h in hooks_status(docs).hooks} == {"other-kbs"}
    assert {h.state for h in hooks_status(notes).hooks} == {"installed"}
    uninstall_hooks(notes)
    assert hook.read_bytes() == PREVIOUS


def test_a_hand_edited_hook_is_never_overwritten(repo: Path) -> None:
    root = _kb(repo)
    install_hooks(root, ["/usr/bin/python3", "-m", "pinakes_cli"])
    hook = repo / ".git" / "hooks" / "post-rewrite"
    hook.write_text(hook.read_text() + "echo mine\n")
    edited = hook.read_bytes()
    with pytest.raises(HookError, match="edited"):
        uninstall_hooks(root)
    with pytest.raises(HookError, match="edited"):
        install_hooks(root, ["/usr/bin/python3", "-m", "pinakes_cli"])
    assert hook.read_bytes() == edited
    assert (repo / ".git" / "hooks" / "post-commit").exists(), "nothing else was touched"


def test_odd_existing_hooks_are_kept_aside_and_put_back(repo: Path) -> None:
    # A folder named post-commit crashed install and status with IsADirectoryError; a dangling
    # symlink (a hook manager's link to a script not there yet) was read as "no hook" and
    # replaced, so uninstall deleted it; a FIFO would block the read.
    root = _kb(repo)
    hooks = repo / ".git" / "hooks"
    for sample in hooks.glob("*.sample"):
        sample.unlink()
    (hooks / "post-commit").mkdir()
    (hooks / "post-commit" / "inner").write_text("x")
    (hooks / "post-merge").symlink_to(repo / "tools" / "not-yet-there.sh")
    os.mkfifo(hooks / "post-rewrite")
    command = ["/usr/bin/python3", "-m", "pinakes_cli"]
    install_hooks(root, command)
    assert {h.state for h in hooks_status(root).hooks} == {"installed"}
    assert (hooks / "post-commit.pinakes-chained" / "inner").read_text() == "x"
    assert os.readlink(hooks / "post-merge.pinakes-chained") == str(
        repo / "tools" / "not-yet-there.sh"
    )
    uninstall_hooks(root)
    assert (hooks / "post-commit" / "inner").read_text() == "x"
    assert os.readlink(hooks / "post-merge") == str(repo / "tools" / "not-yet-there.sh")
    assert stat.S_ISFIFO((hooks / "post-rewrite").lstat().st_mode)
    assert not (hooks / "post-checkout").exists()
    assert not list(hooks.glob("*" + CHAINED))


def test_doctor_reports_missing_and_broken_hooks(repo: Path) -> None:
    root = _kb(repo)
    with KB.open(root) as kb:
        checks = {f.check: f for f in kb.doctor().findings}
        assert "hooks install" in checks["git-hooks"].message
        install_hooks(root, [str(repo / "gone" / "python"), "-m", "pinakes_cli"])
        (repo / ".git" / "hooks" / "post-merge").unlink()
        checks = {f.check: f for f in kb.doctor().findings}
    assert checks["git-hooks"].severity == "warning" and "post-merge" in checks["git-hooks"].message
    assert checks["git-hooks-command"].severity == "warning"


def test_outside_a_repository_hooks_fail_clearly_and_doctor_stays_quiet(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    KB.init(root)
    code, _, err = run("--kb", str(root), "hooks", "install")
    assert code == 1 and "not inside a git work tree" in err and "Traceback" not in err
    # With --json the error is JSON on stdout, as for every other command (it was text).
    for args in (("hooks", "status", "--json"), ("upgrade", "--json")):
        code, out, _ = run("--kb", str(root), *args)
        assert code == 1 and set(json.loads(out)["error"]) == {"type", "message", "hint"}
    with KB.open(root) as kb:
        assert "git-hooks" not in {f.check for f in kb.doctor().findings}


def test_the_hook_sync_command_is_quiet(repo: Path) -> None:
    root = _kb(repo)
    (root / "first.md").unlink()  # an empty KB: a sync that needs no model
    code, out, err = run("hooks", "sync", "--kb", str(root))
    assert (code, out, err) == (0, "", "")
    outcome = json.loads((root / ".pinakes" / "hook-sync.json").read_text())
    assert outcome["ok"] is True and outcome["added"] == 0


def test_status_says_when_the_hooks_interpreter_is_gone(repo: Path) -> None:
    # A hook pinned to an environment that was moved or deleted synced nothing, and
    # `pnk hooks status` still listed every hook as installed (issue 35).
    root = _kb(repo)
    gone = repo / "old-venv" / "bin" / "python"
    install_hooks(root, [str(gone), "-m", "pinakes_cli"])
    code, out, err = run("hooks", "status", "--kb", str(root))
    assert code == 0, err
    assert f"the hooks run {gone}, which no longer exists" in out
    assert "pnk hooks install" in out
    code, out, _ = run("hooks", "status", "--kb", str(root), "--json")
    assert {h["command_ok"] for h in json.loads(out)["hooks"]} == {False}
    install_hooks(root, [sys.executable, "-m", "pinakes_cli"])
    code, out, _ = run("hooks", "status", "--kb", str(root))
    assert code == 0 and "no longer exists" not in out


def test_a_hook_whose_interpreter_is_gone_runs_the_pnk_on_path(repo: Path) -> None:
    root = _kb(repo)
    install_hooks(root, [str(repo / "old-venv" / "bin" / "python"), "-m", "pinakes_cli"])
    bin_dir = repo.parent / "bin"
    bin_dir.mkdir()
    marker = repo.parent / "pnk-ran"
    launcher = bin_dir / "pnk"
    launcher.write_text(f'#!/bin/sh\necho "$@" > {marker}\n')
    launcher.chmod(0o755)
    hook = repo / ".git" / "hooks" / "post-commit"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["sh", str(hook)], cwd=repo, env=env, check=True)
    assert _wait_for(marker.exists, timeout=30)
    assert marker.read_text().split() == ["hooks", "sync", "--kb", f"{repo}/docs/kb"]
    # A hook an earlier install wrote (no fallback) is still this KB's installed hook.
    from pinakes_core.manage.hooks import render_hook

    hook.write_text(render_hook("post-commit", ["docs/kb"], ["/x/python"], fallback=False))
    assert next(h for h in hooks_status(root).hooks if h.name == "post-commit").state == (
        "installed"
    )
