"""`pnk init --template`, `pnk templates`, `pnk upgrade`, `pnk schema review`, `pnk link` notes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pinakes_cli.main import cli
from pinakes_core import load_config
from pinakes_core.paid.suggestions import read_suggestions, record_schema_suggestion


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), obj={}, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and ".pinakes" not in p.parts}


def test_templates_lists_the_three(tmp_path: Path) -> None:
    code, out, _ = run("templates", "--json")
    assert code == 0
    assert [t["name"] for t in json.loads(out)] == [
        "general",
        "research-papers",
        "engineering-docs",
    ]
    code, out, _ = run("templates")
    assert code == 0 and "research-papers" in out and "9 entity, 10 relation" in out


def test_init_with_a_template_reports_what_it_wrote(tmp_path: Path) -> None:
    code, out, err = run("init", str(tmp_path / "kb"), "--template", "general", "--name", "mine")
    assert code == 0, err
    assert "from template general 1.0" in out and "+ notes/writing-notes.md" in out
    assert load_config(tmp_path / "kb").kb.template == "general"
    code, out, _ = run("init", str(tmp_path / "kb2"), "--template", "engineering-docs", "--json")
    report = json.loads(out)
    assert report["template"] == "engineering-docs" and "adr/template.md" in report["written"]
    code, _, err = run("init", str(tmp_path / "kb3"), "--template", "nope")
    assert code == 1 and "No template named 'nope'" in err and "Traceback" not in err


def _local_template(folder: Path, version: str, readme: str, k: int) -> Path:
    (folder / "files").mkdir(parents=True, exist_ok=True)
    (folder / "template.toml").write_text(f'name = "mini"\nversion = "{version}"\n')
    (folder / "pinakes.toml").write_text(f"[retrieval]\nk = {k}\n")
    (folder / "files" / "README.md").write_text(readme)
    return folder


def test_upgrade_asks_refuses_without_a_terminal_and_applies_with_yes(tmp_path: Path) -> None:
    template = _local_template(tmp_path / "t", "1", "# Readme one\n", 5)
    kb = tmp_path / "kb"
    assert run("init", str(kb), "--template", str(template))[0] == 0
    _local_template(template, "2", "# Readme two\n", 9)
    before = _files(kb)
    # No terminal and no --yes: the plan is shown, nothing is written, exit 1.
    code, out, err = run("upgrade", "--kb", str(kb))
    assert code == 1 and "needs confirmation" in err
    assert "+k = 9" in out and "+# Readme two" in out
    assert _files(kb) == before
    code, out, _ = run("upgrade", "--kb", str(kb), "--dry-run")
    assert code == 0 and _files(kb) == before
    code, out, _ = run("upgrade", "--kb", str(kb), "--json")
    plan = json.loads(out)
    assert code == 0 and plan["applied"] is False and plan["to_version"] == "2"
    assert _files(kb) == before
    code, out, err = run("upgrade", "--kb", str(kb), "--yes")
    assert code == 0, err
    assert "Upgraded to mini 2" in out
    assert (kb / "README.md").read_text() == "# Readme two\n"
    assert load_config(kb).retrieval.k == 9
    code, out, _ = run("upgrade", "--kb", str(kb))
    assert code == 0 and "Up to date" in out


@pytest.mark.model
def test_link_says_how_the_relation_matched_and_review_promotes_on_yes(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    assert run("init", str(kb), "--template", "engineering-docs")[0] == 0
    (kb / "services").mkdir(exist_ok=True)
    for name in ("checkout", "payments", "ledger"):
        (kb / "services" / f"{name}.md").write_text(f"# {name.title()}\n\nThe {name} service.\n")
    assert run("sync", "--kb", str(kb))[0] == 0
    code, out, err = run(
        "link", "services/checkout.md", "services/payments.md", "--rel", "calls", "--kb", str(kb)
    )
    assert code == 0, err
    assert "rel: depends-on" in out and "matched the schema relation depends-on" in err
    code, out, err = run(
        "link", "services/checkout.md", "services/ledger.md", "--rel", "mentors", "--kb", str(kb)
    )
    assert code == 0 and "rel: mentors" in out and "schema review" in err
    assert [s.name for s in read_suggestions(kb)[0]] == ["mentors"]
    for i in range(5):
        record_schema_suggestion(kb, "relation", "mentors", source=f"d{i % 3}.md", run=f"r{i}")
    before = (kb / "pinakes.toml").read_text()
    code, out, err = run("schema", "review", "--kb", str(kb))
    assert code == 1 and "needs confirmation" in err and "proposal: relation mentors" in out
    assert (kb / "pinakes.toml").read_text() == before
    code, out, err = run("schema", "review", "--kb", str(kb), "--yes")
    assert code == 0, err
    assert "Promoted: mentors" in out and "+[schema.relation_types.mentors]" in out
    text = (kb / "pinakes.toml").read_text()
    assert "# From the `engineering-docs` template" in text
    assert "mentors" in load_config(kb).schema_.relation_types
    code, out, _ = run("schema", "review", "--kb", str(kb), "--json")
    review = json.loads(out)
    assert code == 0 and review["proposals"] == [] and review["applied"] == []
