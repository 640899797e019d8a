"""``pinakes.toml``: the KB's committed configuration (DESIGN §2).

Every section is a pydantic model that forbids unknown keys, so a typo is an error naming the
file, the key and the allowed keys instead of a silently ignored setting.

Why one module of this length (issue 37): it holds one model per ``pinakes.toml`` table with
its defaults, bounds and checks, and the loader that validates the file; read top to bottom it
is the reference of the file's format, which splitting by table would scatter.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pinakes_core.errors import ConfigError, UnsafeFileError
from pinakes_core.intake import read_limited
from pinakes_core.uri import is_ulid, new_ulid

__all__ = [
    "CONFIG_FILE",
    "DEFAULT_MODEL",
    "HARD_CAPS",
    "AskConfig",
    "BudgetConfig",
    "ConfidenceConfig",
    "Config",
    "DeepConfig",
    "EmbeddingConfig",
    "FrontmatterConfig",
    "KbConfig",
    "NerConfig",
    "PdfConfig",
    "RelationType",
    "RetrievalConfig",
    "SchemaConfig",
    "SchemaReviewConfig",
    "SidecarsConfig",
    "SyncConfig",
    "default_kb_id",
    "default_kb_name",
    "load_config",
    "render_config",
    "validate_config",
]

CONFIG_FILE = "pinakes.toml"
#: The offline default embedding model (DESIGN §12), assembled from two PyPI packages.
DEFAULT_MODEL = "pinakes/all-MiniLM-L6-v2-int8"


def normalise_rel(rel: str) -> str:
    """Normalise a relation name to lower-kebab case (``"Depends On"`` → ``"depends-on"``)."""
    words = "".join(c if c.isalnum() else " " for c in rel.strip().lower()).split()
    return "-".join(words) or "links-to"


class _Section(BaseModel):
    # Deferred: each section's validator is built inside Config's when a config is first
    # validated, not once more per class at import (issue 14, start-up cost). So the sections'
    # defaults below are made with ``model_construct()``: calling ``SyncConfig()`` at import
    # would build that section's own validator, 17 of them, which a search never uses (issue
    # 37). The instances are equal to ``SyncConfig()`` (same values, no field set).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def default_kb_name(root: Path) -> str:
    """Return the KB name used when ``[kb] name`` is absent: the folder name, made valid."""
    name = _NAME_CHARS.sub("-", root.name).strip("._-")
    return name or "kb"


def default_kb_id(name: str) -> str:
    """Return the KB id used when ``[kb] id`` is absent: a ULID derived from the KB name.

    Derived, not random, so every open of the same KB gets the same id (Pinakes never rewrites
    ``pinakes.toml``); set ``[kb] id`` to keep ``pnk://`` URIs stable across renames.
    """
    from ulid import ULID

    digest = hashlib.blake2b(f"pinakes-kb:{name}".encode(), digest_size=16).digest()
    return str(ULID.from_bytes(digest))


class KbConfig(_Section):
    """``[kb]``: the KB's identity, and the template it was stamped from (if any).

    ``name`` and ``id`` are optional (DESIGN §2): ``name`` defaults to the KB folder's name and
    ``id`` to a ULID derived from the name (see :func:`default_kb_id`). The defaults need the KB
    root, which :func:`validate_config` passes as validation context ``{"root": Path}``.
    """

    name: Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
    id: str
    #: The template ``pnk init --template`` stamped (its ``template.toml`` name) and its version;
    #: ``pnk upgrade`` compares that version with the template's current one.
    template: str | None = None
    template_version: Annotated[str | None, Field(pattern=r"^\d+(\.\d+)*$")] = None
    #: Where a template that is a local folder lives (relative to the KB root when inside it or
    #: beside it); unset for the templates that ship with Pinakes.
    template_source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any, info: ValidationInfo) -> Any:
        root = (info.context or {}).get("root")
        if not isinstance(data, dict) or root is None:
            return data
        data = dict(data)
        if data.get("name") is None:
            data["name"] = default_kb_name(Path(root))
        if data.get("id") is None and isinstance(data["name"], str):
            data["id"] = default_kb_id(data["name"])
        return data

    @field_validator("id")
    @classmethod
    def _ulid(cls, value: str) -> str:
        if not is_ulid(value):
            raise ValueError("must be a 26-character ULID such as 01JAXR3T5W6Z8Q9N0P1R2S3T4V")
        return value


class SyncConfig(_Section):
    """``[sync]``: which files are documents and how they are chunked."""

    #: Code files are opt-in: add e.g. "**/*.py" (docs/sources.md).
    include: list[str] = ["**/*.md", "**/*.markdown", "**/*.mdx", "**/*.txt", "**/*.pdf"]
    exclude: list[str] = []
    chunk_tokens: Annotated[int, Field(ge=32, le=2048)] = 256
    #: A bound, not infinity: ``max_file_mb = inf`` (valid TOML) failed every sync on int().
    #: At most :data:`HARD_CAPS`' value takes effect.
    max_file_mb: Annotated[float, Field(gt=0, le=1_000_000)] = 10.0
    #: Chunks one document may make; past it small sections are merged, then the rest cut.
    max_chunks_per_doc: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000
    gitignore: bool = True
    #: Deprecated: ``false`` is ``[sidecars] write = "never"``; use ``[sidecars]`` instead.
    write_sidecars: bool | None = None

    @field_validator("include", "exclude")
    @classmethod
    def _gitignore_patterns(cls, patterns: list[str]) -> list[str]:
        # Checked here, so that a pattern git cannot read ('a\\') is a config error naming
        # the key, not a traceback from pathspec in the middle of a sync.
        for pattern in patterns:
            if not gitignore_line(pattern):
                raise ValueError(f"{pattern!r} is not a gitignore-style pattern")
        return patterns


#: Most single ``*`` wildcards one name of a pattern keeps. The matcher backtracks: a name of
#: 200 ``a`` against ``*a*a*a*b`` takes 0.07 s, ``*a*a*a*a*b`` 4.6 s, one more ``*a`` 290 s
#: (issue 34: a cloned .gitignore line kept sync at full CPU without end).
MAX_NAME_STARS = 3


def bounded_pattern(line: str) -> str:
    """``line`` with every name holding more than :data:`MAX_NAME_STARS` ``*`` cut to ``pre*post``.

    ``pre*post`` (the text before the name's first ``*`` and after its last) matches every name
    the original matches, and more: an ignore or exclude line so cut leaves out a little more,
    never less. Lines within the bound are returned unchanged.
    """
    names = line.split("/")
    for i, name in enumerate(names):
        if name != "**" and name.count("*") > MAX_NAME_STARS:
            names[i] = name[: name.index("*")] + "*" + name[name.rindex("*") + 1 :]
    return "/".join(names)


def gitignore_line(line: str) -> bool:
    r"""Whether git can read ``line`` as a gitignore pattern (``build\`` from Windows it cannot)."""
    import pathspec  # here: a search that reads a config without patterns never loads it

    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except ValueError:
        return False
    return True


#: When sync writes a sidecar for a document without one (``[sidecars] write``).
SidecarPolicy = Literal["always", "when-needed", "never"]


class SidecarsConfig(_Section):
    """``[sidecars]``: when sync writes a sidecar for a document that has none (docs/fleet.md).

    ``"always"`` gives every document one (every id survives a rebuild); ``"when-needed"`` only
    a document whose id a rebuild could not derive from its frontmatter id or path (a vault of
    1,000 notes does not gain 1,000 files); ``"never"`` writes none.
    """

    write: SidecarPolicy = "always"


class FrontmatterConfig(_Section):
    """``[frontmatter]``: the keys holding a document's id, title, tags, aliases, description.

    For ``id`` and ``title`` the first key present wins; tags and aliases are gathered from all
    listed keys. ``pnk adopt`` sets these from the keys a vault uses (``tag``, ``alias``, ``uid``…).
    ``inline_tags`` says whether ``#tags`` in a Markdown document's text count as tags too.
    """

    id: list[str] = ["id"]
    title: list[str] = ["title"]
    tags: list[str] = ["tags"]
    aliases: list[str] = ["aliases"]
    #: The page's one-paragraph summary (docs sites' ``description``, Hugo's ``summary``,
    #: Dendron's ``desc``): the first key with text wins, and that text is indexed as a chunk of
    #: its own, ahead of the body (``[]``: never).
    description: list[str] = ["description", "summary", "desc", "abstract"]
    #: Also read ``#tags`` written in a Markdown document's text (Obsidian, Logseq, Bear,
    #: Dendron): ``#project/alpha`` in a paragraph tags the document ``project/alpha``.
    inline_tags: bool = True


class EmbeddingConfig(_Section):
    """``[embedding]``: the model that embeds chunks and queries."""

    model: Annotated[str, Field(min_length=1)] = DEFAULT_MODEL
    batch_tokens: Annotated[int, Field(ge=64, le=65536)] = 2048
    threads: Annotated[int | None, Field(ge=1)] = None


class RetrievalConfig(_Section):
    """``[retrieval]``: channels, fusion and confidence."""

    k: Annotated[int, Field(ge=1, le=200)] = 8
    candidates: Annotated[int, Field(ge=1, le=1000)] = 50
    rrf_k: Annotated[int, Field(ge=1)] = 60
    channels: list[str] = ["bm25", "dense"]
    #: "auto": ppr-auto when the graph plugin is installed (PPR reranking on the queries that
    #: look multi-hop, plain hybrid on the rest), else off (docs/ranking.md).
    graph_channel: Literal["auto", "off", "expand", "ppr", "ppr-auto", "ppr-rerank", "ppr-rank"] = (
        "auto"
    )
    #: Per-channel RRF weights (default 1.0 each); e.g. ``{ expand = 0.5 }``.
    weights: dict[str, Annotated[float, Field(ge=0.0, le=10.0)]] = {}
    # Chosen from the cross-validated threshold table of the self-calibration (docs/evaluation.md):
    # the highest value keeping golden false-abstain at or under 0.10 on average over the
    # synthetic samples KBs with other ids draw (0.086 at 0.20, 0.133 at 0.25).
    abstain_below: Annotated[float, Field(ge=0.0, le=1.0)] = 0.20
    #: The reader (issue 36): a cross-encoder shipped with core rereads the first
    #: ``reader_top_n`` passages with the query, re-scores them and feeds the confidence
    #: (docs/ranking.md). Off by default until it measures better (docs/evaluation.md).
    reader: bool = False
    reader_top_n: Annotated[int, Field(ge=1, le=50)] = 10
    #: The reader's share of a reread passage's score; 0: it only judges (confidence), the
    #: ranking stays the fused one.
    reader_weight: Annotated[float, Field(ge=0.0, le=1.0)] = 0.35


class ConfidenceConfig(_Section):
    """``[confidence]``: how the KB's confidence calibration is obtained (docs/evaluation.md)."""

    #: Fit the KB's own calibration from synthetic queries at sync (no labels needed); off, the
    #: golden-set prior is used as it is.
    self_calibrate: bool = True


_Weight = Annotated[float, Field(ge=0.0, le=100.0)]


class GraphConfig(_Section):
    """``[graph]``: edge weights (DESIGN §6) and traversal bounds; used by the graph plugin.

    Hub edges (``in_section``, ``co_located``, ``shared_tag``) weigh ``value / hub size``: a
    folder of 500 documents or a tag on half the KB links its members only faintly.
    """

    membership: _Weight = 1.0
    sibling: _Weight = 1.0
    parent_child: _Weight = 1.0
    in_section: _Weight = 1.0
    co_located: _Weight = 1.0
    shared_tag: _Weight = 1.0
    authored: _Weight = 2.0
    reverse_scan: _Weight = 1.0
    #: A document naming another's title ("unlinked mention"); 0 turns these edges off.
    title_mention: _Weight = 1.0
    adjacent_k: Annotated[int, Field(ge=1, le=64)] = 8


#: spaCy's English entity types (OntoNotes 5).
NerType = Literal[
    "PERSON",
    "NORP",
    "FAC",
    "ORG",
    "GPE",
    "LOC",
    "PRODUCT",
    "EVENT",
    "WORK_OF_ART",
    "LAW",
    "LANGUAGE",
    "DATE",
    "TIME",
    "PERCENT",
    "MONEY",
    "QUANTITY",
    "ORDINAL",
    "CARDINAL",
]
NER_TYPES: tuple[str, ...] = get_args(NerType)
#: Numbers, dates and amounts name no thing two passages can share meaningfully ("1990", "two").
_NUMERIC_TYPES = {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"}


class ScaleConfig(_Section):
    """``[scale]``: how dense search scales past exact scanning (issue 14, docs/scaling.md).

    From ``ann_min_chunks`` chunks on, sync keeps an HNSW index (usearch) in ``.pinakes/`` and
    unfiltered dense search takes its candidates from it, scored exactly; below, search is exact.
    ``0`` turns the index off at any size. From ``bm25_index_min_chunks`` on, a tantivy index
    serves the BM25 channel likewise.
    """

    ann_min_chunks: Annotated[int, Field(ge=0)] = 200_000
    #: Storage of the index's vectors: "i8" (a quarter of float32) keeps recall@10 ≥ 0.98 on the
    #: benchmarks (docs/benchmarks.md); "f16" and "f32" are there for other models.
    ann_dtype: Literal["i8", "f16", "f32"] = "i8"
    #: HNSW links per node (M): more costs memory and build time, gains recall.
    ann_connectivity: Annotated[int, Field(ge=4, le=128)] = 16
    ann_expansion_add: Annotated[int, Field(ge=8, le=4096)] = 128
    #: Search breadth (ef): candidates the graph search keeps (raised to twice the candidates
    #: asked for when that is more; below that usearch's recall falls off).
    ann_expansion_search: Annotated[int, Field(ge=8, le=4096)] = 512
    #: How many ANN candidates are scored exactly, as a multiple of ``[retrieval] candidates``:
    #: at 1M distinct vectors 8 × 50 gives recall@10 0.991 against exact (4 × 50: 0.977) for
    #: ~1 ms more per query (docs/scaling.md, ``benchmarks/ann_recall.py --mix``).
    ann_oversample: Annotated[float, Field(ge=1.0, le=20.0)] = 8.0
    #: BM25 rows budget: in a KB of more chunks than this, a query whose words match more rows
    #: than this in all takes its lexical candidates from its rarest words only (the common
    #: ones still score them; docs/scaling.md). A split at a quarter of it is tried first and kept
    #: when it is provably the exact top candidates. ``0``: BM25 scores every matching row always.
    bm25_max_rows: Annotated[int, Field(ge=0)] = 20_000
    #: From this many chunks on, sync keeps a tantivy index (``.pinakes/bm25-tantivy/``) and the
    #: BM25 channel takes its top rows from it (block-max WAND) instead of FTS5, which scores
    #: every matching row (docs/scaling.md). Its BM25 approximates FTS5's column weights, so the
    #: ranking differs a little. ``0``: FTS5 at any size.
    bm25_index_min_chunks: Annotated[int, Field(ge=0)] = 200_000


class StoreConfig(_Section):
    """``[store]``: where the derived index lives (issue 38, docs/scaling.md).

    ``"sqlite"`` (the default) keeps it in ``.pinakes/``. ``"postgres"`` names a PostgreSQL
    database with pgvector, by ``url`` or, better (no secret in the file), by the environment
    variable ``PINAKES_DATABASE_URL``; see :mod:`pinakes_core.index.place`.
    """

    backend: Literal["sqlite", "postgres"] = "sqlite"
    url: str | None = None

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                "must be a postgresql:// URL (or leave it out and set PINAKES_DATABASE_URL)"
            )
        return value


class NerConfig(_Section):
    """``[ner]``: the opt-in local NER extra (pinakes-ner, DESIGN §7).

    ``enabled`` turns it on (it needs the pinakes-ner plugin installed: a sync that asks for it
    without the plugin fails with the install command).
    """

    enabled: bool = False
    #: Entity types kept as graph nodes (spaCy labels); numbers and dates are left out.
    types: list[NerType] = [t for t in NER_TYPES if t not in _NUMERIC_TYPES]  # type: ignore[misc]
    #: Two surface forms, one containing the other ("Obama" / "Barack Obama"), are one entity
    #: when their label embeddings are at least this similar (docs/ner.md has the measurements).
    near_duplicate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7
    #: Share of the PPR personalisation given to the entities named in a query. Off by default:
    #: on the public multi-hop sets it lowers the default ppr-auto (docs/ner.md).
    seed_mass: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    #: Give a query's entities to search as its ``entities=`` list when the caller gives none.
    #: Off by default: the extra BM25 list lowers recall@2 on the public sets (docs/ner.md).
    auto_entities: bool = False
    #: Run the spaCy model on queries too (else only the KB's entity labels are matched).
    query_model: bool = True


_Eur = Annotated[Decimal, Field(ge=0, max_digits=16, decimal_places=8)]


class AskConfig(_Section):
    """``[ask]``: the model and the prompt bounds of ``pnk ask`` (DESIGN §9).

    Every bound here is in UTF-8 bytes or tokens so that a call's worst-case cost is known
    before it is made (see ``docs/ask.md``, "Cost model").
    """

    #: Any litellm model id (``gpt-4o-mini``, ``anthropic/claude-…``, ``ollama/llama3``).
    model: Annotated[str, Field(min_length=1, max_length=200)] = "gpt-4o-mini"
    #: The price-table entry to bill calls at when ``model`` is not in litellm's bundled table
    #: (an Azure deployment name, a proxy alias); default: ``model`` itself.
    price_model: Annotated[str | None, Field(min_length=1, max_length=200)] = None
    #: The base URL of the model's server (a local OpenAI-compatible server such as llama.cpp's,
    #: Ollama, LM Studio or vLLM: ``http://127.0.0.1:8080/v1``); default: the provider's own.
    api_base: Annotated[str | None, Field(pattern=r"^https?://[^\s/]+", max_length=500)] = None
    #: Whether the model runs on this machine, so its calls cost nothing. Default: true for a
    #: loopback ``api_base`` (``localhost``, 127.0.0.1, ``::1``) and for ``ollama/`` models on
    #: their local default server; set it for a server on your LAN (it needs ``api_base``), or
    #: ``false`` to bill a loopback proxy at ``price_model``'s prices.
    local: bool | None = None
    #: Passages given to the synthesis call.
    passages: Annotated[int, Field(ge=1, le=30)] = 8
    #: Each passage's text is cut to at most this many UTF-8 bytes.
    passage_bytes: Annotated[int, Field(ge=200, le=20000)] = 1600
    #: ``max_tokens`` of the synthesis call: the output ceiling every reservation prices.
    max_output_tokens: Annotated[int, Field(ge=64, le=32000)] = 1024
    #: Seconds before a call is abandoned (its outcome is then unknown, see ``pnk budget``).
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0


class BudgetConfig(_Section):
    """``[budget]``: spending caps for the paid path (DESIGN §9), in EUR.

    litellm's price table is in USD; ``usd_per_eur`` converts it (1 EUR = ``usd_per_eur`` USD).
    Day and month windows are calendar days and months in ``timezone``.
    """

    per_operation_eur: _Eur = Decimal("0.50")
    daily_eur: _Eur = Decimal("2.00")
    monthly_eur: _Eur = Decimal("20.00")
    confirm_above_eur: _Eur = Decimal("0.05")
    usd_per_eur: Annotated[Decimal, Field(gt=0, max_digits=10, decimal_places=6)] = Decimal("1.16")
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("must be an IANA time zone name such as UTC or Europe/Paris") from None
        return value


class PdfConfig(_Section):
    """``[pdf]``: bounds on reading one PDF (a PDF is untrusted input; docs/sources.md).

    A PDF is also bound by ``[sync] max_file_mb`` like every file.
    """

    #: Pages read per PDF; later pages are left out with a warning.
    max_pages: Annotated[int, Field(ge=1, le=100_000)] = 5_000
    #: Seconds one PDF may take; extraction stops there (a stuck page is killed soon after).
    max_seconds: Annotated[float, Field(gt=0, le=3_600)] = 120.0
    #: Address-space limit of the process that parses PDFs, in MB.
    max_memory_mb: Annotated[int, Field(ge=256, le=65_536)] = 2_048


class DeepConfig(_Section):
    """``[deep]``: the budgeted multi-round ``ask --deep`` loop (DESIGN §9)."""

    #: Paid sub-question rounds at most (the DAG holds at most 5 sub-questions).
    max_rounds: Annotated[int, Field(ge=1, le=5)] = 3
    #: Retrieval confidence at or above which no loop runs (or the loop stops).
    confident_above: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7
    #: Passages given to each sub-question's call.
    passages: Annotated[int, Field(ge=1, le=20)] = 5
    #: The rolling summary is cut to at most this many UTF-8 bytes after every round.
    summary_bytes: Annotated[int, Field(ge=200, le=20000)] = 2000
    #: ``max_tokens`` of the decomposition and sub-question calls.
    max_output_tokens: Annotated[int, Field(ge=64, le=32000)] = 700
    #: Link suggestions below this confidence are not proposed.
    suggest_min_confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5


def _type_key(name: str) -> str:
    """A type name as Pinakes compares them: lower-kebab (``"Depends On"`` → ``depends-on``)."""
    return normalise_rel(name) if any(c.isalnum() for c in name) else ""


def _named_table(value: Any) -> Any:
    """Accept a plain list of names (``["person", "place"]``) for a ``{name = description}`` table."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return dict.fromkeys(value, "")
    return value


class RelationType(_Section):
    """One relation type of the seed schema: ``depends-on = { inverse = "required-by", … }``."""

    description: str = ""
    #: The relation read from the other end (``cites`` ↔ ``cited-by``); ``links(rel="cited by")``
    #: follows ``cites`` links backwards.
    inverse: str | None = None
    #: Other ways to say it (``"relies on"``, ``"needs"``); matched exactly after normalisation.
    aliases: list[str] = []


class SchemaReviewConfig(_Section):
    """``[schema.review]``: what a suggestion needs before ``pnk schema review`` proposes it."""

    min_runs: Annotated[int, Field(ge=1)] = 5
    min_sources: Annotated[int, Field(ge=1)] = 3
    min_confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7
    #: A suggestion this close (cosine) to an existing type is a synonym, not a new type.
    max_similarity: Annotated[float, Field(ge=0.0, le=1.0)] = 0.85


class SchemaConfig(_Section):
    """``[schema]``: the seed schema (DESIGN §9): entity, relation and attribute types.

    Relation types drive ``pnk link --rel`` and ``links(rel=…)`` matching; types written in
    sidecars but absent here are allowed and reported by ``pnk doctor``. Each table also accepts
    a plain list of names, and a relation type a plain description string.
    """

    entity_types: dict[str, str] = {}
    relation_types: dict[str, RelationType] = {}
    attribute_types: dict[str, str] = {}
    review: SchemaReviewConfig = SchemaReviewConfig.model_construct()

    @field_validator("entity_types", "attribute_types", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        return _named_table(value)

    @field_validator("relation_types", mode="before")
    @classmethod
    def _relations(cls, value: Any) -> Any:
        value = _named_table(value)
        if isinstance(value, dict):
            return {k: {"description": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SchemaConfig:
        for kind, names in (
            ("entity_types", self.entity_types),
            ("relation_types", self.relation_types),
            ("attribute_types", self.attribute_types),
        ):
            for name in names:
                if not _type_key(name) or _type_key(name) != name:
                    raise ValueError(
                        f"type name {name!r} in {kind} must be lower-kebab, "
                        f"e.g. {_type_key(name) or 'depends-on'!r}"
                    )
        owner: dict[str, str] = {name: name for name in self.relation_types}
        for name, rel in self.relation_types.items():
            spoken = ([rel.inverse] if rel.inverse else []) + rel.aliases
            for word in spoken:
                key = _type_key(word)
                if not key:
                    raise ValueError(f"relation {name!r} has an empty inverse or alias")
                if owner.setdefault(key, name) != name:
                    raise ValueError(
                        f"{word!r} (of relation {name!r}) already names relation {owner[key]!r}"
                    )
        return self


class Config(_Section):
    """The whole of ``pinakes.toml``."""

    kb: KbConfig
    sync: SyncConfig = SyncConfig.model_construct()
    embedding: EmbeddingConfig = EmbeddingConfig.model_construct()
    retrieval: RetrievalConfig = RetrievalConfig.model_construct()
    confidence: ConfidenceConfig = ConfidenceConfig.model_construct()
    graph: GraphConfig = GraphConfig.model_construct()
    ner: NerConfig = NerConfig.model_construct()
    scale: ScaleConfig = ScaleConfig.model_construct()
    store: StoreConfig = StoreConfig.model_construct()
    ask: AskConfig = AskConfig.model_construct()
    budget: BudgetConfig = BudgetConfig.model_construct()
    deep: DeepConfig = DeepConfig.model_construct()
    pdf: PdfConfig = PdfConfig.model_construct()
    schema_: SchemaConfig = Field(default=SchemaConfig.model_construct(), alias="schema")
    sidecars: SidecarsConfig = SidecarsConfig.model_construct()
    frontmatter: FrontmatterConfig = FrontmatterConfig.model_construct()

    #: Limits :func:`validate_config` lowered to their :data:`HARD_CAPS`, one sentence each.
    _clamped: tuple[str, ...] = PrivateAttr(default=())

    @property
    def clamped(self) -> tuple[str, ...]:
        """One sentence per limit ``pinakes.toml`` set past its hard cap (lowered to the cap)."""
        return self._clamped

    @property
    def sidecar_policy(self) -> str:
        """When sync writes sidecars: ``[sidecars] write`` (``"never"`` for the old ``write_sidecars = false``)."""
        return "never" if self.sync.write_sidecars is False else self.sidecars.write

    @model_validator(mode="before")
    @classmethod
    def _kb_section(cls, data: Any, info: ValidationInfo) -> Any:
        # Without [kb] the identity defaults apply (they need the root from the context).
        if isinstance(data, dict) and "kb" not in data and (info.context or {}).get("root"):
            return {**data, "kb": {}}
        return data


def _allowed(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Return the keys allowed at ``loc`` (the parent of the offending key)."""
    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if current is None:
            break
        field = current.model_fields.get(str(part)) or next(
            (f for f in current.model_fields.values() if f.alias == part), None
        )
        annotation = field.annotation if field else None
        current = (
            annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel)
            else None
        )
    if current is None:
        return []
    return sorted(f.alias or name for name, f in current.model_fields.items())


