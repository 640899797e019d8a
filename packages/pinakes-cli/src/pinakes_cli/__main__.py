"""``python -m pinakes_cli``: the same as ``pnk`` (git hooks call it by the interpreter's path)."""

from pinakes_cli.main import main

main()
