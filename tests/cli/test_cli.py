"""End-to-end tests of `pnk` through click's runner, on a copy of the bundled example KB."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pinakes_cli.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("kb") / "distsys-notes"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pinakes"))
    return target


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.model
def test_search_syncs_first_and_finds_the_raft_note(kb_dir: Path) -> None:
    code, out, _ = run(
        "--kb", str(kb_dir), "search", "how is a new leader chosen in raft", "-k", "3", "--json"
    )
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"query", "hits", "confidence", "abstain", "timings_ms"}
    assert result["hits"], "the example KB answers this"
    assert any(hit["path"] == "consensus/raft.md" for hit in result["hits"])
    first = result["hits"][0]
    assert set(first) >= {
        "doc_id",
        "chunk",
        "path",
        "title",
        "heading_path",
        "text",
        "score",
        "lines",
        "ranks",
    }
    assert set(first["ranks"]) == {"bm25", "dense"}


@pytest.mark.model
def test_sync_json_report_and_status(kb_dir: Path) -> None:
    code, out, _ = run("--kb", str(kb_dir), "sync", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["added"] == [] and report["chunks_embedded"] == 0
    code, out, _ = run("--kb", str(kb_dir), "status", "--json")
    status = json.loads(out)
    assert status["synced"] is True
    assert status["documents"] == len(list(kb_dir.rglob("*.md")))
    assert status["stale"] == {"new": 0, "changed": 0, "removed": 0}


@pytest.mark.model
def test_show_by_path_uri_and_ulid(kb_dir: Path) -> None:
    code, out, _ = run("--kb", str(kb_dir), "show", "consensus/raft.md", "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["path"] == "consensus/raft.md"
    for ref in (doc["doc_id"], doc["uri"], f"pnk://{doc['doc_id']}"):
        code, out, _ = run("--kb", str(kb_dir), "show", ref, "--json")
        assert code == 0, ref
        assert json.loads(out)["doc_id"] == doc["doc_id"]


@pytest.mark.model
def test_explain_prints_per_channel_ranks(kb_dir: Path) -> None:
    code, out, _ = run("--kb", str(kb_dir), "search", "vector clocks", "--explain", "-k", "2")
    assert code == 0
    assert "bm25 #" in out and "dense #" in out


def test_errors_are_one_sentence_and_exit_1(tmp_path: Path) -> None:
    code, _, err = run("--kb", str(tmp_path), "status")
    assert code == 1
    assert "No pinakes.toml" in err and "pnk init" in err
    assert "Traceback" not in err


def test_unknown_document_is_an_error(kb_dir: Path) -> None:
    code, _, err = run("--kb", str(kb_dir), "show", "no/such/file.md")
    assert code == 1
    assert "No document" in err


def test_usage_errors_exit_2() -> None:
    assert run("search")[0] == 2
    assert run("search", "x", "-k", "0")[0] == 2
    assert run("frobnicate")[0] == 2


def test_a_query_that_starts_with_a_dash_is_searched_after_double_dash(kb_dir: Path) -> None:
    code, _, err = run("--kb", str(kb_dir), "search", "--detectOpenHandles")
    assert code == 2
    assert "put -- before it: pnk search -- --detectOpenHandles" in err
    code, _, err = run("--kb", str(kb_dir), "search", "--jsn", "x")  # a typo keeps its advice
    assert code == 2 and "Did you mean '--json'?" in err and "pnk search -- --jsn" in err
    code, _, err = run("--kb", str(kb_dir), "search", "-foo bar")  # "-f" is all click names
    assert code == 2 and "pnk search -- '-your text'" in err
    code, out, err = run("--kb", str(kb_dir), "search", "--json", "--", "--retry-limit")
    assert code == 0, err
    assert json.loads(out)["query"] == "--retry-limit"


def test_init_writes_config_and_gitignore(tmp_path: Path) -> None:
    target = tmp_path / "notes"
    code, out, _ = run("init", str(target), "--name", "my-notes")
    assert code == 0, out
    assert 'name = "my-notes"' in (target / "pinakes.toml").read_text()
    assert ".pinakes/" in (target / ".gitignore").read_text().splitlines()
    code, _, err = run("init", str(target))
    assert code == 1 and "already exists" in err


def test_init_rejects_a_bad_name(tmp_path: Path) -> None:
    code, _, err = run("init", str(tmp_path / "x"), "--name", "bad name!")
    assert code == 1 and "not a valid KB name" in err
    assert not (tmp_path / "x" / "pinakes.toml").exists()


def test_strict_sync_fails_on_skips(tmp_path: Path) -> None:
    run("init", str(tmp_path))
    (tmp_path / "bin.md").write_bytes(b"abc\x00def")
    code, out, err = run("--kb", str(tmp_path), "sync", "--strict")
    assert code == 1
    assert "bin.md" in out and "skipped" in err
    code, out, _ = run("--kb", str(tmp_path), "sync")
    assert code == 0


@pytest.mark.model
def test_kb_option_after_the_command_as_in_the_readme(kb_dir: Path) -> None:
    code, out, _ = run("search", "how does raft pick a new leader", "--kb", str(kb_dir), "-k", "3")
    assert code == 0, out
    assert "consensus/raft.md" in out
    code, out, _ = run("--kb", "/nonexistent", "status", "--kb", str(kb_dir), "--json")
    assert code == 0 and json.loads(out)["name"] == "distsys-notes"


def test_calibrate_on_a_tiny_kb_says_why_and_keeps_json_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With one document `pnk calibrate` said "The KB has no documents", and with --json it
    # printed that sentence instead of JSON.
    from conftest import FakeHashEmbedder, make_kb

    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    kb = str(make_kb(tmp_path / "kb", {"a.md": "# One\n\nonly document here\n"}))
    assert run("--kb", kb, "sync")[0] == 0
    code, out, _ = run("--kb", kb, "calibrate")
    assert code == 0 and "no documents" not in out and "Too little distinct text" in out
    code, out, err = run("--kb", kb, "calibrate", "--json")
    assert code == 0 and json.loads(out) is None and "Too little distinct text" in err
