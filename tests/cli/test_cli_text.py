"""Issue 11 item 1: user text prints literally on every CLI path, never as Rich markup.

Two layers: a property test pushes random bracket strings through every renderer, and a
fixture KB full of brackets goes through the real commands (search, show, links, sync,
doctor, eval, errors) with the real model.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from conftest import FakeHashEmbedder, make_kb
from pinakes_cli import render
from pinakes_cli.main import cli
from pinakes_core import DocumentView, Hit, SearchResult, SyncReport
from pinakes_core.manage.eval import ClassMetrics, ConfigReport, EvalReport, Overall
from pinakes_core.models import (
    DoctorFinding,
    DoctorReport,
    LinksResult,
    Neighbour,
    SkippedFile,
    UnresolvedLink,
)

NASTY = ["[/etc/hosts]", "[red]x[/red]", "[[wiki]]", "[x]", "[/]", "[bold", ":smile:", "[link=x]y"]

# Random strings of bracket-heavy characters, no whitespace (snippets collapse whitespace).
brackets = st.text(alphabet="[]/=#:!abxred", min_size=1, max_size=30) | st.sampled_from(NASTY)


def rendered(draw: object) -> str:
    console = Console(file=io.StringIO(), width=400, soft_wrap=True, color_system=None)
    draw(console)  # type: ignore[operator]
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


def _hit(text: str) -> Hit:
    return Hit(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2S3T4V",
        chunk=0,
        path=f"notes/{text}.md",
        title=f"T{text}",
        heading_path=[f"H{text}"],
        text=f"before {text} after",
        score=0.5,
        lines=(1, 2),
        ranks={"bm25": 1, "dense": None},
    )


@settings(max_examples=60, deadline=None)
@given(brackets)
def test_every_renderer_prints_bracket_text_literally(text: str) -> None:
    result = SearchResult(
        query=text, hits=[_hit(text)], timings_ms={}, confidence=0.5, abstain=False
    )
    for fmt in ("table", "md", "files"):
        out = rendered(lambda c, fmt=fmt: render.render_search(c, result, explain=True, fmt=fmt))
        assert f"notes/{text}.md" in out, fmt
    table = rendered(lambda c: render.render_search(c, result))
    assert f"before {text} after" in table and f"H{text}" in table
    empty = SearchResult(query=text, hits=[], timings_ms={}, note=f"No tag {text!r}.")
    assert f"No tag {text!r}." in rendered(lambda c: render.render_search(c, empty))

    doc = DocumentView(
        doc_id="01JAXR3T5W6Z8Q9N0P1R2S3T4V",
        uri="pnk://x/01JAXR3T5W6Z8Q9N0P1R2S3T4V",
        path=f"{text}.md",
        title=f"Title {text}",
        tags=[text],
        aliases=[],
        links=[],
        chunks=1,
        modified=0.0,
        text=f"body {text}\n",
        meta={"k": text},
        section=f"S{text}",
    )
    out = rendered(lambda c: render.render_document(c, doc))
    for piece in (f"Title {text}", f"body {text}", f"{text}.md", f"S{text}", f"k: {text}"):
        assert piece in out

    links = LinksResult(
        doc_id="D",
        title=f"L{text}",
        rel=None,
        depth=1,
        depth_asked=1,
        neighbours=[
            Neighbour(
                doc_id="N",
                title=f"N{text}",
                path=f"p{text}.md",
                rel="links-to",
                direction="out",
                distance=1,
                score=1.0,
            )
        ],
        frontier=[],
        unresolved=[UnresolvedLink(target=f"[[{text}]]", reason=f"r{text}")],
        confidence=None,
        truncated=False,
    )
    out = rendered(lambda c: render.render_links(c, links))
    for piece in (f"L{text}", f"N{text}", f"p{text}.md", f"[[{text}]]: r{text}"):
        assert piece in out

    report = SyncReport(
        added=[],
        changed=[],
        removed=[],
        renamed=[],
        unchanged=0,
        skipped=[SkippedFile(path=f"s{text}.md", reason=f"why {text}")],
        warnings=[f"w{text}"],
        chunks_embedded=0,
        chunks_reused=0,
        embed_seconds=0.0,
        chunks_per_second=None,
        seconds=0.0,
    )
    out = rendered(lambda c: render.render_sync(c, report))
    assert f"s{text}.md: why {text}" in out and f"w{text}" in out

    doctor = DoctorReport(
        findings=[
            DoctorFinding(check="c", severity="warning", message=f"m{text}", items=[f"i{text}"])
        ],
        fixed=[f"f{text}"],
    )
    out = rendered(lambda c: render.render_doctor(c, doctor))
    assert f"m{text}" in out and f"i{text}" in out and f"f{text}" in out

    metrics = ClassMetrics.model_validate(
        {
            "questions": 1,
            "recall@1": 1.0,
            "recall@5": 1.0,
            "recall@10": 1.0,
            "mrr": 1.0,
            "ndcg@10": 1.0,
        }
    )
    overall = Overall(
        questions=1,
        false_abstain=0.0,
        false_confidence=0.0,
        false_confidence_none=None,
        latency_ms_p50=1.0,
        latency_ms_p95=1.0,
    )
    evaluation = EvalReport(
        kb="k",
        questions_file=f"q{text}.jsonl",
        abstain_below=0.2,
        configs={
            f"c{text}": ConfigReport(
                channels=["bm25"], classes={f"k{text}": metrics}, overall=overall
            )
        },
    )
    out = rendered(lambda c: render.render_eval(c, evaluation))
    assert f"q{text}.jsonl" in out and f"c{text}" in out and f"k{text}" in out

    out = rendered(lambda c: render.render_error(c, f"bad {text}", f"hint {text}"))
    assert f"bad {text}" in out and f"hint {text}" in out


# -- the real commands over a KB full of brackets ------------------------------------------

BRACKETS: dict[str, str | bytes] = {
    "todo.md": (
        "---\ntitle: \"[red]Todo[/red] list\"\ntags: ['[x]']\n---\n# [red]Todo[/red] list\n\n"
        "- [x] done item\n- [ ] open item\n\nRun [[raft]] or [[paxos]] before editing "
        "[/etc/hosts] and [bold]anything[/bold].\n"
    ),
    "raft.md": "# Raft [notes]\n\nRaft leaders; see [[todo]] and [link=evil]click[/link].\n",
    "broken.md": "# Broken\n\nA link to [[no such page]] and [x](missing.md).\n",
}


@pytest.fixture(scope="module")
def bracket_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_kb(tmp_path_factory.mktemp("kb") / "[red]kb[/red]", BRACKETS, name="brackets")
    (root / "questions.jsonl").write_text(
        json.dumps(
            {"id": "q[1]", "query": "[/etc/hosts]", "class": "lookup", "relevant": ["todo.md"]}
        )
        + "\n",
        "utf-8",
    )
    return root


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.model
def test_commands_print_bracket_text_literally(bracket_kb: Path) -> None:
    kb = str(bracket_kb)
    code, out, err = run("--kb", kb, "sync")
    assert code == 0, err
    code, out, err = run("--kb", kb, "search", "[/etc/hosts] editing", "-k", "3")
    assert code == 0, err
    assert "Traceback" not in err and "MarkupError" not in err
    assert "[[raft]] or [[paxos]]" in out and "[/etc/hosts]" in out
    assert "[red]Todo[/red] list" in out
    code, out, err = run("--kb", kb, "show", "todo.md")
    assert code == 0, err
    for piece in (
        "- [x] done item",
        "[[raft]] or [[paxos]]",
        "[/etc/hosts]",
        "[bold]anything[/bold]",
    ):
        assert piece in out
    assert "[red]Todo[/red] list" in out and "[x]" in out  # title and tag
    code, out, err = run("--kb", kb, "search", "anything", "--format", "md")
    assert code == 0 and "[/etc/hosts]" in out
    code, out, err = run("--kb", kb, "links", "raft.md")
    assert code == 0, err
    assert "[red]Todo[/red] list" in out
    code, out, err = run("--kb", kb, "links", "broken.md")
    assert "[[no such page]]" in out or "no such page" in out
    code, out, err = run("--kb", kb, "doctor")
    assert code == 0, err
    assert "no such page" in out
    code, out, err = run("--kb", kb, "eval", "--configs", "bm25")
    assert code == 0, err
    assert "[red]kb[/red]" in out  # the questions file path, inside the bracketed folder
    code, out, err = run("--kb", kb, "show", "[/etc/hosts].md")
    assert code == 1 and "No document '[/etc/hosts].md'" in err and "Traceback" not in err


def test_errors_quote_bracket_values_literally(tmp_path: Path) -> None:
    code, _, err = run("--kb", str(tmp_path / "[red]nope[/red]"), "status")
    assert code == 1 and "[red]nope[/red]" in err


# -- control characters: shown, never sent to the terminal ---------------------------------

CONTROLS: dict[str, str | bytes] = {
    "ansi.md": (
        '---\ntitle: "Quokka \\e[2J\\e[H \\x9b31m done"\ntags: ["t\\e[5m"]\n---\n'
        "# Quokka \x1b]0;owned\x07 heading\n\nquokka body \x1b[31mred\x1b[0m \x7f end\n"
    ),
    "plain.md": "# Plain\n\nSee [[ansi]] about quokka.\n",
}
# What a terminal acts on: C0 but tab and newline, DEL, C1.
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_commands_show_control_characters_as_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A title or passage holding ESC [2J cleared the user's screen (and OSC 0 retitled the
    # window): rich passes ESC, DEL and C1 through as they are.
    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    kb = str(make_kb(tmp_path / "kb", CONTROLS, name="controls"))
    assert run("--kb", kb, "sync")[0] == 0
    for args in (
        ("search", "quokka"),
        ("search", "quokka", "--format", "md"),
        ("search", "quokka", "--explain"),
        ("show", "ansi.md"),
        ("links", "plain.md"),
        ("doctor",),
        ("search", "quokka", "--json"),
        ("show", "ansi.md", "--json"),
    ):
        code, out, err = run("--kb", kb, *args)
        assert code == 0, (args, err)
        assert not _RAW_CONTROL.search(out + err), (args, out)
        if "--json" in args:
            assert "\\u001b[" in out and json.loads(out)  # JSON's own escape, same data
        else:
            assert "\\x1b[" in out, (args, out)
    out = run("--kb", kb, "show", "ansi.md")[1]
    assert "Quokka \\x1b[2J\\x1b[H \\x9b31m done" in out  # the title, escaped and whole
    assert "quokka body \\x1b[31mred\\x1b[0m \\x7f end" in out
    assert "t\\x1b[5m" in out  # the tag


def test_visible_escapes_only_control_characters() -> None:
    text = "tab\there\nnew \x1b[31m \x00 \x7f \x85 \x9b é ✓ [red]x[/red]"
    assert render.visible(text) == (
        "tab\there\nnew \\x1b[31m \\x00 \\x7f \\x85 \\x9b é ✓ [red]x[/red]"
    )


def test_a_console_writing_to_a_pipe_is_wide_enough_for_whole_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rich.table import Table

    from pinakes_cli import render

    monkeypatch.delenv("COLUMNS", raising=False)
    console = render.console(file=io.StringIO(), soft_wrap=True)  # stdout under pytest: no tty
    assert console.width == render.PIPE_WIDTH
    table = Table("config", "false-confidence (none + offtopic)", "AUROC")
    table.add_row("hybrid+ppr-auto", "0.518", "0.847")
    console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "false-confidence (none + offtopic)" in out and "hybrid+ppr-auto" in out
    # The user's COLUMNS and an explicit width still decide.
    monkeypatch.setenv("COLUMNS", "100")
    assert render.console(file=io.StringIO()).width == 100
    assert render.console(file=io.StringIO(), width=70).width == 70


def _synced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str]) -> Path:
    """A KB of ``files`` synced through ``pnk`` with the fake embedder."""
    monkeypatch.setattr("pinakes_core.kb.load_embedder", lambda config: FakeHashEmbedder())
    root = make_kb(tmp_path / "kb", files)
    assert run("--kb", str(root), "sync")[0] == 0
    return root


def test_json_with_del_and_c1_in_user_text_stays_valid_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `pnk review --json` went through rich's print_json, whose raw DEL/C1 characters the
    # escaping console turned into "\x7f", an invalid JSON escape.
    root = _synced(tmp_path, monkeypatch, {"a.md": "# A\n\nalpha\n", "b.md": "# B\n\nbeta\n"})
    kb = str(root)
    side = root / "a.md.pnk.yaml"
    side.write_text(
        side.read_text("utf-8")
        + 'suggested_links:\n  - {to: b.md, rel: "cites\\x7f\\x9b", operation: "ask\\x85"}\n',
        "utf-8",
    )
    code, out, err = run("--kb", kb, "review", "--json")
    assert code == 0, err
    staged = json.loads(out)
    assert staged and staged[0]["rel"] == "cites\x7f\x9b"


def test_bidi_overrides_in_user_text_are_shown_not_obeyed() -> None:
    from pinakes_cli import render

    # U+202E would display "txt.exe" as "exe.txt"; right-to-left text itself is untouched.
    assert render.visible("report\u202eexe.txt") == "report\\u202eexe.txt"
    assert render.visible("a\u2066b\u2069c") == "a\\u2066b\\u2069c"
    assert render.visible("שלום עולם") == "שלום עולם"


def test_a_path_holding_a_line_break_stays_one_line_in_files_and_md_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"two\nlines.md": "# Odd\n\nkumquat\n", "b.md": "# B\n\nx\n"}
    kb = str(_synced(tmp_path, monkeypatch, files))
    code, out, err = run("--kb", kb, "search", "kumquat", "--format", "files", "--channel", "bm25")
    assert code == 0, err
    assert out.splitlines() == ["two\\nlines.md"]
    code, out, err = run("--kb", kb, "search", "kumquat", "--format", "md", "--channel", "bm25")
    assert code == 0, err
    assert "## 1. two\\nlines.md" in out
