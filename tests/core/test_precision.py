"""Precision of what search returns (issue 35): quoted phrases, a relevance floor for lists
of matches, and titles that only repeat a file name."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB
from pinakes_core.index.query import build_fts_query, fts_phrases, quoted_phrases
from pinakes_core.search.retrieval import lift_quoted

PHRASE_KB: dict[str, str | bytes] = {
    "sre/slo.md": (
        "# Service level objectives\n\nWe track availability for every service we run. When "
        "the error budget is spent, feature work stops until reliability recovers and the "
        "incident reviews are done.\n"
    ),
    "finance/budget.md": (
        "# Budget\n\nThe budget covers hardware. Budget errors in expense reports are an error "
        "the budget office fixes.\n"
    ),
    "sre/oncall.md": "# On-call\n\nAn error pages the primary; the secondary handles escalation.\n",
}


@pytest.fixture
def phrase_kb(tmp_path: Path):
    handle = KB.open(make_kb(tmp_path / "kb", PHRASE_KB), embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


def test_a_quoted_span_is_one_phrase_of_its_words_in_order() -> None:
    assert quoted_phrases('"Error Budget" policy “burn rate” "one"') == [
        '"error budget"',
        '"burn rate"',
    ]
    # Backticks mark code, quoted with other spacing or parts left out: no phrase.
    assert quoted_phrases("why does `echo .. | ls` list the folder?") == []
    phrases = fts_phrases('how do we spend the "error budget"?')
    assert phrases[0] == '"error budget"'
    # The words still count on their own, for passages holding them apart.
    assert '"error"' in phrases and '"budget"' in phrases
    assert build_fts_query('"error budget"') == '"error budget" OR "error" OR "budget"'
    # An unclosed quote or a pasted paragraph is no phrase.
    assert quoted_phrases('"error budget') == []
    assert quoted_phrases('"' + "word " * 60 + '"') == []


def test_the_passage_holding_a_quoted_phrase_ranks_first(phrase_kb: KB) -> None:
    # finance/budget.md names "budget" in its title and says "error" and "budget" often, apart;
    # only sre/slo.md has the phrase.
    hits = phrase_kb.search('"error budget"', k=3).hits
    assert hits[0].path == "sre/slo.md"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Unquoted, the same words are no phrase: the page saying them most often may lead.
    unquoted = phrase_kb.search("error budget", k=3).hits
    assert {h.path for h in unquoted} >= {"sre/slo.md", "finance/budget.md"}


def test_lift_quoted_moves_holders_up_and_scores_never_rise(phrase_kb: KB) -> None:
    ctx = phrase_kb.query_context('"error budget"', candidates=50)
    ids = {
        path: chunk
        for chunk, path in ctx.conn.execute(
            "SELECT c.chunk_id, d.path FROM chunks c JOIN documents d USING (doc_id)"
        )
    }
    fused = [(ids["finance/budget.md"], 0.9), (ids["sre/oncall.md"], 0.5), (ids["sre/slo.md"], 0.4)]
    ranked, why = lift_quoted(ctx, fused)
    assert ranked == [
        (ids["sre/slo.md"], 0.4),
        (ids["finance/budget.md"], 0.4),
        (ids["sre/oncall.md"], 0.4),
    ]
    assert why.startswith("ran: 1 candidate")
    # No quoted phrase, or no holder among the candidates: nothing moves.
    plain = phrase_kb.query_context("error budget", candidates=50)
    assert lift_quoted(plain, fused) == (fused, "skipped: the query quotes no phrase")
    absent = phrase_kb.query_context('"budget office error"', candidates=50)
    assert lift_quoted(absent, fused)[0] == fused
    explained = phrase_kb.search('"error budget"', k=3, explain=True).ranking
    assert explained is not None and explained.stages["phrases"].startswith("ran:")


def _pages(count: int) -> str:
    return "\n\n".join(
        f"Section {i}. Tail latency grows with fan-out across {i + 3} replicas. Queueing delay "
        "dominates at high load, and hedged requests cut the p99 of every read path. " * 3
        for i in range(count)
    )


FILE_NAMED_KB: dict[str, str | bytes] = {
    # No title but its file name, twelve chunks none of which says "budget".
    "papers/latency-budget.txt": _pages(12),
    "notes/planning.md": (
        "# Quarterly planning\n\nWe agreed the travel budget for the offsite and moved two hires "
        "to the next quarter. The hardware order waits for the new fiscal year.\n"
    ),
    "notes/ops.md": "# Operations review\n\nThe error budget of the ledger was spent in March.\n",
}


def test_a_title_that_is_only_a_file_name_does_not_outweigh_text(tmp_path: Path) -> None:
    with KB.open(make_kb(tmp_path / "kb", FILE_NAMED_KB), embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hits = kb.search("budget", k=20, channels=["bm25"], group_by="chunk").hits
        paths = [h.path for h in hits]
        # The notes that use the word come first; the paper is found once, by its name.
        assert paths[:2] in (
            ["notes/ops.md", "notes/planning.md"],
            ["notes/planning.md", "notes/ops.md"],
        )
        assert paths.count("papers/latency-budget.txt") == 1
        # Twelve chunks holding "budget" in their title made it common, so a note's evidence
        # for it vanished: the planning note matched "error budget" with a score of 0.
        hits = kb.search("error budget", k=5, channels=["bm25"], group_by="chunk").hits
        planning = next(h for h in hits if h.path == "notes/planning.md")
        assert planning.score > 0.1
        # The document keeps its title, and its name still finds it.
        named = kb.search("latency budget", k=3).hits[0]
        assert named.path == "papers/latency-budget.txt" and named.title == "latency-budget"


PDF = Path(__file__).resolve().parents[1] / "fixtures" / "pdf" / "two-column-interleaved.pdf"


def test_a_pdf_hits_further_passages_carry_their_pages(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"repair.pdf": PDF.read_bytes()})
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        hits = kb.search("Merkle full scan schedule", k=1, group_by="document").hits
    assert hits and hits[0].passages, "both pages match: one hit, one further passage"
    hit, passage = hits[0], hits[0].passages[0]
    assert {hit.page_start, passage.page_start} == {1, 2}
    assert passage.page_end == passage.page_start
    assert passage.model_dump(mode="json")["page_start"] == passage.page_start


def test_a_sync_reports_its_whole_wall_time_with_its_parts(tmp_path: Path) -> None:
    import time

    with KB.open(make_kb(tmp_path / "kb", PHRASE_KB), embedder=FakeHashEmbedder()) as kb:
        started = time.perf_counter()
        report = kb.sync()
        wall = time.perf_counter() - started
    # "synced in 6.1 s" for a run of 11.9 s: self-calibration and the vector snapshot were
    # left out of `seconds`.
    assert set(report.parts_s) == {"index", "self-calibration", "vector snapshot"}
    assert report.seconds >= sum(report.parts_s.values()) - 0.003
    assert report.seconds <= wall + 0.001  # rounded to the millisecond
    assert report.model_dump(mode="json")["parts_s"]["index"] == report.parts_s["index"]


def test_adopt_dry_run_shows_no_id_the_real_run_does_not_assign(tmp_path: Path) -> None:
    import re

    from pinakes_core.manage.adopt import adopt

    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "plain.md").write_text("# Plain\n\nNo id.\n", encoding="utf-8")
    (vault / "zettel.md").write_text("---\nid: 202401011200\n---\n# Z\n", encoding="utf-8")
    ulid = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")

    def lines(report: object) -> list[str]:
        return [line for item in report.mapped + report.unmapped for line in item.examples]  # type: ignore[attr-defined]

    preview = lines(adopt(vault, dry_run=True))
    assert any("plain.md → an id derived from its path" in line for line in preview)
    assert any("202401011200 → an id derived from it" in line for line in preview)
    assert not any(ulid.search(line) for line in preview), preview
    real = lines(adopt(vault))
    assert any(line.startswith("plain.md → ") and ulid.search(line) for line in real)


def test_adopt_leaves_out_the_obsidian_templates_folder(tmp_path: Path) -> None:
    from pinakes_core.config import load_config
    from pinakes_core.manage.adopt import adopt

    vault = tmp_path / "vault"
    (vault / ".obsidian" / "plugins" / "templater-obsidian").mkdir(parents=True)
    (vault / ".obsidian" / "templates.json").write_text('{"folder": "Meta/Templates"}')
    (vault / ".obsidian" / "plugins" / "templater-obsidian" / "data.json").write_text(
        '{"templates_folder": "Templater"}'
    )
    for rel in ("note.md", "Meta/Templates/daily.md", "Templater/meeting.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text("# {{title}}\n\nMeeting notes for <% tp.date.now() %>.\n")
    report = adopt(vault)
    assert report.flavour == "obsidian" and report.documents == 1
    assert load_config(vault).sync.exclude == ["Meta/Templates/**", "Templater/**"]
