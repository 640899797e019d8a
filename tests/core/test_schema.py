"""The seed schema: config, relation matching, `add_link`, doctor, suggestions and review (DESIGN §9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FakeHashEmbedder, make_kb
from pinakes_core import KB, ConfigError, PinakesError, load_config
from pinakes_core.manage.schema import match_relation
from pinakes_core.paid.suggestions import (
    Candidate,
    promote,
    read_suggestions,
    record_schema_suggestion,
    review_schema,
    suggestions_path,
)

SCHEMA = """
# The seed schema: my own comment, kept by every rewrite.
[schema.entity_types]
person = "humans"   # people
service = "a deployable thing"

[schema.relation_types.depends-on]
description = "X needs Y to work"
inverse = "required-by"
aliases = ["relies on", "needs"]

[schema.relation_types.cites]
description = "X cites Y"
inverse = "cited-by"

[schema.relation_types.supersedes]
inverse = "superseded-by"
"""

FILES = {
    "api.md": "# API\n\nThe public API service.\n",
    "db.md": "# Database\n\nPostgres cluster.\n",
    "old.md": "# Old design\n\nThe first design.\n",
    "new.md": "# New design\n\nThe second design.\n",
}


def _schema_kb(root: Path, schema: str = SCHEMA) -> Path:
    make_kb(root, dict(FILES))
    with (root / "pinakes.toml").open("a", encoding="utf-8") as handle:
        handle.write(schema)
    return root


@pytest.fixture
def skb(tmp_path: Path):
    """The schema KB with the FAKE embedder: for exact vocabulary, which never embeds."""
    root = _schema_kb(tmp_path / "kb")
    handle = KB.open(root, embedder=FakeHashEmbedder())
    handle.sync()
    yield handle
    handle.close()


@pytest.fixture
def model_skb(tmp_path: Path):
    """The schema KB with the real model: an unknown relation is compared by meaning."""
    root = _schema_kb(tmp_path / "kb")
    handle = KB.open(root)
    handle.sync()
    yield handle
    handle.close()


# -- config ----------------------------------------------------------------------------------


def test_schema_tables_accept_lists_and_description_strings(tmp_path: Path) -> None:
    root = _schema_kb(
        tmp_path / "kb",
        '\n[schema]\nentity_types = ["person", "place"]\n'
        'relation_types = { cites = "X cites Y", part-of = { inverse = "has-part" } }\n',
    )
    schema = load_config(root).schema_
    assert schema.entity_types == {"person": "", "place": ""}
    assert schema.relation_types["cites"].description == "X cites Y"
    assert schema.relation_types["part-of"].inverse == "has-part"


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ('\n[schema.relation_types]\n"Depends On" = "x"\n', ["'Depends On'", "'depends-on'"]),
        (
            "\n[schema.relation_types]\ncites = { aliases = ['supersedes'] }\nsupersedes = {}\n",
            ["'supersedes'", "'cites'"],
        ),
        ("\n[schema.review]\nmin_runs = 0\n", ["schema.review.min_runs"]),
    ],
)
def test_bad_schema_is_one_clear_config_error(
    tmp_path: Path, schema: str, words: list[str]
) -> None:
    root = _schema_kb(tmp_path / "kb", schema)
    with pytest.raises(ConfigError) as info:
        load_config(root)
    message = str(info.value)
    assert "pinakes.toml" in message and "\n" not in message
    for word in words:
        assert word in message


# -- matching without the model ----------------------------------------------------------------


def test_names_aliases_and_inverses_match_without_the_model(skb: KB) -> None:
    embedder = skb.embedder
    assert isinstance(embedder, FakeHashEmbedder)
    calls = embedder.query_calls
    cases = {
        "depends-on": ("depends-on", "exact", False),
        "Depends On": ("depends-on", "exact", False),
        "relies on": ("depends-on", "alias", False),
        "NEEDS": ("depends-on", "alias", False),
        "cited by": ("cites", "inverse", True),
        "required-by": ("depends-on", "inverse", True),
    }
    for text, (rel, via, inverted) in cases.items():
        match = match_relation(skb.config.schema_, lambda: skb.embedder, text)
        assert (match.rel, match.via, match.inverted, match.in_schema) == (rel, via, inverted, True)
    assert embedder.query_calls == calls, "exact vocabulary never needs the model"


def test_a_kb_without_schema_keeps_free_relations(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", dict(FILES))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        match = match_relation(kb.config.schema_, lambda: kb.embedder, "Is Built On")
        assert (match.rel, match.via, match.in_schema) == ("is-built-on", "none", False)


# -- add_link ----------------------------------------------------------------------------------


def test_link_writes_the_schema_name_for_an_alias_and_logs_nothing(skb: KB) -> None:
    path, _, after = skb.add_link("api.md", "db.md", "relies on")
    assert path == "api.md.pnk.yaml"
    assert "rel: depends-on" in after
    assert read_suggestions(skb.root) == ([], 0)


def test_link_with_an_inverse_writes_the_inverse(skb: KB) -> None:
    _, _, after = skb.add_link("old.md", "new.md", "Superseded By")
    assert "rel: superseded-by" in after
    assert read_suggestions(skb.root) == ([], 0)


@pytest.mark.model
def test_free_text_maps_to_a_schema_relation_by_meaning(model_skb: KB) -> None:
    match = match_relation(model_skb.config.schema_, lambda: model_skb.embedder, "is based on")
    assert (match.rel, match.via, match.inverted) == ("depends-on", "embedding", False)
    assert match.score is not None and match.score >= 0.8
    # Close to the inverse's label: written as the inverse, which reads the link backwards.
    _, _, after = model_skb.add_link("old.md", "new.md", "is cited by")
    assert "rel: cited-by" in after
    assert read_suggestions(model_skb.root) == ([], 0)


@pytest.mark.model
def test_unknown_relation_is_written_and_logged_as_a_suggestion(model_skb: KB) -> None:
    skb = model_skb
    _, _, after = skb.add_link("api.md", "db.md", "Mentors")
    assert "rel: mentors" in after
    found, bad = read_suggestions(skb.root)
    assert bad == 0 and len(found) == 1
    s = found[0]
    assert (s.kind, s.name, s.source, s.origin, s.confidence) == (
        "relation",
        "mentors",
        "api.md",
        "link",
        1.0,
    )
    skb.add_link("new.md", "db.md", "mentors")
    found, _ = read_suggestions(skb.root)
    assert len({s.run for s in found}) == 2, "each pnk link is its own run"


@pytest.mark.model
def test_doctor_reports_relations_outside_the_schema_and_aliases(model_skb: KB) -> None:
    skb = model_skb
    skb.add_link("api.md", "db.md", "mentors")
    (skb.root / "new.md.pnk.yaml").write_text(
        (skb.root / "new.md.pnk.yaml").read_text() + "links:\n  - to: old.md\n    rel: needs\n"
        "  - to: db.md\n    rel: cited-by\n  - to: api.md\n"
    )
    skb.sync()
    findings = {f.check: f for f in skb.doctor().findings}
    outside = findings["relations-outside-schema"]
    assert outside.items == ["mentors: 1 link(s), e.g. in api.md"]
    assert findings["relation-aliases"].items == ["needs → depends-on: 1 link(s), e.g. in new.md"]


def test_doctor_is_silent_about_relations_without_a_schema(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", dict(FILES))
    with KB.open(root, embedder=FakeHashEmbedder()) as kb:
        kb.sync()
        kb.add_link("api.md", "db.md", "reads from")
        kb.sync()
        checks = {f.check for f in kb.doctor().findings}
    assert "relations-outside-schema" not in checks


# -- the suggestions log -----------------------------------------------------------------------


def test_suggestions_are_validated_and_bad_lines_skipped(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", dict(FILES))
    with pytest.raises(PinakesError, match="confidence"):
        record_schema_suggestion(root, "entity", "Ingredient", source="a.md", confidence=1.5)
    with pytest.raises(PinakesError, match="name"):
        record_schema_suggestion(root, "entity", "  ", source="a.md")
    with pytest.raises(PinakesError, match="name"):
        record_schema_suggestion(root, "entity", "x" * 200, source="a.md")
    saved = record_schema_suggestion(
        root, "entity", "Ingredient", source="a.md", confidence=0.8, run="r1", origin="ner"
    )
    assert saved.name == "ingredient"
    with suggestions_path(root).open("a") as handle:
        handle.write("not json\n" + json.dumps({"kind": "mystery"}) + "\n" + "{" * 5000 + "\n")
    found, bad = read_suggestions(root)
    assert found == [saved] and bad == 3


# -- promotion (no model needed: the candidate is given) ---------------------------------------


def _candidate(kind: str = "relation", name: str = "reads-from") -> Candidate:
    return Candidate(kind=kind, name=name, seen=7, runs=6, sources=4, mean_confidence=0.93)  # type: ignore[arg-type]


def test_promotion_keeps_every_comment_and_adds_a_section(skb: KB) -> None:
    before = (skb.root / "pinakes.toml").read_text()
    preview = promote(skb.root, _candidate(), write=False)
    assert (skb.root / "pinakes.toml").read_text() == before, "a preview writes nothing"
    diff = promote(skb.root, _candidate(), write=True)
    assert diff == preview
    after = (skb.root / "pinakes.toml").read_text()
    for line in before.splitlines():
        assert line in after.splitlines(), f"lost: {line!r}"
    assert "[schema.relation_types.reads-from]" in after
    assert "seen in 6 runs and 4 sources, mean confidence 0.93" in after
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and line[1:2] != "+"]
    removed = [line for line in diff.splitlines() if line.startswith("-") and line[1:2] != "-"]
    assert removed == [] and "[schema.relation_types.reads-from]" in added
    assert "reads-from" in load_config(skb.root).schema_.relation_types
    promote(skb.root, _candidate("entity", "ingredient"), write=True)
    text = (skb.root / "pinakes.toml").read_text()
    assert 'person = "humans"   # people' in text
    assert load_config(skb.root).schema_.entity_types["ingredient"] == ""


def test_promotion_into_a_list_and_into_a_kb_without_schema(tmp_path: Path) -> None:
    listed = _schema_kb(
        tmp_path / "a", '\n[schema]\n# mine\nentity_types = ["person", "place"]  # short\n'
    )
    with KB.open(listed, embedder=FakeHashEmbedder()) as kb:
        promote(kb.root, _candidate("entity", "ingredient"), write=True)
    text = (listed / "pinakes.toml").read_text()
    assert "# mine" in text and "# short" in text
    assert list(load_config(listed).schema_.entity_types) == ["person", "place", "ingredient"]
    bare = make_kb(tmp_path / "b", dict(FILES))
    with KB.open(bare, embedder=FakeHashEmbedder()) as kb:
        promote(kb.root, _candidate(), write=True)
        promote(kb.root, _candidate("attribute", "year"), write=True)
    schema = load_config(bare).schema_
    assert "reads-from" in schema.relation_types and "year" in schema.attribute_types


# -- review thresholds (the real model measures similarity) -------------------------------------


def _log(root: Path, name: str, runs: int, sources: int, confidence: float) -> None:
    for i in range(runs):
        record_schema_suggestion(
            root,
            "relation",
            name,
            source=f"doc{i % sources}.md",
            confidence=confidence,
            run=f"{name}-run{i}",
        )


@pytest.fixture
def review_kb(tmp_path: Path):
    root = _schema_kb(tmp_path / "kb")
    handle = KB.open(root)  # the real model: similarity is semantic
    yield handle
    handle.close()


@pytest.mark.model
def test_each_threshold_on_its_own_blocks_a_promotion(review_kb: KB) -> None:
    root = review_kb.root
    _log(root, "mentors", runs=5, sources=3, confidence=0.9)  # passes every threshold
    _log(root, "funds", runs=4, sources=3, confidence=0.9)  # one run short
    _log(root, "translates", runs=5, sources=2, confidence=0.9)  # one source short
    _log(root, "reviews", runs=5, sources=3, confidence=0.7)  # mean not above 0.7
    _log(root, "relies-upon", runs=5, sources=3, confidence=0.9)  # a synonym of depends-on
    _log(root, "relies-on", runs=9, sources=9, confidence=1.0)  # already an alias: no candidate
    review = review_schema(root, review_kb.config.schema_, lambda: review_kb.embedder)
    assert [p.name for p in review.proposals] == ["mentors"]
    assert review.proposals[0].diff.count("\n+") >= 2
    held = {c.name: c.blocked_by for c in review.held}
    assert set(held) == {"funds", "translates", "reviews", "relies-upon"}
    for name, word in [
        ("funds", "run(s)"),
        ("translates", "source(s)"),
        ("reviews", "confidence"),
        ("relies-upon", "cosine"),
    ]:
        assert len(held[name]) == 1 and word in held[name][0], (name, held[name])
    near = next(c for c in review.held if c.name == "relies-upon")
    assert near.nearest == "depends-on" and near.similarity is not None
    assert near.similarity >= 0.85
    mentors = review.proposals[0]
    assert mentors.similarity is not None and mentors.similarity < 0.85
    # Promoting it makes the next review propose nothing new: the type now exists.
    promote(review_kb.root, mentors, write=True)
    again = review_schema(root, load_config(root).schema_, lambda: review_kb.embedder)
    assert again.proposals == [] and "mentors" not in {c.name for c in again.held}


def test_schema_text_lists_every_type_for_a_prompt(skb: KB) -> None:
    from pinakes_core.manage.schema import schema_text

    lines = schema_text(skb.config.schema_).splitlines()
    assert lines[0] == "entity person: humans"
    assert (
        "relation depends-on (inverse required-by; also: relies on, needs): X needs Y to work"
        in lines
    )
    assert "relation supersedes (inverse superseded-by)" in lines
    assert len(lines) == 5
