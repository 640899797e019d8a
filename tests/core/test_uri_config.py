"""pnk:// URIs and pinakes.toml validation (DESIGN §2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import set_config
from pinakes_core import KB, ConfigError, PnkUri, UriError, load_config, parse_uri
from pinakes_core.uri import is_ulid, new_ulid

DOC = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
KBID = "01JAXQ0000000000000000000Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"pnk://{DOC}", PnkUri(doc_id=DOC)),
        (f"pnk://{KBID}/{DOC}", PnkUri(doc_id=DOC, kb=KBID)),
        (f"pnk://{KBID.lower()}/{DOC.lower()}", PnkUri(doc_id=DOC, kb=KBID)),
        (f"pnk://my-notes/{DOC}", PnkUri(doc_id=DOC, kb="my-notes")),
        (f"pnk://my.notes_2/{DOC}#0", PnkUri(doc_id=DOC, kb="my.notes_2", chunk=0)),
        (f"pnk://{DOC}#12", PnkUri(doc_id=DOC, chunk=12)),
    ],
)
def test_parse_valid_uris(text: str, expected: PnkUri) -> None:
    parsed = parse_uri(text)
    assert parsed == expected
    assert parse_uri(str(parsed)) == parsed


@pytest.mark.parametrize(
    "text",
    [
        "",
        DOC,
        f"http://{DOC}",
        "pnk://",
        "pnk://not-a-ulid",
        f"pnk://{DOC[:-1]}",
        f"pnk://{DOC}X",
        "pnk://8ZZZZZZZZZZZZZZZZZZZZZZZZZ",  # over 128 bits
        f"pnk://a/b/{DOC}",
        f"pnk://{KBID}/{DOC}/",
        f"pnk://-bad/{DOC}",
        f"pnk://bad name/{DOC}",
        f"pnk://{DOC}#",
        f"pnk://{DOC}#x",
        f"pnk://{DOC}#-1",
        f"pnk://{KBID}/",
    ],
)
def test_parse_invalid_uris_raise_uri_error(text: str) -> None:
    with pytest.raises(UriError):
        parse_uri(text)


def test_new_ulid_is_canonical_and_unique() -> None:
    ids = {new_ulid() for _ in range(200)}
    assert len(ids) == 200
    assert all(is_ulid(i) for i in ids)
    assert not is_ulid(DOC.lower())


def test_init_writes_config_and_gitignore(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / ".gitignore").write_text("node_modules", encoding="utf-8")  # no trailing newline
    KB.init(root, name="my-notes")
    config = load_config(root)
    assert config.kb.name == "my-notes"
    assert is_ulid(config.kb.id)
    assert (root / ".gitignore").read_text(encoding="utf-8") == "node_modules\n.pinakes/\n"
    with pytest.raises(ConfigError):
        KB.init(root, name="again")


@pytest.mark.parametrize(
    ("folder", "name"), [("My Notes (2024)", "My-Notes-2024"), ("日本語メモ", "kb")]
)
def test_init_makes_a_valid_name_from_any_folder_name(
    tmp_path: Path, folder: str, name: str
) -> None:
    # `pnk init` in "~/My Notes" failed: "'My Notes' is not a valid KB name" (adopt and an
    # absent [kb] name already made the folder name valid).
    kb = KB.init(tmp_path / folder)
    assert kb.config.kb.name == name == load_config(tmp_path / folder).kb.name


def test_init_keeps_a_crlf_gitignore_crlf(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"build/\r\n*.log")
    KB.init(tmp_path, name="crlf")
    assert (tmp_path / ".gitignore").read_bytes() == b"build/\r\n*.log\r\n.pinakes/\r\n"


@pytest.mark.parametrize("kind", ["folder", "fifo", "dev-zero", "utf-16"])
def test_init_refuses_a_gitignore_it_cannot_read_before_writing_anything(
    tmp_path: Path, kind: str
) -> None:
    # A folder or UTF-16 file made init fail with a traceback after writing pinakes.toml (so
    # `pnk init` then said "already a KB"); a FIFO hung it; /dev/zero filled the memory.
    ignore = tmp_path / ".gitignore"
    if kind == "folder":
        ignore.mkdir()
    elif kind == "fifo":
        os.mkfifo(ignore)
    elif kind == "dev-zero":
        ignore.symlink_to("/dev/zero")
    else:
        ignore.write_bytes(".pinakes/\n".encode("utf-16"))
    with pytest.raises(ConfigError, match=r"adds '\.pinakes/' to \.gitignore, but .*\.gitignore"):
        KB.init(tmp_path, name="kb")
    assert not (tmp_path / "pinakes.toml").exists()


def test_init_rejects_a_bad_name_and_leaves_no_config(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        KB.init(tmp_path / "kb", name="bad name!")
    assert "bad name!" in str(info.value)
    assert not (tmp_path / "kb" / "pinakes.toml").exists()


def test_open_without_config_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        KB.open(tmp_path)
    assert "pinakes.toml" in str(info.value)


def test_open_finds_the_root_from_a_subfolder(kb_root: Path) -> None:
    with KB.open(kb_root / "notes") as kb:
        assert kb.root == kb_root.resolve()


def test_unknown_key_names_file_key_and_allowed_keys(kb_root: Path) -> None:
    set_config(kb_root, "sync", "chunk_size = 128")
    with pytest.raises(ConfigError) as info:
        KB.open(kb_root)
    message = str(info.value)
    assert str(kb_root / "pinakes.toml") in message
    assert "sync.chunk_size" in message
    for allowed in ("chunk_tokens", "include", "exclude", "max_file_mb", "gitignore"):
        assert allowed in message


def test_unknown_section_names_the_allowed_sections(kb_root: Path) -> None:
    set_config(kb_root, "sink", "x = 1")
    with pytest.raises(ConfigError) as info:
        load_config(kb_root)
    message = str(info.value)
    assert "pinakes.toml" in message and "'sink'" in message
    for allowed in ("kb", "sync", "embedding", "retrieval", "schema"):
        assert allowed in message


@pytest.mark.parametrize(
    ("section", "line", "key"),
    [
        ("sync", "chunk_tokens = 5", "sync.chunk_tokens"),
        ("sync", "max_file_mb = -1", "sync.max_file_mb"),
        # These two passed the check and failed every sync with a traceback (OverflowError
        # from int(inf), pathspec's GitIgnorePatternError).
        ("sync", "max_file_mb = inf", "sync.max_file_mb"),
        ("sync", 'exclude = ["drafts/", "a\\\\"]', "sync.exclude"),
        ("sync", 'gitignore = "sometimes"', "sync.gitignore"),
        ("retrieval", 'graph_channel = "sideways"', "retrieval.graph_channel"),
        ("retrieval", "k = 0", "retrieval.k"),
    ],
)
def test_bad_value_names_the_key(kb_root: Path, section: str, line: str, key: str) -> None:
    set_config(kb_root, section, line)
    with pytest.raises(ConfigError) as info:
        load_config(kb_root)
    assert key in str(info.value)
    assert "pinakes.toml" in str(info.value)


def test_bad_value_lists_allowed_values_for_a_choice(kb_root: Path) -> None:
    set_config(kb_root, "retrieval", 'graph_channel = "sideways"')
    with pytest.raises(ConfigError) as info:
        load_config(kb_root)
    for choice in ("off", "expand", "ppr"):
        assert choice in str(info.value)


def test_invalid_toml_is_a_config_error(kb_root: Path) -> None:
    (kb_root / "pinakes.toml").write_text("[kb\nname = ", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(kb_root)
    assert "pinakes.toml" in str(info.value)


def test_ids_are_made_without_importing_python_ulid_until_one_is_needed() -> None:
    # python-ulid imports importlib.metadata at its top (~40 ms); a search never makes an id,
    # so the modules that make them import it when they first do (issue 37).
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from pinakes_core.uri import is_ulid, new_ulid\n"
        "from pinakes_core.read.identity import derived_id\n"
        "assert 'ulid' not in sys.modules, 'imported at the top'\n"
        "made = new_ulid(), derived_id('01JAXR3T5W6Z8Q9N0P1R2S3T4V', 'path', 'a.md')\n"
        "assert all(is_ulid(x) for x in made), made\n"
        "assert derived_id('01JAXR3T5W6Z8Q9N0P1R2S3T4V', 'path', 'a.md') == made[1]\n"
        "assert 'ulid' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
