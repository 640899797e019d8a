"""``pnk search`` with the reader (issue 36): ``--reader/--no-reader`` and what ``--explain`` shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import FakeHashEmbedder, make_kb, set_config
from pinakes_cli.main import cli
from pinakes_core import KB

NOTES = {
    f"notes/topic{i}.md": (
        f"# Topic {i}\n\nThe service{i} component listens on port {7000 + i}.\n\n## Owners\n\n"
        f"Team{i} owns service{i}; escalate to lead{i} when queue{i} backs up.\n"
    )
    for i in range(8)
}


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", NOTES)
    # BM25 only, so the CLI (which loads the configured embedding model) embeds nothing here.
    set_config(root, "retrieval", 'channels = ["bm25"]\ngraph_channel = "off"\nreader = true')
    set_config(root, "confidence", "self_calibrate = false")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
    return root


def _search(root: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--kb", str(root), "search", *args], obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.model
def test_the_reader_follows_the_kb_setting_and_no_reader_turns_it_off(kb_dir: Path) -> None:
    code, out, err = _search(kb_dir, "who owns service3?", "--json")
    assert code == 0, err
    read = json.loads(out)
    assert any("reader" in hit for hit in read["hits"]) and "reader" in read["timings_ms"]
    code, out, err = _search(kb_dir, "who owns service3?", "--no-reader", "--json")
    assert code == 0, err
    plain = json.loads(out)
    assert not any("reader" in hit for hit in plain["hits"])
    assert "reader" not in plain["timings_ms"]


@pytest.mark.model
def test_explain_shows_each_hits_reader_probability_and_the_readers_time(kb_dir: Path) -> None:
    code, out, err = _search(kb_dir, "who owns service3?", "--explain")
    assert code == 0, err
    assert "reader p=" in out
    assert "reader: ran: read" in out and " ms)" in out
