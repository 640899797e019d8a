"""``python -m pinakes_cli``: the same as ``pnk`` (git hooks call it by the interpreter's path)."""

from pinakes_cli.door import main

main()
