"""Fill a small file system during a sync (a child of test_issue34_errors.py).

Usage: disk_full_child.py MOUNT. ``MOUNT`` is an empty tmpfs of a few MB, mounted by the
caller in its own mount namespace (``unshare -rm``), so the disk really fills: no fault is
injected. The KB is made there, synced, then given more notes than the space left can index,
and synced again through the real ``pnk`` (``fake_pnk.py``: only the embedder is a fake).
Prints one JSON object: each command's exit status and output, the user files that changed
and those that are new (sidecar skeletons, which a sync writes), and the store's integrity
check.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SKELETON = re.compile(rb"id: [0-9A-HJKMNP-TV-Z]{26}\n")


def pnk(root: Path, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(HERE / "fake_pnk.py"), "--kb", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}


def user_files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".pinakes" not in p.parts
    }


def main() -> None:
    root = Path(sys.argv[1]) / "kb"
    root.mkdir()
    init = pnk(root, "init")
    assert init["rc"] == 0, init
    for i in range(20):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nalpha words of note {i}\n")
    first = pnk(root, "sync", "--json")
    rng = random.Random(34)
    for i in range(400):  # ~1 MB of notes: the index of them does not fit in what is left
        words = " ".join(f"w{rng.randrange(10**9)}" for _ in range(250))
        try:
            (root / f"big{i:03d}.md").write_text(f"# Big {i}\n\n{words}\n")
        except OSError:
            break
    before = user_files(root)
    full = pnk(root, "sync", "--json")
    after = user_files(root)
    search = pnk(root, "search", "alpha words", "--format", "json")
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    conn.close()
    print(
        json.dumps(
            {
                "first": first,
                "full": full,
                "search": search,
                "changed": sorted(k for k in before if after.get(k) != before[k]),
                "new": sorted(set(after) - set(before)),
                "partial_sidecars": [
                    p
                    for p in sorted(set(after) - set(before))
                    if not SKELETON.fullmatch((root / p).read_bytes())
                ],
                "integrity": integrity,
            }
        )
    )


if __name__ == "__main__":
    main()