def _describe(path: Path, error: ValidationError) -> ConfigError:
    first = error.errors()[0]
    loc = tuple(first["loc"])
    key = ".".join(str(p) for p in loc) or "(top level)"
    if first["type"] == "extra_forbidden":
        allowed = _allowed(Config, loc)
        return ConfigError(
            f"{path}: unknown key {key!r}; allowed keys here are: {', '.join(allowed)}.",
            "Fix the spelling or remove the key.",
        )
    if first["type"] == "missing":
        return ConfigError(
            f"{path}: required key {key!r} is missing.",
            "Add the key (docs/guide.md lists every key and its default).",
        )
    value = first.get("input")
    message = str(first["msg"]).removeprefix("Value error, ")
    if isinstance(value, dict | list):  # a whole table: the message names the culprit
        return ConfigError(f"{path}: [{key}] is invalid: {message}.")
    return ConfigError(f"{path}: key {key!r} has bad value {value!r}: {message}.")


def load_config(root: Path) -> Config:
    """Read and validate ``<root>/pinakes.toml``.

    Raises:
        ConfigError: if the file is missing, is not TOML, or fails validation; the message names
            the file, the key and the allowed keys or values.
    """
    path = root / CONFIG_FILE
    try:
        # Read as untrusted input: a regular file of at most 1 MB (a FIFO would hang).
        raw = tomllib.loads(read_limited(path, limit=1 << 20).decode("utf-8"))
    except UnsafeFileError as exc:
        raise ConfigError(exc.message, exc.hint) from None
    except FileNotFoundError:
        raise ConfigError(
            f"No {CONFIG_FILE} in {root}.", f"Run `pnk init {root}` to make it a KB."
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}.") from None
    return validate_config(raw, path)


