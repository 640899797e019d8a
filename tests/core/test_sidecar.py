"""Sidecars are the user's files: round-trip writes, atomicity, validation (DESIGN §2, §13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes_core import SidecarError
from pinakes_core.read.sidecar import (
    append_link,
    read_sidecar,
    sidecar_path,
    write_sidecar,
    write_skeleton,
)

ORIGINAL = (
    "# top comment: this is my sidecar\n"
    "id: 01ARZ3NDEKTSV4RRFFQ69G5FAV   # the id, do not touch\n"
    "\n"
    "# tags below\n"
    "tags: [a, b]  # inline comment\n"
    'title: "Quoted Title"\n'
    "links:\n"
    "- to: pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW\n"
    "  rel: Depends On\n"
    "extra: {k: v}   # flow mapping\n"
)
# The same content in the common "indented sequence" style (as DESIGN §2 shows links).
INDENTED = ORIGINAL.replace(
    "- to: pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW\n  rel: Depends On\n",
    "  - to: pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW  # a link\n    rel: Depends On\n",
)


def test_write_sidecar_keeps_comments_and_other_lines_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "a.md.pnk.yaml"
    path.write_text(ORIGINAL, encoding="utf-8")
    text = write_sidecar(path, {"tags": ["x", "y"]})
    assert path.read_text(encoding="utf-8") == text

    def untouched(lines: list[str]) -> list[str]:
        return [ln for ln in lines if not ln.startswith("tags:") and ln not in ("- x", "- y")]

    assert untouched(text.splitlines()) == untouched(ORIGINAL.splitlines())
    assert "# inline comment" in text
    side = read_sidecar(path)
    assert side.tags == ("x", "y")
    assert side.id == "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    assert side.title == "Quoted Title"
    assert [(link.to, link.rel) for link in side.links] == [
        ("pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW", "depends-on")
    ]
    assert not [p for p in tmp_path.iterdir() if p.name != path.name]  # no temp file left


def test_write_sidecar_adds_a_new_key_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "a.md.pnk.yaml"
    path.write_text(ORIGINAL, encoding="utf-8")
    text = write_sidecar(path, {"aliases": ["alpha"]})
    assert text.startswith(ORIGINAL)
    assert read_sidecar(path).aliases == ("alpha",)


def test_write_sidecar_keeps_indented_sequences(tmp_path: Path) -> None:
    path = tmp_path / "a.md.pnk.yaml"
    path.write_text(INDENTED, encoding="utf-8")
    text = write_sidecar(path, {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
    assert text == INDENTED


def test_write_sidecar_never_overwrites_a_malformed_sidecar(tmp_path: Path) -> None:
    path = tmp_path / "a.md.pnk.yaml"
    bad = "# mine\ntitle: Fine\ntitle2: : :\n"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(SidecarError) as info:
        write_sidecar(path, {"tags": ["x"]})
    assert "a.md.pnk.yaml" in str(info.value)
    assert "line 3" in str(info.value)
    assert path.read_text(encoding="utf-8") == bad


@pytest.mark.parametrize("note", ["2024-13-45", "!!int many", "!!bool maybe", "0x_"])
def test_a_link_note_yaml_cannot_build_is_written_quoted(tmp_path: Path, note: str) -> None:
    # `pnk link --note 2024-13-45` failed with ValueError from datetime.date while quoting.
    path = tmp_path / "a.md.pnk.yaml"
    path.write_text("id: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n", encoding="utf-8")
    entry = {"to": "pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW", "rel": "cites", "note": note}
    append_link(path, entry)
    assert read_sidecar(path).links[0].extra == {"note": note}


def test_a_quoted_link_note_stays_readable(tmp_path: Path) -> None:
    # Every double-quoted value was written as \u escapes ("\u0073\u0065\u0065..."): the
    # printable-character class ended early at a literal "]".
    path = tmp_path / "a.md.pnk.yaml"
    path.write_text("id: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n", encoding="utf-8")
    note = 'see: [paxos] "café" \\ 2024-13-45\tdone \x1b\u2028'
    entry = {"to": "pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW", "rel": "cites", "note": note}
    _, after = append_link(path, entry)
    assert 'note: "see: [paxos] \\"café\\" \\\\ 2024-13-45\tdone \\u001b\\u2028"\n' in after
    assert read_sidecar(path).links[0].extra == {"note": note}


def test_write_skeleton_never_touches_an_existing_file(tmp_path: Path) -> None:
    path = sidecar_path(tmp_path / "a.md")
    assert path.name == "a.md.pnk.yaml"
    write_skeleton(path, "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert path.read_text(encoding="utf-8") == "id: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n"
    with pytest.raises(FileExistsError):
        write_skeleton(path, "01ARZ3NDEKTSV4RRFFQ69G5FAW")
    assert path.read_text(encoding="utf-8") == "id: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n"


def test_sidecar_paths_of_md_and_txt_never_clash(tmp_path: Path) -> None:
    assert sidecar_path(tmp_path / "a.md") != sidecar_path(tmp_path / "a.txt")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("- just\n- a list\n", "mapping"),
        ("id: 12345\n", "'id'"),
        ("title: [not, a, string]\n", "'title'"),
        ("tags: {a: 1}\n", "'tags'"),
        ("links: nope\n", "'links'"),
        ("links:\n  - rel: cites\n", "links[0]"),
    ],
)
def test_read_sidecar_rejects_bad_values_naming_the_key(
    tmp_path: Path, text: str, needle: str
) -> None:
    path = tmp_path / "d.md.pnk.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SidecarError) as info:
        read_sidecar(path)
    assert needle in str(info.value)
    assert "d.md.pnk.yaml" in str(info.value)


def test_read_sidecar_accepts_empty_and_comma_string_tags(tmp_path: Path) -> None:
    path = tmp_path / "d.md.pnk.yaml"
    path.write_text("# only a comment\n", encoding="utf-8")
    assert read_sidecar(path).id is None
    path.write_text("tags: alpha, beta\n", encoding="utf-8")
    assert read_sidecar(path).tags == ("alpha", "beta")
