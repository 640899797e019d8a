"""Every case of the bad-input corpus, under the memory watchdog (issue 12, DESIGN §13).

Each case's KB is synced, searched, read, linked, checked (status, doctor) and driven through
the CLI, in a forked child with a 1.5 GB ceiling and a time limit. Nothing may hang, blow up,
escape a traceback, leak what lies outside the KB, or change a byte the user wrote; the
control document must still be found.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from rel_corpus import CASES, SECRET, Case, changed_bytes, exercise, make_case, walk_files
from rel_helpers import remove_tree
from rel_ledger import record
from rel_watchdog import run_guarded


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in CASES],
)
def test_bad_input_is_survived(case: Case, tmp_path: Path) -> None:
    root, outside = make_case(case, tmp_path)
    try:
        before, outside_before = walk_files(root), walk_files(outside)
        outcome = run_guarded(lambda: exercise(root), timeout=case.timeout)
        seen = outcome.value or {}
        leaked = [o for o in [*seen.get("outputs", []), seen.get("store_text", "")] if SECRET in o]
        changed = changed_bytes(before, walk_files(root)) + changed_bytes(
            outside_before, walk_files(outside)
        )
        record(
            "bad-input corpus" + (" (slow cases)" if case.slow else ""),
            peak_rss=outcome.peak_rss,
            tried=1,
            hangs=int(outcome.hung),
            over_memory=int(outcome.over_memory),
            foreign_exceptions=int(outcome.foreign),
            escapes=int(bool(leaked)),
            changed_bytes=len(changed),
        )
        assert not outcome.hung, f"hung: killed after {case.timeout:.0f} s"
        assert not outcome.over_memory, f"peak RSS {outcome.peak_rss / 2**20:.0f} MB"
        assert outcome.error_type is None, outcome.error
        assert not leaked, leaked[0][:500]
        assert not changed, changed
        if case.name != ".pinakes is a file":  # then nothing can be indexed, and it says why
            assert seen["control_found"], seen.get("errors")
    finally:
        remove_tree(root)
