"""The bad-input corpus: every hostile folder of issue 12 and DESIGN §13, generated on demand.

Each case writes one kind of bad input into a fresh KB beside a control document, and may
point symlinks at an ``outside`` folder holding :data:`SECRET`: that string must never reach
the store or any output (an "escape"). :func:`exercise` runs everything a user or an agent
would run on such a folder: sync, searches, reading every document, status, doctor, and the
CLI's sync, search and doctor.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import sqlite3
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rel_helpers import BOMB

from conftest import FakeHashEmbedder, make_kb, set_config, write_files

SECRET = "OUTSIDE-SECRET-7f3a"
CONTROL = {"control.md": "# Control\n\nThe kumquat orchard control document.\n"}
ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
OTHER = "01ARZ3NDEKTSV4RRFFQ69G5FAW"

Builder = Callable[[Path, Path], None]


@dataclass(frozen=True)
class Case:
    """One kind of bad input: a name, what makes it, and whether it is slow to run."""

    name: str
    build: Builder
    slow: bool = False
    timeout: float = 120.0


def _b(path: Path) -> bytes:
    return os.fsencode(path)


def _write_bytes(path: bytes, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _tower(root: Path, depth: int) -> None:
    here = os.open(".", os.O_RDONLY)
    try:
        os.chdir(root)
        for _ in range(depth):
            os.mkdir("d")
            os.chdir("d")
        Path("deep.md").write_text("# Deep\n\nat the bottom\n")
    finally:
        os.fchdir(here)
        os.close(here)


def _files(files: dict[str, str | bytes]) -> Builder:
    return lambda root, outside: write_files(root, files)


def _sidecar(name: str, text: str | bytes, doc: str = "# Doc\n\nbody\n") -> Builder:
    def build(root: Path, outside: Path) -> None:
        write_files(root, {name: doc})
        side = root / (name + ".pnk.yaml")
        side.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))

    return build


def _symlink(name: str, target: Callable[[Path, Path], Path | str]) -> Builder:
    def build(root: Path, outside: Path) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target(root, outside))

    return build


def _many(*builders: Builder) -> Builder:
    def build(root: Path, outside: Path) -> None:
        for builder in builders:
            builder(root, outside)

    return build


def _fifo(name: str) -> Builder:
    def build(root: Path, outside: Path) -> None:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)  # `pnk init` wrote a .gitignore
        os.mkfifo(path)

    return build


def _raw_name(name: bytes, data: bytes = b"# Raw\n\nraw name\n") -> Builder:
    return lambda root, outside: _write_bytes(os.path.join(_b(root), name), data)


def _config(lines: str, then: Builder) -> Builder:
    def build(root: Path, outside: Path) -> None:
        set_config(root, "sync", lines)
        then(root, outside)

    return build


def _store_garbage(kind: str) -> Builder:
    def build(root: Path, outside: Path) -> None:
        store = root / ".pinakes"
        if kind == "file-instead-of-folder":
            store.write_text("not a folder\n")
            return
        store.mkdir(exist_ok=True)
        if kind == "corrupt-db":
            (store / "index.db").write_bytes(os.urandom(8192))
        elif kind == "dangling-pointer":
            (store / "index.db").symlink_to("index.41.db")
        elif kind == "garbage-lock":
            (store / "sync.lock").write_bytes(b"\x00\xff garbage {not json")

    return build


def _sidecar_link(name: str, target: str | None) -> Builder:
    """A document whose sidecar is a symlink to ``target`` (``None``: a file outside)."""

    def build(root: Path, outside: Path) -> None:
        write_files(root, {name: "# Doc\n\nbody\n"})
        (root / (name + ".pnk.yaml")).symlink_to(target or outside / "secret.yaml")

    return build


def _unreadable(root: Path, outside: Path) -> None:
    write_files(root, {"locked.md": "# Locked\n"})
    os.chmod(root / "locked.md", 0)


def _sidecar_folder(root: Path, outside: Path) -> None:
    write_files(root, {"dir.md": "# D\n"})
    (root / "dir.md.pnk.yaml").mkdir()


def _raw_folder(root: Path, outside: Path) -> None:
    folder = os.path.join(_b(root), b"d\xff")
    os.mkdir(folder)
    _write_bytes(os.path.join(folder, b"in.md"), b"# In\n")


_BLOB = base64.b64encode(random.Random(5).randbytes(150_000)).decode()

CASES: list[Case] = [
    # -- DESIGN §13's list ------------------------------------------------------------------
    Case("binary file (NUL bytes)", _files({"bin.md": b"# Bin\x00\x01\x02" * 100})),
    Case(
        "file over max_file_mb",
        _config("max_file_mb = 1", _files({"big.md": "# Big\n\n" + "word " * 300_000})),
    ),
    Case("unreadable file", _unreadable),
    Case("symlink to a file outside", _symlink("out.md", lambda r, o: o / "secret.md")),
    Case("symlink to a folder outside", _symlink("outdir", lambda r, o: o)),
    Case(
        "symlink loop",
        _many(
            _symlink("loop-a.md", lambda r, o: r / "loop-b.md"),
            _symlink("loop-b.md", lambda r, o: r / "loop-a.md"),
        ),
    ),
    Case("folder symlink to its parent", _symlink("sub/up", lambda r, o: "..")),
    Case("broken symlink", _symlink("gone.md", lambda r, o: r / "nowhere.md")),
    Case("invalid UTF-8 text", _files({"latin.md": b"# Caf\xe9\n\nna\xefve \xff\xfe text\n"})),
    Case("malformed sidecar", _sidecar("bad.md", "title: [unclosed\nid: : :\n")),
    Case(
        "copied sidecar (duplicate ULID)",
        _many(_sidecar("one.md", f"id: {ULID}\n"), _sidecar("two.md", f"id: {ULID}\n")),
    ),
    Case(
        "sidecar with bad values",
        _sidecar("vals.md", "id: 12345\ntitle: [a, list]\ntags: {a: 1}\n"),
    ),
    Case("malformed frontmatter", _files({"fm.md": "---\ntitle: [unclosed\n---\n# Body\n"})),
    # -- issue 12, item 1: resource exhaustion --------------------------------------------------
    Case("frontmatter alias bomb", _files({"bomb.md": f"---\n{BOMB}---\n# Bomb\n"})),
    Case("sidecar alias bomb", _sidecar("bomb.md", f"id: {ULID}\n{BOMB}")),
    Case(
        "frontmatter nested 10,000 deep",
        _files({"deep.md": "---\nx: " + "[" * 10_000 + "\n---\n# D\n"}),
    ),
    Case("sidecar nested 10,000 deep", _sidecar("deep.md", "x: " + "{a: " * 10_000)),
    Case("sidecar of 2 MB", _sidecar("huge.md", "tags:\n" + "  - tag\n" * 300_000)),
    Case(
        "sidecar with 200,000 list items",
        _sidecar("items.md", "tags: [" + "t, " * 200_000 + "t]\n"),
    ),
    Case("sidecar symlinked to /dev/zero", _sidecar_link("zero.md", "/dev/zero")),
    Case("sidecar symlinked to /dev/urandom", _sidecar_link("rand.md", "/dev/urandom")),
    Case(
        "sidecar that is a FIFO", _many(_files({"fifo.md": "# Fifo\n"}), _fifo("fifo.md.pnk.yaml"))
    ),
    Case("document that is a FIFO", _fifo("pipe.md")),
    Case(".gitignore that is a FIFO", _fifo(".gitignore")),
    Case(".gitignore symlinked to /dev/zero", _symlink("sub/.gitignore", lambda r, o: "/dev/zero")),
    Case("sidecar that is a folder", _sidecar_folder),
    Case("folder named like a document", lambda root, outside: (root / "folder.md").mkdir()),
    # -- item 2: sidecars leading outside -----------------------------------------------------
    Case("sidecar symlinked outside", _sidecar_link("leak.md", None)),
    # -- item 3: names and depth ------------------------------------------------------------------
    Case("file name not UTF-8", _raw_name(b"lat\xe9.md")),
    Case("folder name not UTF-8", _raw_folder),
    Case("folders nested 1,100 deep", lambda root, outside: _tower(root, 1_100), slow=True),
    Case("folders nested 200 deep", lambda root, outside: _tower(root, 200)),
    Case("file name with a newline and markup", _files({"a\nb [bold red]x[/].md": "# Odd\n"})),
    Case("file name with bidi and zero-width marks", _files({"\u202etxt.md\u200b.md": "# Bidi\n"})),
    Case("file name of 250 bytes", _files({"n" * 247 + ".md": "# Long name\n"})),
    # -- item 4: unsplittable text -----------------------------------------------------------------
    Case("300 KB without spaces", _files({"nospace.md": "# No space\n\n" + "a" * 300_000})),
    Case(
        "5 MB without spaces",
        _config("max_file_mb = 6", _files({"nospace.md": "a" * 5_000_000})),
        slow=True,
    ),
    Case("base64 blob of 200 KB", _files({"blob.md": f"# Blob\n\n{_BLOB}\n"})),
    Case(
        "2 MB data: URI image",
        _files({"img.md": "# Img\n\n![x](data:image/png;base64," + _BLOB * 10 + ")\n"}),
    ),
    Case("heading of 100 KB", _files({"head.md": "# " + "heading " * 12_500 + "\n\nbody\n"})),
    Case("sidecar title of 100 KB", _sidecar("title.md", "title: " + "t" * 100_000 + "\n")),
    Case(
        "frontmatter with 10,000 tags",
        _files(
            {
                "tags.md": "---\ntags: ["
                + ", ".join(f"t{i}" for i in range(10_000))
                + "]\n---\n# T\n"
            }
        ),
    ),
    Case(
        "20,000 Markdown links",
        _files({"links.md": "# L\n\n" + " ".join(f"[x{i}](n{i}.md)" for i in range(20_000))}),
    ),
    Case("wikilink of 1 MB", _files({"wiki.md": "# W\n\n[[" + "w" * 1_000_000 + "]]\n"})),
    Case("10,000 nested blockquotes", _files({"quote.md": ">" * 10_000 + " deep\n"})),
    Case(
        "5,000 nested lists",
        _files({"lists.md": "".join("  " * i + "- item\n" for i in range(5_000))}),
    ),
    Case("100,000 emphasis markers", _files({"stars.md": "# S\n\n" + "*a " * 100_000})),
    Case(
        "unclosed fence and comment",
        _files({"open.md": "# O\n\n```\n" + "code\n" * 20_000 + "<!-- " + "c " * 50_000}),
    ),
    Case(
        "table of 5,000 columns",
        _files(
            {"table.md": "|" + "c|" * 5_000 + "\n|" + "-|" * 5_000 + "\n|" + "v|" * 5_000 + "\n"}
        ),
    ),
    # -- line ends, encodings, odd documents ----------------------------------------------------
    Case(
        "CRLF and CR-only line ends",
        _files({"crlf.md": "# CRLF\r\n\r\ntext\r\n", "cr.md": "# CR\r\rtext\r"}),
    ),
    Case(
        "BOM document and BOM sidecar",
        _many(
            _files({"bom.md": "\ufeff# BOM\n\ntext\n"}), _sidecar("bom2.md", f"\ufeffid: {ULID}\n")
        ),
    ),
    Case(
        "empty and blank files",
        _files(
            {
                "empty.md": "",
                "blank.md": "  \n\t\n",
                "fmonly.md": "---\ntitle: T\n---\n",
                "unterminated.md": "---\ntitle: T\n# Body\n",
            }
        ),
    ),
    Case(
        "control characters and ANSI escapes",
        _files(
            {
                "ansi.md": "# \x1b[31mRed\x1b[0m [bold]markup[/bold]\n\n\x07bell \x1b]0;title\x07 text\n"
            }
        ),
    ),
    Case(
        "lone surrogates as text",
        _files({"sur.md": b"# S\n\n" + "\ud800 text".encode("utf-8", "surrogatepass")}),
    ),
    # -- found by probing a new user's folders (probe session) ------------------------------------
    Case(
        "YAML values Python cannot build",
        _many(
            _files({"date.md": "---\ndate: 2024-02-30\nok: !!bool maybe\n---\n# Date\n"}),
            _sidecar("side.md", "updated: 2024-13-45\ncount: !!int many\n"),
        ),
    ),
    Case("YAML alias inside itself", _files({"loop.md": "---\nx: &a [1, *a]\n---\n# Loop\n"})),
    Case(
        ".gitignore line git cannot read",
        _files({"sub/.gitignore": "build\\\n", "sub/s.md": "# S\n"}),
    ),
    Case(
        "nested lists and UTF-16 notes",
        _files({"n.md": "---\ntitle: [[My Note]]\n---\nx\n", "w.md": "# W\n".encode("utf-16")}),
    ),
    # -- item 5: crash leftovers and store damage -------------------------------------------------
    Case(
        "sidecar temp files left by a crash",
        _files({".x.md.pnk.yaml.ab12cd34.tmp": "id: x\n", "x.md": "# X\n"}),
    ),
    Case("garbage sync lock", _store_garbage("garbage-lock")),
    Case("corrupt store file", _store_garbage("corrupt-db")),
    Case("store pointer to a missing generation", _store_garbage("dangling-pointer")),
    Case(".pinakes is a file", _store_garbage("file-instead-of-folder")),
]


def make_case(case: Case, base: Path) -> tuple[Path, Path]:
    """Create the case's KB (and its outside folder) under ``base``; returns (root, outside)."""
    outside = base / "outside"
    outside.mkdir(parents=True)
    (outside / "secret.md").write_text(f"# {SECRET}\n\n{SECRET} text\n")
    (outside / "secret.yaml").write_text(
        f"id: {OTHER}\ntitle: {SECRET}\ntags: [{SECRET.lower()}]\naliases: [{SECRET}]\n"
    )
    root = make_kb(base / "kb", dict(CONTROL), name="corpus")
    case.build(root, outside)
    return root, outside


