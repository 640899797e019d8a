"""A ``pnk`` process freezes what opening its first KB made; a ``CliRunner`` never does (issue 37).

Each case runs :func:`pinakes_cli.root.open_kb` in a fresh interpreter, since a freeze is for the
life of the process: done in the test process, it would keep every earlier test's garbage.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import make_kb

_PROBE = textwrap.dedent(
    """
    import gc, json, sys

    import click

    from pinakes_cli.root import SETTLE, cli, open_kb

    obj = {"kb": sys.argv[1]}
    if sys.argv[2] == "process":
        obj[SETTLE] = True
    frozen_before = gc.get_freeze_count()
    with click.Context(cli, obj=obj) as ctx:
        open_kb(ctx)
        frozen_after = gc.get_freeze_count()
        enabled_after = gc.isenabled()
        second = open_kb(ctx)  # only the first KB settles
        frozen_second = gc.get_freeze_count()
    print(json.dumps({
        "frozen_before": frozen_before,
        "frozen_after": frozen_after,
        "frozen_second": frozen_second,
        "enabled_after": enabled_after,
        "asked_left": SETTLE in obj,
        "engine_loaded": "pinakes_core.kb" in sys.modules,
    }))
    """
)


def _probe(root: Path, mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(root), mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("mode", ["process", "runner"])
def test_only_a_pnk_process_freezes_what_the_first_open_made(tmp_path: Path, mode: str) -> None:
    report = _probe(make_kb(tmp_path / "kb"), mode)
    assert report["engine_loaded"] is True
    assert report["enabled_after"] is True  # the rest of the command collects as before
    assert report["asked_left"] is False
    assert report["frozen_before"] == 0
    if mode == "process":
        # The engine's modules, classes and config: tens of thousands of objects.
        assert isinstance(report["frozen_after"], int) and report["frozen_after"] > 10_000
        assert report["frozen_second"] == report["frozen_after"]
    else:
        assert report["frozen_after"] == report["frozen_second"] == 0


def test_the_front_door_loads_the_cli_with_the_collector_paused_then_resumes_it() -> None:
    probe = textwrap.dedent(
        """
        import gc, json, sys

        during_import = []

        def loading_cli(phase, info):
            module = sys.modules.get("pinakes_cli.main")
            if phase == "start" and module is not None and not hasattr(module, "main"):
                during_import.append(info["generation"])

        gc.callbacks.append(loading_cli)
        sys.argv = ["pnk", "no-such-command"]
        from pinakes_cli.door import main

        try:
            main()
        except SystemExit as exc:
            code = exc.code
        print(json.dumps({"code": code, "enabled": gc.isenabled(),
                          "collections_while_loading": len(during_import),
                          "cli_loaded": "pinakes_cli.main" in sys.modules}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 2 and report["cli_loaded"] is True  # click's usage error
    assert report["collections_while_loading"] == 0  # 20-30 before (gen 0 and 1)
    assert report["enabled"] is True
