"""`pinakes-mcp` and `pnk mcp` startup: arguments and errors before any protocol starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import make_kb
from pinakes_mcp.command import mcp
from pinakes_mcp.launch import _parser, main
from pinakes_mcp.trust import is_loopback as _is_loopback


def test_defaults_are_stdio_and_loopback() -> None:
    args = _parser().parse_args(["--kb", "a", "--kb", "b"])
    assert args.kbs == [Path("a"), Path("b")]
    assert (args.transport, args.host, args.watch) == ("stdio", "127.0.0.1", True)
    assert args.allow_write is False
    assert _parser().parse_args(["--kb", "a", "--no-watch"]).watch is False
    assert _is_loopback(args.host) and _is_loopback("localhost") and _is_loopback("::1")
    assert not _is_loopback("0.0.0.0")


def test_kb_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "--kb" in capsys.readouterr().err


def test_duplicate_kb_names_stop_the_server_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_kb(tmp_path / "one" / "notes", name="notes")
    second = make_kb(tmp_path / "two" / "notes", name="notes")
    with pytest.raises(SystemExit) as exit_info:
        main(["--kb", str(first), "--kb", str(second)])
    assert exit_info.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "Two KBs have the same name 'notes'" in err
    assert "unique [kb] name" in err


def test_a_folder_that_is_no_kb_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--kb", str(tmp_path)])
    assert exit_info.value.code == 1
    assert "No pinakes.toml" in capsys.readouterr().err


def test_pnk_mcp_reports_startup_errors(tmp_path: Path) -> None:
    first = make_kb(tmp_path / "a", name="same")
    second = make_kb(tmp_path / "b", name="same")
    result = CliRunner().invoke(mcp, ["--kb", str(first), "--kb", str(second)], obj={})
    assert result.exit_code == 1
    assert "Two KBs have the same name 'same'" in str(result.exception)


def test_version_prints_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    # `pinakes-mcp --version` was an unknown argument (exit 2), though `pnk --version` works.
    from pinakes_mcp import __version__

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"pinakes-mcp {__version__}"
