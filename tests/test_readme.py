"""The README's quickstart (issue 35): its first command installs only what it runs, and the
fast test subset is named beside the full suite, as the Makefile defines both."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quickstart() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None, "the quickstart has a sh block"
    return [shlex.split(line) for line in block[1].splitlines() if line.strip()]


def _make_target(name: str) -> list[str]:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    body = re.search(rf"^{name}:\n\t(.+)$", makefile, re.MULTILINE)
    assert body is not None, f"the Makefile has a {name} target"
    return shlex.split(body[1])


def test_the_first_command_installs_only_the_cli_and_what_it_needs() -> None:
    first, second = _quickstart()
    # `uv run pnk …` installed the whole workspace: 175 packages, spaCy, litellm and linters.
    assert first[:4] == ["uv", "run", "--package", "pinakes-cli"]
    assert first[4:6] == ["pnk", "search"] and "examples/distsys-notes" in first
    # The second command is the fast subset the Makefile names; the full suite is named too.
    assert second == _make_target("test-fast")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`uv run pytest`" in readme and _make_target("test") == ["uv", "run", "pytest"]


def test_ci_still_installs_everything_and_runs_the_full_suite() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "uv sync --frozen --all-packages" in ci
    assert re.search(r"^uv run pytest$", ci, re.MULTILINE)
