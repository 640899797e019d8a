"""Hypothesis fuzzing of every parser that reads user or caller text (issue 12).

The query builder, search arguments and filters, frontmatter, sidecars (reading and the
minimal-edit writer), ``pnk://`` URIs, the chunker, and the MCP server's Host/Origin and stdin
filters: each either returns a well-formed result or raises its own ``PinakesError``.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import re
import sqlite3
import string
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rel_ledger import record, scale
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB, PinakesError, SidecarError, UriError
from pinakes_core.index.chunking import chunk_document
from pinakes_core.index.query import build_fts_query, query_terms
from pinakes_core.index.tokens import token_counter
from pinakes_core.intake import YamlLimitError, _scan_events, _surely_within, check_yaml
from pinakes_core.read.frontmatter import parse_frontmatter
from pinakes_core.read.sidecar import append_link, read_sidecar, write_sidecar
from pinakes_core.search.arguments import clean_path, clean_query, clean_time
from pinakes_core.search.context import Filters
from pinakes_core.uri import PnkUri, parse_uri
from pinakes_mcp.trust import TrustMiddleware, fix_surrogate_escapes

FUZZ = settings(
    max_examples=scale(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Text with everything hostile in it: surrogates, controls, NUL, FTS syntax, emoji.
HOSTILE = st.lists(
    st.one_of(
        st.characters(codec=None),  # every code point, lone surrogates included
        st.sampled_from(
            [*"\"*^-:()[]{}<>|\\/.,;#!?~`'", "NEAR(", " AND ", " OR ", " NOT ", "\x00"]
        ),
        st.sampled_from(["raft", "leader", "E-4012", "élection", "🦀"]),
    ),
    max_size=60,
).map("".join)
ULIDS = st.text(alphabet="0123456789ABCDEFGHJKMNPQRSTVWXYZ", min_size=25, max_size=25).map(
    lambda s: "0" + s
)


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KB]:
    root = make_kb(tmp_path_factory.mktemp("fuzz") / "kb")
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        yield kb


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    conn.execute("INSERT INTO t(text) VALUES ('raft leader election'), ('E-4012 roll back')")
    yield conn
    conn.close()


# -- queries ----------------------------------------------------------------------------------


@FUZZ
@given(text=HOSTILE)
def test_fts_query_is_always_valid_fts(fts: sqlite3.Connection, text: str) -> None:
    query_terms(text)
    match = build_fts_query(text)
    if match is not None:
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()
    record("fuzz: FTS query builder", tried=1)


SEARCH_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "k": st.one_of(st.none(), st.integers(-(2**64), 2**64), st.booleans(), st.text(max_size=3)),
        "tags": st.one_of(
            st.none(), st.text(max_size=20), st.lists(st.one_of(HOSTILE, st.integers()), max_size=4)
        ),
        "path": st.one_of(
            st.none(), HOSTILE, st.sampled_from(["..", "/", "./", "../x", "~", "C:\\", "notes/"])
        ),
        "doc_ids": st.one_of(st.none(), st.lists(st.one_of(ULIDS, HOSTILE), max_size=3)),
        "modified_after": st.one_of(
            st.none(),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(-(2**70), 2**70),
            st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
        ),
        "modified_before": st.one_of(
            st.none(), st.floats(), st.datetimes(min_value=datetime(1, 1, 2))
        ),
        "entities": st.one_of(st.none(), st.lists(HOSTILE, max_size=3), st.text(max_size=5)),
        "concepts": st.one_of(st.none(), st.lists(HOSTILE, max_size=2)),
        "channels": st.one_of(
            st.none(),
            st.lists(st.sampled_from(["bm25", "dense", "entities", "concepts"]), max_size=3),
        ),
    },
)


@FUZZ
@given(query=HOSTILE, args=SEARCH_ARGS)
def test_search_answers_or_refuses_in_one_sentence(
    synced: KB, query: str, args: dict[str, Any]
) -> None:
    try:
        result = synced.search(query, **args)
    except PinakesError as exc:
        assert "\n" not in exc.message
    else:
        json.dumps(result.model_dump())  # every string in it encodes
        assert len(result.hits) <= (args.get("k") or synced.config.retrieval.k)
    record("fuzz: KB.search arguments", tried=1)


@FUZZ
@given(
    path=st.one_of(st.none(), HOSTILE),
    after=st.one_of(st.none(), st.floats()),
    tags=st.lists(HOSTILE, max_size=3),
)
def test_filters_build_valid_sql(
    synced: KB, path: str | None, after: float | None, tags: list[str]
) -> None:
    filters = Filters(tags=tuple(tags), path=path, modified_after=after)
    record("fuzz: search filters", tried=1)
    try:
        where, params = filters.where()
    except PinakesError:
        return
    synced.store().conn.execute(
        f"SELECT COUNT(*) FROM documents d WHERE {where}", params
    ).fetchone()
    if path is not None and clean_path(path) is not None:
        assert ".." not in Path(clean_path(path) or "").parts


@FUZZ
@given(
    value=st.one_of(
        st.floats(), st.integers(-(2**80), 2**80), st.datetimes(min_value=datetime(1, 1, 2))
    )
)
def test_times_are_finite_and_comparable(value: Any) -> None:
    try:
        seconds = clean_time(value, "modified_after")
    except PinakesError:
        return
    assert seconds is not None and abs(int(seconds * 1e9)) < 2**63


# -- frontmatter and sidecars ------------------------------------------------------------------

YAMLISH = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.floats(allow_nan=False)
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(string.ascii_letters, min_size=1, max_size=8), inner, max_size=4),
    ),
    max_leaves=20,
)
YAML_TEXT = st.one_of(
    HOSTILE,
    st.text(alphabet=st.sampled_from(list("[]{}:,-&*!|>'\"#?%@` \n\tax1")), max_size=200),
    YAMLISH.map(lambda v: json.dumps(v)),
)


@FUZZ
@given(block=YAML_TEXT)
def test_frontmatter_never_raises(block: str) -> None:
    text = "---\n" + block + "\n---\n# Body\n"
    front = parse_frontmatter("fuzz.md", text.split("\n"))
    assert front.end_line >= 0
    assert all(isinstance(t, str) for t in front.tags)
    record("fuzz: frontmatter", tried=1)


@FUZZ
@given(
    data=st.one_of(
        YAML_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200)
    )
)
def test_sidecar_reading_raises_only_sidecar_errors(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.md.pnk.yaml"
    try:
        read_sidecar(path, data)
    except SidecarError as exc:
        assert str(path) in exc.message
    record("fuzz: sidecar reading", tried=1)


@FUZZ
@given(
    text=st.one_of(
        YAML_TEXT,
        st.integers(1, 5_000).map(lambda n: "[" * n),
        st.integers(1, 300).map(
            lambda n: (
                "a: &a [x]\n"
                + "".join(
                    f"a{i}: &a{i} [*{'a' if i == 0 else f'a{i - 1}'}, *{'a' if i == 0 else f'a{i - 1}'}]\n"
                    for i in range(n)
                )
            )
        ),
    )
)
def test_yaml_guard_refuses_only_with_its_own_error_or_a_syntax_error(text: str) -> None:
    with contextlib.suppress(YamlLimitError, YAMLError):
        check_yaml(text)
    record("fuzz: YAML guard", tried=1)


@FUZZ
@given(
    value=YAMLISH,
    anchors=st.booleans(),
    flow=st.booleans(),
    depth=st.integers(2, 8),
    nodes=st.integers(5, 60),
)
def test_the_yaml_fast_path_only_clears_what_the_scan_clears(
    value: Any, anchors: bool, flow: bool, depth: int, nodes: int
) -> None:
    yaml = YAML(typ="rt")
    yaml.default_flow_style = flow
    buffer = io.StringIO()
    yaml.dump({"root": value, "again": value} if anchors else {"root": value}, buffer)
    text = buffer.getvalue()
    if _surely_within(text, nodes, depth):
        _scan_events(text, nodes, depth)  # raises if the fast path was wrong
    record("fuzz: YAML guard fast path", tried=1)


@FUZZ
@given(text=YAML_TEXT, depth=st.integers(2, 8), nodes=st.integers(5, 60))
def test_the_yaml_fast_path_is_sound_on_any_text(text: str, depth: int, nodes: int) -> None:
    if _surely_within(text, nodes, depth):
        with contextlib.suppress(YAMLError):  # not YAML at all: the load reports it
            _scan_events(text, nodes, depth)
    record("fuzz: YAML guard fast path", tried=1)


KEY = st.sampled_from(["id", "title", "tags", "aliases", "extra", "note", "links"])
SCALAR = st.one_of(
    st.sampled_from(
        [
            "~",
            "null",
            "plain words",
            "'single: quoted'",
            '"double # quoted"',
            "42",
            "true",
            "a" * 120,
        ]
    ),
    st.text(alphabet=string.ascii_letters + " -_", min_size=1, max_size=30)
    .map(str.strip)
    .filter(bool),
)


@st.composite
def sidecars(draw: st.DrawFn) -> str:
    """A valid sidecar written the many ways people write YAML."""
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    indent = draw(st.sampled_from([0, 2, 4]))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("---")
    if draw(st.booleans()):
        lines.append("# a comment at the top")
    for key in draw(st.lists(KEY, unique=True, max_size=5)):
        style = draw(st.sampled_from(["scalar", "flow", "block", "empty"]))
        comment = draw(st.sampled_from(["", "  # why"]))
        if key == "links" and style == "scalar":
            style = "block"
        if style == "scalar":
            lines.append(f"{key}: {draw(SCALAR)}{comment}")
        elif style == "empty":
            lines.append(f"{key}:{comment}")
        elif style == "flow":
            items = draw(
                st.lists(SCALAR.filter(lambda s: not re.search(r"[,\[\]{}#:]", s)), max_size=3)
            )
            if key == "links":
                items = [f"{{to: {i or 'x'}}}" for i in items]
            lines.append(f"{key}: [{', '.join(items)}]{comment}")
        else:
            lines.append(f"{key}:{comment}")
            for item in draw(st.lists(SCALAR, min_size=1, max_size=3)):
                pad = " " * indent
                if key == "links":
                    lines += [f"{pad}- to: {item}", f"{pad}  rel: cites"]
                else:
                    lines.append(f"{pad}- {item}")
    if draw(st.booleans()):
        lines.append("# a trailing comment")
    if draw(st.booleans()):
        lines.append("...")
    text = nl.join(lines) + (nl if draw(st.booleans()) else "")
    return ("\ufeff" if draw(st.booleans()) else "") + text


@FUZZ
@given(original=sidecars(), note=st.one_of(st.none(), HOSTILE.map(clean_query)))
def test_link_appends_only_insert(tmp_path: Path, original: str, note: str | None) -> None:
    path = tmp_path / "s.md.pnk.yaml"
    path.write_bytes(original.encode("utf-8"))
    try:
        before = read_sidecar(path)
    except SidecarError:
        assume(False)  # only valid sidecars are edited
        return
    entry = {"to": "pnk://01ARZ3NDEKTSV4RRFFQ69G5FAW", "rel": "cites"}
    if note:
        entry["note"] = note
    try:
        _, after = append_link(path, entry)
    except SidecarError:
        assert path.read_bytes() == original.encode("utf-8")  # refused: left as it was
        record("fuzz: sidecar link edits", tried=1)
        return
    assert [link.to for link in read_sidecar(path).links] == [
        *[link.to for link in before.links],
        entry["to"],
    ]
    matcher = difflib.SequenceMatcher(None, original, after, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    # Insertions only, except that an explicit null (~ / null) becomes the new list.
    assert all(
        op[0] == "insert" or original[op[1] : op[2]].strip() in ("~", "null") for op in changes
    )
    assert ("\r\n" in original) == ("\r\n" in after) or "\n" not in original
    record("fuzz: sidecar link edits", tried=1)


@FUZZ
@given(original=sidecars(), new_id=ULIDS)
def test_setting_the_id_changes_only_its_value(tmp_path: Path, original: str, new_id: str) -> None:
    path = tmp_path / "s.md.pnk.yaml"
    path.write_bytes(original.encode("utf-8"))
    try:
        read_sidecar(path)
    except SidecarError:
        assume(False)
        return
    after = write_sidecar(path, {"id": new_id})
    assert read_sidecar(path).id == new_id
    # Every other line is still there, in order; only the id line changed or was added.
    kept = iter(after.lstrip("\ufeff").splitlines())
    others = [ln for ln in original.lstrip("\ufeff").splitlines() if not ln.startswith("id:")]
    assert all(line in kept for line in others)
    record("fuzz: sidecar id edits", tried=1)


# -- URIs, chunks, MCP filters ------------------------------------------------------------------


@FUZZ
@given(text=st.one_of(HOSTILE, HOSTILE.map(lambda t: "pnk://" + t)))
def test_uri_parser_raises_only_uri_errors(text: str) -> None:
    record("fuzz: pnk:// URIs", tried=1)
    try:
        uri = parse_uri(text)
    except UriError as exc:
        assert "\n" not in exc.message
        return
    assert parse_uri(str(uri)) == uri


@FUZZ
@given(
    doc=ULIDS,
    kb=st.one_of(
        st.none(), ULIDS, st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
    ),
    chunk=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_uris_round_trip(doc: str, kb: str | None, chunk: int | None) -> None:
    uri = PnkUri(doc_id=doc, kb=kb, chunk=chunk)
    assert parse_uri(str(uri)) == uri


WORDS = st.one_of(
    st.text(string.ascii_letters + "+/=", min_size=1, max_size=2_000),
    st.sampled_from(
        ["Raft", "leader.", "# Heading", "```", "|a|b|", "", "data:image/png;base64," + "A" * 500]
    ),
)


@settings(max_examples=scale(40), deadline=None)
@given(
    lines=st.lists(st.lists(WORDS, max_size=30).map(" ".join), max_size=40), markdown=st.booleans()
)
def test_chunks_stay_within_budget(lines: list[str], markdown: bool) -> None:
    count = token_counter()
    chunks = chunk_document("\n".join(lines), markdown=markdown, budget=64, count=count)
    for chunk in chunks:
        # The one allowance: body-less headings join the chunk of the text they lead (or, at the
        # very end of a document, the last chunk) rather than stand alone (issue 9).
        tokens, chars = _carried_headings(chunk.text, count)
        assert chunk.tokens <= 64 + tokens and len(chunk.text) <= 64 * 16 + chars
        assert chunk.tokens == count(chunk.text)
    record("fuzz: chunker", tried=1)


def _carried_headings(text: str, count: Callable[[str], int]) -> tuple[int, int]:
    """Tokens and characters of the heading lines (ATX or setext) that open or end ``text``."""
    lines = text.split("\n")
    tokens = chars = 0
    for end in (-1, 0):  # the heading lines that end the chunk, then those that open it
        while lines:
            line = lines[end].strip()
            if not line or re.fullmatch(r"#{1,6}(\s.*)?", line):
                taken = [lines.pop(end)]
            elif end == -1 and re.fullmatch(r"=+|-+", line) and len(lines) > 1:
                taken = [lines.pop(), lines.pop()]
            elif end == 0 and len(lines) > 1 and re.fullmatch(r"=+|-+", lines[1].strip()):
                taken = [lines.pop(0), lines.pop(0)]
            else:
                break
            tokens += sum(count(t) for t in taken)
            chars += sum(len(t) + 1 for t in taken)
    return tokens, chars


GUARD = TrustMiddleware(None, bind="127.0.0.1", port=8000, allow_hosts=["*.example.org"])
NAMES = st.one_of(
    st.sampled_from(
        [
            "localhost",
            "127.0.0.1",
            "[::1]",
            "notes.example.org",
            "example.org",
            "evil.example.org.attacker.net",
            "127.0.0.1.nip.io",
            "LOCALHOST",
            "0.0.0.0",
        ]
    ),
    st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,3}", fullmatch=True),
)


@FUZZ
@given(host=HOSTILE, origin=HOSTILE)
def test_trust_checks_never_raise(host: str, origin: str) -> None:
    GUARD.host_allowed(host)
    GUARD.origin_allowed(origin)
    record("fuzz: HTTP Host/Origin checks", tried=1)


@FUZZ
@given(
    name=NAMES,
    port=st.one_of(st.none(), st.sampled_from([8000, 80, 8001])),
    scheme=st.sampled_from(["http", "https"]),
)
def test_only_this_server_s_names_are_served(name: str, port: int | None, scheme: str) -> None:
    bare = name.strip("[]").lower()
    ours = bare in ("localhost", "127.0.0.1", "::1") or bare.endswith(".example.org")
    expected = ours and (port in (None, 8000) or bare.endswith(".example.org"))
    host = name if port is None else f"{name}:{port}"
    assert GUARD.host_allowed(host) == expected, host
    if not ours:
        assert not GUARD.origin_allowed(f"{scheme}://{host}")


@FUZZ
@given(
    value=YAMLISH,
    junk=st.lists(
        st.sampled_from(["\ud800", "\udfff", "\ud83e", "x\\ud800", "\\\\ud800"]), max_size=3
    ),
)
def test_stdin_filter_makes_any_json_parseable(value: Any, junk: list[str]) -> None:
    line = json.dumps({"v": value, "junk": junk}).encode("utf-8")
    fixed = fix_surrogate_escapes(line)
    parsed = pydantic_core.from_json(fixed)
    assert parsed["v"] == json.loads(line)["v"]
    record("fuzz: stdio surrogate filter", tried=1)
