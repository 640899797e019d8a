"""`pnk` with PDF and code sources (issue 18): --strict, --source-type, show --page.

The embedder is the FAKE hash embedder (patched into KB): these tests check flags, exit
codes and rendering, where semantics do not matter.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FakeHashEmbedder, make_kb
from pinakes_cli.main import cli

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "pdf"


@pytest.fixture
def papers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = FakeHashEmbedder()
    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: fake)
    monkeypatch.setattr("pinakes_core.index.sync.model_id_for", lambda config: fake.model_id)
    root = make_kb(tmp_path / "papers", {"notes.md": "# Notes\n\nReplicas disagree.\n"})
    for name in ("two-column", "scanned", "encrypted"):
        shutil.copy(FIXTURES / f"{name}.pdf", root / f"{name}.pdf")
    return root


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_sync_reports_bad_pdfs_and_strict_fails_on_them(papers: Path) -> None:
    code, out, _ = run("--kb", str(papers), "sync")
    assert code == 0
    assert "no text layer (scanned?); 2 pages skipped" in out
    assert "PDF is encrypted (it needs a password)" in out
    code, _, err = run("--kb", str(papers), "sync", "--strict")
    assert code == 1 and "2 file(s) skipped (--strict)" in err


def test_search_by_source_type_cites_the_page(papers: Path) -> None:
    run("--kb", str(papers), "sync")
    code, out, _ = run(
        "--kb",
        str(papers),
        "search",
        "lighthouse keeper",
        "--source-type",
        "pdf",
        "--channel",
        "bm25",
    )
    assert code == 0 and "two-column.pdf p. 3" in out and "notes.md" not in out
    code, out, _ = run("--kb", str(papers), "search", "replicas", "--source-type", "pdf", "--json")
    hits = json.loads(out)["hits"]
    assert hits and all(h["source_type"] == "pdf" and h["page_start"] for h in hits)
    code, _, err = run("--kb", str(papers), "search", "x", "--source-type", "word")
    assert code == 2 and "word" in err


def test_show_page_range(papers: Path) -> None:
    run("--kb", str(papers), "sync")
    code, out, _ = run("--kb", str(papers), "show", "two-column.pdf", "--page", "3")
    assert code == 0 and "[page 3]" in out and "[page 4]" not in out
    assert "3-3 of 4" in out
    code, out, _ = run("--kb", str(papers), "show", "two-column.pdf", "--page", "9", "--json")
    assert code == 1 and "has 4 pages" in json.loads(out)["error"]["message"]
    code, _, err = run("--kb", str(papers), "show", "notes.md", "--page", "1")
    assert code == 1 and "has no pages" in err
