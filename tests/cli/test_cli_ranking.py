"""`pnk search` ranking options (issue 9): titles beside heading paths, --per-doc, --min-score,
and the adaptive choices under --explain, on a copy of the bundled example KB."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from pinakes_cli.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distsys-notes"

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("kb") / "distsys-notes"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pinakes"))
    return target


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout


def search_json(kb_dir: Path, *args: str) -> dict:
    code, out = run("--kb", str(kb_dir), "search", *args, "--json")
    assert code == 0, out
    return json.loads(out)


def test_every_hit_line_shows_the_document_title_beside_the_heading_path(kb_dir: Path) -> None:
    result = search_json(kb_dir, "log replication and commit index", "-k", "5", "--per-chunk")
    code, out = run(
        "--kb", str(kb_dir), "search", "log replication and commit index", "-k", "5", "--per-chunk"
    )
    assert code == 0
    for hit in result["hits"]:
        where = f"{hit['path']}:{hit['lines'][0]}-{hit['lines'][1]}"
        line = next(line for line in out.splitlines() if where in line)
        assert hit["title"] in line
        deeper = [h for h in hit["heading_path"] if h.lower() != hit["title"].lower()]
        if deeper:
            assert f"{hit['title']} › " in line and deeper[-1] in line


def test_per_doc_is_the_default_and_returns_k_distinct_documents(kb_dir: Path) -> None:
    chunks = search_json(kb_dir, "leader election", "-k", "6", "--per-chunk")
    per_doc = search_json(kb_dir, "leader election", "-k", "6", "--per-doc")
    default = search_json(kb_dir, "leader election", "-k", "6")
    assert [(h["doc_id"], h["chunk"]) for h in default["hits"]] == [
        (h["doc_id"], h["chunk"]) for h in per_doc["hits"]
    ]
    assert all("passages" not in h for h in chunks["hits"])
    assert len(per_doc["hits"]) == 6
    assert len({h["doc_id"] for h in per_doc["hits"]}) == 6
    assert len({h["doc_id"] for h in chunks["hits"]}) <= 6
    scores = [h["score"] for h in per_doc["hits"]]
    assert scores == sorted(scores, reverse=True)
    code, out = run("--kb", str(kb_dir), "search", "leader election", "-k", "3", "--per-doc")
    assert code == 0 and out.count(". ") >= 3


def test_min_score_and_explain(kb_dir: Path) -> None:
    loose = search_json(kb_dir, "leader election", "-k", "8")
    cut = loose["hits"][3]["score"]
    strict = search_json(kb_dir, "leader election", "-k", "8", "--min-score", str(cut))
    assert [h["score"] for h in strict["hits"]] == [
        h["score"] for h in loose["hits"] if h["score"] >= cut
    ]
    assert search_json(kb_dir, "leader election", "--min-score", "1")["hits"] == []
    code, out = run("--kb", str(kb_dir), "search", "leader election", "--min-score", "2")
    assert code != 0
    explained = search_json(kb_dir, "raft-log-v2 --flag", "--explain")
    assert explained["ranking"]["weights"]["bm25"] > explained["ranking"]["weights"]["dense"]
    code, out = run("--kb", str(kb_dir), "search", "leader election", "--explain")
    assert code == 0 and "ranking: weights bm25 0.35, dense 0.65" in out