def validate_config(raw: dict[str, Any], path: Path) -> Config:
    """Validate parsed TOML as a whole ``pinakes.toml``.

    Raises:
        ConfigError: naming ``path``, the key and the allowed keys or values.
    """
    try:
        config = Config.model_validate(raw, context={"root": path.parent.resolve()})
    except ValidationError as exc:
        raise _describe(path, exc) from None
    _check_sidecars(path, config)
    return _clamp(config, path)


#: Safety limits a KB's own ``pinakes.toml`` may lower but not raise past these values: the
#: file comes with the folder, and a cloned folder is untrusted input (issue 34: a KB's
#: ``max_file_mb = 1000000`` let a 50 MB one-line file in at 1.7 GB; ``[pdf] max_seconds =
#: 3600`` kept a 60,000-page PDF extracting past 300 s).
HARD_CAPS: dict[tuple[str, str], int] = {
    ("sync", "max_file_mb"): 32,
    ("sync", "max_chunks_per_doc"): 50_000,
    ("pdf", "max_pages"): 20_000,
    ("pdf", "max_seconds"): 300,
    ("pdf", "max_memory_mb"): 4_096,
}


def _clamp(config: Config, path: Path) -> Config:
    """``config`` with every limit past its :data:`HARD_CAPS` value lowered to it, and said."""
    notes: list[str] = []
    sections: dict[str, dict[str, Any]] = {}
    for (section, key), cap in HARD_CAPS.items():
        value = getattr(getattr(config, section), key)
        if value > cap:
            sections.setdefault(section, {})[key] = type(value)(cap)
            shown = f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"
            notes.append(
                f"{path}: [{section}] {key} = {shown} is over the hard cap of {cap:,}; "
                f"{cap:,} is used (a KB's own config cannot lift a safety limit past it)"
            )
    if not notes:
        return config
    updates = {
        section: getattr(config, section).model_copy(update=values)
        for section, values in sections.items()
    }
    clamped = config.model_copy(update=updates)
    clamped._clamped = tuple(notes)
    return clamped