def walk_files(root: Path) -> dict[bytes, str]:
    """Fingerprint every entry under ``root`` except ``.pinakes/``, iteratively, no symlinks followed."""
    found: dict[bytes, str] = {}
    stack = [_b(root)]
    while stack:
        folder = stack.pop()
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, _b(root))
            if rel == b".pinakes":
                continue
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                stack.append(path)
                found[rel] = "dir"
            elif stat.S_ISLNK(st.st_mode):
                found[rel] = "link:" + os.fsdecode(os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                try:
                    with open(path, "rb") as handle:
                        found[rel] = hashlib.blake2b(handle.read(), digest_size=16).hexdigest()
                except OSError:
                    found[rel] = "unreadable"
            else:
                found[rel] = f"special:{stat.S_IFMT(st.st_mode)}"
    return found


def changed_bytes(before: dict[bytes, str], after: dict[bytes, str]) -> list[str]:
    """User entries that changed or went, and new entries that are not sidecar skeletons."""
    problems = []
    for rel, fingerprint in before.items():
        temp = rel.rsplit(b"/", 1)[-1].startswith(b".") and rel.endswith(b".tmp")
        if after.get(rel) != fingerprint and not temp:  # a crash's temp file may be removed
            problems.append(f"changed: {rel!r}")
    problems += [
        f"new: {rel!r}" for rel in after.keys() - before.keys() if not rel.endswith(b".pnk.yaml")
    ]
    return problems


def exercise(root: Path) -> dict[str, Any]:
    """Everything a user or an agent does with the KB; returns what it saw (run in a child)."""
    from click.testing import CliRunner

    import pinakes_core.kb
    from pinakes_cli.main import cli
    from pinakes_core import KB, PinakesError

    seen: dict[str, Any] = {"errors": [], "outputs": []}

    def attempt(what: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except PinakesError as exc:  # a clean, deliberate refusal
            seen["errors"].append(f"{what}: {exc}")
            return None
        seen["outputs"].append(json.dumps(_plain(result), default=str, ensure_ascii=False))
        return result

    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        report = attempt("sync", kb.sync)
        if report is not None:
            seen["skipped"] = [(s.path, s.reason) for s in report.skipped]
            seen["warnings"] = report.warnings
        hits = attempt("search", lambda: kb.search("kumquat orchard control", k=5))
        seen["control_found"] = bool(hits and any(h.path == "control.md" for h in hits.hits))
        attempt("search all", lambda: kb.search("doc text body heading link", k=50))
        attempt("search secret", lambda: kb.search("outside secret 7f3a", k=5))
        if kb.synced:
            paths = [r[0] for r in kb.store().conn.execute("SELECT path FROM documents")]
            for path in paths:
                attempt(f"read {path!r}", lambda path=path: kb.read(path))
                attempt(f"links {path!r}", lambda path=path: kb.links(path))
        attempt("status", kb.status)
        attempt("doctor", kb.doctor)
    # The CLI, as a user types it (its embedder replaced by the fake, in this child only).
    pinakes_core.kb.load_embedder = lambda config: FakeHashEmbedder()  # type: ignore[assignment]
    runner = CliRunner()
    for args in (["sync"], ["search", "kumquat orchard"], ["doctor"], ["status", "--json"]):
        result = runner.invoke(cli, ["--kb", str(root), *args], catch_exceptions=True)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        seen["outputs"].append(result.output)
    seen["store_text"] = store_text(root)
    return seen


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def store_text(root: Path) -> str:
    """Everything textual in the store (to look for escaped outside content)."""
    pointer = root / ".pinakes" / "index.db"
    if not pointer.exists():
        return ""
    conn = sqlite3.connect(pointer)
    try:
        parts = [
            " ".join(str(v) for v in row)
            for sql in (
                "SELECT title, tags, aliases, path FROM documents",
                "SELECT text, heading_path FROM chunks",
                "SELECT target FROM links",
                "SELECT label FROM nodes WHERE label IS NOT NULL",
            )
            for row in conn.execute(sql)
        ]
    except sqlite3.DatabaseError:
        return ""
    finally:
        conn.close()
    return "\n".join(parts)
