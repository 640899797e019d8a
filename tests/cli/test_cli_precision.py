"""`pnk search` lists that claim to be matches (issue 35): the relevance floor of
``--format files`` and ``md``, its ``--min-score`` override, and grep's exit status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_kb
from pinakes_cli.main import cli
from pinakes_core.search.hits import LIST_FLOOR, LIST_FLOOR_SHARE, list_floor

NOTES = {
    "zoo/animals.md": "# Animals\n\nThe giraffe is the tallest land animal.\n",
    "zoo/hours.md": "# Zoo visit\n\nThe zoo opens at nine; the elephants are fed at noon.\n",
    "travel/kenya.md": "# Kenya trip\n\nTwo days on the savanna watching lions and zebras.\n",
    "notes/buildings.md": "# Tall buildings\n\nA list of the tallest towers we visited.\n",
    "notes/meeting.md": "# Planning\n\nMeeting about hiring and the roadmap.\n",
    "notes/recipes.md": "# Recipes\n\nBake the bread at 220 degrees for forty minutes.\n",
}


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> str:
    # The real model: the notes near "giraffe" in meaning are what a files list must leave out.
    root = make_kb(tmp_path_factory.mktemp("floor") / "kb", NOTES)
    assert run("--kb", str(root), "sync")[0] == 0
    return str(root)


def test_the_floor_is_the_larger_of_its_two_parts() -> None:
    assert list_floor([]) == LIST_FLOOR
    assert list_floor([0.2]) == LIST_FLOOR
    assert list_floor([0.9, 0.1]) == round(LIST_FLOOR_SHARE * 0.9, 4)


@pytest.mark.model
def test_files_lists_only_matches_and_says_what_it_left_out(kb: str) -> None:
    code, everything, _ = run(
        "--kb", kb, "search", "giraffe", "--format", "files", "--min-score", "0"
    )
    assert code == 0
    listed = everything.split()
    assert listed[0] == "zoo/animals.md" and len(listed) > 1, "weak matches exist"
    code, out, err = run("--kb", kb, "search", "giraffe", "--format", "files")
    assert code == 0
    assert out.split() == ["zoo/animals.md"]
    match = re.search(r"left out (\d+) of (\d+) hits scoring below the relevance floor", err)
    assert match is not None, err
    assert (int(match[1]), int(match[2])) == (len(listed) - 1, len(listed))
    assert "--min-score 0" in err
    code, out, err = run("--kb", kb, "search", "giraffe", "--format", "md")
    assert code == 0 and out.count("\n## ") == 1 and "zoo/animals.md" in out and "left out" in err
    # The table is a ranking, not a list of matches: no floor there.
    code, out, err = run("--kb", kb, "search", "giraffe")
    assert code == 0 and "travel/kenya.md" in out and "left out" not in err


@pytest.mark.model
def test_files_exits_1_when_nothing_matches(kb: str) -> None:
    code, out, _ = run(
        "--kb",
        kb,
        "search",
        "giraffe",
        "--format",
        "files",
        "--channel",
        "bm25",
        "--path",
        "notes/",
    )
    assert (code, out) == (1, "")
    # Other formats report an empty result and succeed.
    code, out, _ = run(
        "--kb", kb, "search", "giraffe", "--format", "md", "--channel", "bm25", "--path", "notes/"
    )
    assert code == 0 and "No hits." in out


def test_a_pdf_hits_further_passages_show_pages_not_lines() -> None:
    import io

    from rich.console import Console

    from pinakes_cli import render
    from pinakes_core.models import Hit, Passage, SearchResult

    hit = Hit(
        doc_id="d",
        chunk=0,
        path="repair.pdf",
        title="Repair",
        heading_path=[],
        text="The budgeted Merkle schedule finished in eleven minutes.",
        score=0.5,
        lines=(1, 9),
        source_type="pdf",
        page_start=2,
        page_end=2,
        ranks={},
        passages=[
            Passage(chunk=1, heading_path=[], text="x", lines=(10, 30), score=0.4, page_start=3),
            Passage(chunk=2, heading_path=["Notes"], text="y", lines=(31, 40), score=0.3),
        ],
    )
    console = Console(file=io.StringIO(), width=200)
    render.render_search(console, SearchResult(query="merkle", hits=[hit], timings_ms={}))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "repair.pdf p. 2" in out
    assert "+ (top)  p. 3  score 0.4000" in out
    assert "+ Notes  lines 31-40  score 0.3000" in out


ADR = (
    "---\naliases: [Retry ADR]\n---\n# Retry policy\n\nRetries back off exponentially, at most "
    "five times.\n"
)


def test_show_takes_a_note_name_or_alias_suggests_near_ones_and_prints_the_body(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import FakeHashEmbedder

    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    files = {
        "decisions/0002-retry-policy.md": ADR,
        "index.md": "# Index\n\nSee [[0002-retry-policy]] and [[Retry ADR]].\n",
    }
    root = str(make_kb(tmp_path_factory.mktemp("names") / "kb", files))
    assert run("--kb", root, "sync")[0] == 0
    for name in ("0002-retry-policy", "Retry ADR", "retry policy"):
        code, out, err = run("--kb", root, "show", name)
        assert code == 0, err
        assert "decisions/0002-retry-policy.md" in out and "Retries back off" in out
    code, out, err = run("--kb", root, "show", "0002-retry-polcy")
    assert code == 1
    assert "Did you mean 'decisions/0002-retry-policy.md'?" in err
    code, out, err = run("--kb", root, "show", "0002-retry-policy", "--body")
    assert code == 0, err
    assert out == ADR
    code, out, _ = run("--kb", root, "show", "Retry ADR", "--body", "--section", "Retry policy")
    assert code == 0 and out.startswith("# Retry policy") and "aliases" not in out


def test_init_writes_sidecars_only_when_needed_and_a_rename_keeps_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import FakeHashEmbedder, doc_ids

    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(5):
        (root / f"note-{i}.md").write_text(f"# Note {i}\n\nText {i}.\n", encoding="utf-8")
    assert run("init", str(root))[0] == 0
    assert 'write = "when-needed"' in (root / "pinakes.toml").read_text(encoding="utf-8")
    assert run("--kb", str(root), "sync")[0] == 0
    # Each note gained a sidecar holding only its id (32 new files in a 32-note folder)...
    assert list(root.rglob("*.pnk.yaml")) == []
    before = doc_ids(root)["note-1.md"]
    (root / "note-1.md").rename(root / "renamed.md")
    assert run("--kb", str(root), "sync")[0] == 0
    assert doc_ids(root)["renamed.md"] == before
    # The kept id now lives in a sidecar beside the note: a rebuild keeps it too.
    assert [p.name for p in root.rglob("*.pnk.yaml")] == ["renamed.md.pnk.yaml"]
    assert run("--kb", str(root), "sync", "--rebuild")[0] == 0
    assert doc_ids(root)["renamed.md"] == before


def test_init_from_a_template_also_writes_when_needed(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "kb"), "--template", "general")[0] == 0
    config = (tmp_path / "kb" / "pinakes.toml").read_text(encoding="utf-8")
    assert config.count("[sidecars]") == 1 and 'write = "when-needed"' in config


def test_mcp_config_refuses_a_kb_that_does_not_exist(tmp_path: Path) -> None:
    # A typo wrote a host config that could never start the server.
    code, out, err = run(
        "mcp", "config", "--host", "cursor", "--kb", str(tmp_path / "notse"), "--json"
    )
    assert code == 1 and out == "" and "does not exist" in err and "notse" in err
    (tmp_path / "plain").mkdir()
    code, _, err = run("mcp", "config", "--host", "cursor", "--kb", str(tmp_path / "plain"))
    assert code == 1 and "is not a KB" in err and "pnk init" in err
    # A folder inside a KB is a KB folder (the server finds pinakes.toml above it).
    kb = make_kb(tmp_path / "notes", {"sub/a.md": "# A\n"})
    code, _, err = run("mcp", "config", "--host", "cursor", "--kb", str(kb / "sub"), "--json")
    assert code == 0, err


def test_an_empty_xdg_config_home_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes_mcp import hosts

    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", "")
    assert hosts.default_file("claude-desktop") == (
        tmp_path / ".config" / "Claude" / "claude_desktop_config.json"
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    assert hosts.default_file("claude-desktop").parent == tmp_path / "cfg" / "Claude"


def test_fleet_add_says_when_it_renames_a_registered_kb(tmp_path: Path) -> None:
    kb = make_kb(tmp_path / "garden", {"a.md": "# A\n"}, name="garden")
    assert run("fleet", "add", str(kb))[0] == 0
    code, out, err = run("fleet", "add", str(kb), "--name", "veg")
    assert code == 0 and "veg" in out
    assert "Renamed the fleet's KB 'garden' to 'veg'" in err and "--kb garden" in err
    code, out, _ = run("fleet", "add", str(kb), "--name", "herbs", "--json")
    assert code == 0
    data = json.loads(out)
    assert (data["name"], data["previous_name"], data["action"]) == ("herbs", "veg", "renamed")
    code, _, err = run("fleet", "add", str(kb))
    assert code == 0 and "Renamed" not in err


def test_only_the_words_search_matches_are_highlighted() -> None:
    import io

    from rich.console import Console

    from pinakes_cli import render
    from pinakes_core.models import Hit, SearchResult

    text = "We should use retries: use them when you should."
    hit = Hit(
        doc_id="d", chunk=0, path="a.md", title="A", heading_path=[], text=text,
        score=0.5, lines=(1, 2), ranks={},
    )  # fmt: skip
    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=300)
    render.render_search(
        console, SearchResult(query="should we use retries", hits=[hit], timings_ms={})
    )
    styled = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b[1;33mretries" in styled
    for stopword in ("should", "use", "We"):
        assert f"\x1b[1;33m{stopword}" not in styled


def test_status_says_why_vectors_are_not_chunks() -> None:
    import io

    from rich.console import Console

    from pinakes_cli import render
    from pinakes_core.models import Status

    fields = {name: None for name in Status.model_fields}
    fields.update(
        name="t", kb_id="k", root="/r", synced=True, documents=2, chunks=5, vectors=9,
        store_bytes=0, stale={"new": 0, "changed": 0, "removed": 0},
    )  # fmt: skip
    status = Status.model_validate(fields)
    console = Console(file=io.StringIO(), width=200)
    render.render_status(console, status)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "9 (one per distinct chunk text, and per graph label)" in out


def test_upgrade_to_another_template_names_the_one_the_kb_has(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    assert run("init", str(kb), "--template", "general")[0] == 0
    code, out, err = run("upgrade", "--kb", str(kb), "--template", "engineering-docs", "--dry-run")
    assert code == 0, err
    # It said "Upgrade engineering-docs: no template -> 1.0" for a KB made from general.
    assert "no template" not in out
    assert re.search(r"Switch template: general \S+ -> engineering-docs \S+", out), out
    assert "from None" not in out
    code, out, _ = run("upgrade", "--kb", str(kb), "--template", "engineering-docs", "--json")
    assert json.loads(out)["from_template"].startswith("general ")
    # Applied, the header comment names the template the KB now has.
    code, _, err = run("upgrade", "--kb", str(kb), "--template", "engineering-docs", "--yes")
    assert code == 0, err
    config = (kb / "pinakes.toml").read_text(encoding="utf-8")
    assert 'template = "engineering-docs"' in config
    assert "From the `general` template" not in config
    assert config.count("From the `engineering-docs` template") == 1