def _check_sidecars(path: Path, config: Config) -> None:
    """Refuse the deprecated ``[sync] write_sidecars`` when ``[sidecars] write`` says otherwise."""
    old = config.sync.write_sidecars
    if old is None or "write" not in config.sidecars.model_fields_set:
        return
    if (config.sidecars.write == "never") != (not old):
        raise ConfigError(
            f"{path}: [sync] write_sidecars = {str(old).lower()} contradicts [sidecars] write = "
            f"{config.sidecars.write!r}.",
            "Delete write_sidecars from [sync]; [sidecars] write replaces it.",
        )


#: What ``[sidecars] write`` a KB made by ``pnk init`` says (issue 35): a sidecar per note only
#: where the files cannot give its id again. A KB without the key keeps ``"always"``.
NEW_KB_SIDECARS: SidecarPolicy = "when-needed"


def render_config(
    name: str, kb_id: str | None = None, sidecars: SidecarPolicy | None = None
) -> str:
    """Return the text of a fresh ``pinakes.toml`` for a KB called ``name``.

    ``sidecars``: a ``[sidecars] write`` value to write (``None``: no ``[sidecars]`` table, so
    the setting's default, ``"always"``, holds).
    """
    kb_id = kb_id or new_ulid()
    policy = (
        (
            "\n[sidecars]\n"
            '# when sync writes NOTE.pnk.yaml for a note without one: "when-needed" (only where\n'
            '# the files cannot give its id again, e.g. a renamed note), "always", "never"\n'
            f'write = "{sidecars}"\n'
        )
        if sidecars is not None
        else ""
    )
    return (
        "# Pinakes knowledge-base configuration (committed; see the Pinakes guide).\n"
        "[kb]\n"
        f'name = "{name}"\n'
        f'id = "{kb_id}"\n'
        "\n"
        "[sync]\n"
        '# include = ["**/*.md", "**/*.markdown", "**/*.mdx", "**/*.txt", "**/*.pdf"]   # code: add "**/*.py" …\n'
        "# exclude = []\n"
        "# chunk_tokens = 256\n"
        "\n"
        "[embedding]\n"
        f'# model = "{DEFAULT_MODEL}"   # any fastembed model name works too\n'
        "\n"
        "[retrieval]\n"
        "# k = 8\n"
    ) + policy
