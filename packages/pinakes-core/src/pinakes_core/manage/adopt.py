"""``pnk adopt``: onboard an existing vault that keeps its metadata in frontmatter (DESIGN §10).

Obsidian, Dendron, Foam, Hugo and Logseq-style folders already say what Pinakes needs: an id,
a title, tags and aliases in each note's frontmatter, sometimes a tag vocabulary file.
Adopting maps them without touching a document: it writes ``pinakes.toml`` (and ``.pinakes/``
in ``.gitignore``) with

- ``[sidecars] write = "when-needed"``, so the vault does not gain a sidecar per note: a note's
  frontmatter id becomes its doc id (a ULID as it is, anything else, like Dendron's
  ``id: ChcCM1Q2qrDTy7YnLUHiL``, a ULID derived from it, identical on every rebuild);
- ``[frontmatter]`` keys for what the vault calls them (``tag``, ``alias``, ``uid``; the
  ``categories`` of Hugo, Jekyll and VuePress sites count as tags), and ``[sync]`` include/exclude rules for the vault's own folders (Logseq's
  ``logseq/`` backups, Hugo's ``content/``, Foam's ``_layouts/``);

and it reports what it mapped (ids, titles, tags, aliases, Logseq page properties, inline
``#tags``) and what it could not (duplicate ids, notes without an id or a title, keys Pinakes
does not read, block properties further down a page, tags outside the vocabulary). Nothing is written with ``dry_run``; a folder that is a KB already
keeps its ``pinakes.toml`` and is only analysed.

Why one module of this length (issue 37): ``pnk adopt`` is one command whose census,
vocabulary, plan and report feed each other; at about 600 lines it reads in one pass.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from ruamel.yaml.error import YAMLError

from pinakes_core.config import CONFIG_FILE, Config, FrontmatterConfig, SyncConfig, load_config
from pinakes_core.errors import ConfigError, UnsafeFileError
from pinakes_core.intake import clip, read_limited, yaml_loader
from pinakes_core.read.documents import FileEntry, decode, scan
from pinakes_core.read.frontmatter import PAGE_PROPERTY, Frontmatter, parse_frontmatter
from pinakes_core.read.identity import frontmatter_id, path_id
from pinakes_core.read.sidecar import SIDECAR_SUFFIX, _atomic_write
from pinakes_core.uri import is_ulid, new_ulid

__all__ = ["AdoptItem", "AdoptReport", "VocabularyReport", "adopt"]

_EXAMPLES = 5
_EXAMPLE_CHARS = 200
_VOCAB_NAMES = (
    "vocab.yml",
    "vocab.yaml",
    "vocab.json",
    "vocabulary.yml",
    "vocabulary.yaml",
    "tags.yml",
    "tags.yaml",
    "tags.json",
)
_VOCAB_DIRS = ("", "data", "_data", "meta")
_VOCAB_MAX_BYTES = 1 << 20
_YAML_ALIAS = re.compile(r"(?:^|[\s:\[{,-])\*[^\s,\]}]+")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
# Keys each role may be called by in the vaults adopt knows; defaults first.
_ID_KEYS = ("id", "uid")
_TAG_KEYS = ("tags", "tag")
_ALIAS_KEYS = ("aliases", "alias")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class AdoptItem(_Model):
    """One line of the adoption report: what, how many documents, a few examples."""

    what: str
    count: int
    examples: list[str] = []


class VocabularyReport(_Model):
    """The tag vocabulary found, and how the vault's tags compare with it."""

    source: str = Field(description="the vocabulary file, or the tag notes it came from")
    terms: int
    synonyms: int = Field(description="synonyms (aliases) the vocabulary declares")
    used_in_vocabulary: int = Field(description="distinct tags in use that the vocabulary has")
    used_not_in_vocabulary: list[str] = Field(description="tags in use the vocabulary lacks")
    unused_terms: int = Field(description="vocabulary terms no document carries")


class AdoptReport(_Model):
    """What ``adopt`` found, mapped, could not map and wrote."""

    root: str
    flavour: str = Field(description="dendron | obsidian | logseq | foam | hugo | markdown")
    name: str
    kb_id: str
    wrote_config: bool = Field(description="pinakes.toml was written by this run")
    already_kb: bool = Field(description="the folder was a KB already (config left as it was)")
    config: list[str] = Field(description="the settings adopt chose, as TOML lines")
    documents: int
    sidecars: int = Field(description="sidecars already in the folder")
    mapped: list[AdoptItem]
    unmapped: list[AdoptItem]
    vocabulary: VocabularyReport | None = None


@dataclass
class _Doc:
    rel: str
    lines: list[str]
    keys: tuple[str, ...] = ()
    front: Frontmatter | None = None  # parsed with the default keys (the census pass)


@dataclass
class _Plan:
    flavour: str
    include: list[str] | None = None
    exclude: list[str] = field(default_factory=list)
    frontmatter: dict[str, list[str]] = field(default_factory=dict)


# -- detection --------------------------------------------------------------------------------


def _flavour(root: Path, docs: list[_Doc]) -> str:
    if (root / ".obsidian").is_dir():
        return "obsidian"
    if (root / "logseq" / "config.edn").is_file() or (
        (root / "pages").is_dir() and (root / "journals").is_dir()
    ):
        return "logseq"
    if (root / ".foam").is_dir() or "foam.foam-vscode" in _read_small(
        root / ".vscode" / "extensions.json"
    ):
        return "foam"
    if any((root / n).is_file() for n in ("dendron.yml", "dendron.code-workspace")):
        return "dendron"
    dendron_like = sum(1 for d in docs if {"id", "created", "updated"} <= set(d.keys))
    if docs and dendron_like >= max(1, len(docs) // 2):
        return "dendron"
    hugo_config = any(
        (root / n).is_file() for n in ("hugo.toml", "hugo.yaml", "hugo.json", "config.toml")
    )
    if hugo_config and (root / "content").is_dir():
        return "hugo"
    return "markdown"


def _read_small(path: Path) -> str:
    # read_limited: a FIFO named extensions.json hung adopt; a huge file is not read at all.
    try:
        return read_limited(path, limit=1 << 20).decode("utf-8", errors="replace")[:100_000]
    except (OSError, UnsafeFileError):
        return ""


#: Where Obsidian's core Templates plugin and the Templater plugin keep their templates folder.
_OBSIDIAN_TEMPLATE_SETTINGS = (
    (".obsidian/templates.json", "folder"),
    (".obsidian/plugins/templater-obsidian/data.json", "templates_folder"),
)


def _obsidian_templates(root: Path) -> list[str]:
    """The vault's configured templates folders, as exclude rules (issue 35).

    Template notes are skeletons (``{{title}}``, ``<% tp.date.now() %>``), not content: every
    search for a common word found them. A folder outside the vault, or naming ``..``, is left
    alone.
    """
    rules: list[str] = []
    for rel, key in _OBSIDIAN_TEMPLATE_SETTINGS:
        try:
            value = json.loads(_read_small(root / rel) or "{}").get(key)
        except (ValueError, AttributeError):
            continue
        folder = str(value).strip().strip("/") if isinstance(value, str) else ""
        if folder and ".." not in folder.split("/") and not Path(folder).is_absolute():
            rules.append(f"{folder}/**")
    return list(dict.fromkeys(rules))


def _plan(root: Path, flavour: str, census: Counter[str]) -> _Plan:
    plan = _Plan(flavour)
    if flavour == "logseq":
        plan.exclude = ["logseq/**"]  # config, custom.css and logseq/bak/ copies of pages
    elif flavour == "foam":
        plan.exclude = ["_layouts/**", "_site/**"]
    elif flavour == "obsidian":
        plan.exclude = _obsidian_templates(root)
    elif flavour == "hugo":
        plan.include = ["content/**/*.md", "content/**/*.markdown"]
    defaults = FrontmatterConfig()
    roles = {
        "id": [k for k in _ID_KEYS if census[k]] or defaults.id,
        "tags": [k for k in _TAG_KEYS if census[k]] or defaults.tags,
        "aliases": [k for k in _ALIAS_KEYS if census[k]] or defaults.aliases,
    }
    if census["categories"]:  # Hugo, Jekyll, VuePress: a taxonomy, as good as tags
        roles["tags"] = [*roles["tags"], "categories"]
    if flavour == "hugo":
        roles["aliases"] = []  # Hugo's aliases are URL redirects, not names
    for role, keys in roles.items():
        if keys != getattr(defaults, role):
            plan.frontmatter[role] = keys
    return plan


# -- vocabulary -------------------------------------------------------------------------------


def _vocabulary(root: Path, docs: list[_Doc]) -> tuple[str, dict[str, list[str]]] | None:
    for folder in _VOCAB_DIRS:
        for name in _VOCAB_NAMES:
            path = root / folder / name
            if path.is_file() and path.stat().st_size <= _VOCAB_MAX_BYTES:
                terms = _parse_vocabulary(path)
                if terms:
                    return str(path.relative_to(root)), terms
    # Dendron keeps one note per tag: tags.<tag>.md.
    dendron: dict[str, list[str]] = {
        Path(d.rel).name[len("tags.") : -len(".md")]: []
        for d in docs
        if Path(d.rel).name.startswith("tags.") and d.rel.endswith(".md")
    }
    dendron.pop("", None)
    if dendron:
        return "Dendron tag notes (tags.*.md)", dendron
    # Hugo keeps one folder per taxonomy term: content/tags/<term>/_index.md.
    hugo = root / "content" / "tags"
    if hugo.is_dir():
        terms = {p.name: [] for p in sorted(hugo.iterdir()) if p.is_dir()}
        if terms:
            return "content/tags/ (Hugo taxonomy terms)", terms
    return None


def _parse_vocabulary(path: Path) -> dict[str, list[str]]:
    """Terms and their synonyms from a YAML or JSON vocabulary; ``{}`` if it makes no sense."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix != ".json" and _YAML_ALIAS.search(text):
            return {}  # aliases can expand without bound (a "billion laughs"); not worth it
        data = json.loads(text) if path.suffix == ".json" else yaml_loader().load(text)
    except (OSError, UnicodeDecodeError, ValueError, YAMLError):
        return {}
    if isinstance(data, dict) and len(data) == 1:
        ((key, value),) = data.items()
        if str(key).lower() in ("tags", "vocabulary", "vocab", "terms"):
            data = value
    terms: dict[str, list[str]] = {}

    def synonyms(value: Any) -> list[str]:
        if isinstance(value, dict):
            value = next((value[k] for k in ("aliases", "synonyms", "alias") if k in value), None)
        if isinstance(value, str):
            return []  # a description
        if isinstance(value, list):
            return [str(v) for v in value if isinstance(v, str | int)]
        return []

    if isinstance(data, list):
        for item in data:
            if isinstance(item, str | int):
                terms[str(item)] = []
            elif isinstance(item, dict):
                name = next(
                    (item[k] for k in ("name", "tag", "id", "term", "label") if k in item), None
                )
                if isinstance(name, str | int):
                    terms[str(name)] = synonyms(item)
    elif isinstance(data, dict):
        for key, value in data.items():
            terms[str(key)] = synonyms(value)
    return terms


def _vocabulary_report(
    source: str, terms: dict[str, list[str]], used: Counter[str]
) -> VocabularyReport:
    from pinakes_core.index.preparation import norm_tags

    canonical = set(norm_tags(tuple(terms)))
    synonyms = set(norm_tags(tuple(s for group in terms.values() for s in group)))
    known = canonical | synonyms
    outside = sorted(t for t in used if t not in known)
    return VocabularyReport(
        source=source,
        terms=len(canonical),
        synonyms=len(synonyms),
        used_in_vocabulary=sum(1 for t in used if t in known),
        used_not_in_vocabulary=outside[:50],
        unused_terms=sum(1 for t in canonical if t not in used),
    )


# -- analysis ---------------------------------------------------------------------------------


def _read_docs(root: Path, entries: Iterable[FileEntry]) -> list[_Doc]:
    docs = []
    for entry in entries:
        try:
            data = entry.path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data:
            continue
        text, _ = decode(data)
        docs.append(_Doc(entry.rel, text.split("\n") if entry.is_markdown else []))
    return docs


def _inline_tags(lines: list[str], start: int) -> list[str]:
    """The ``#tags`` sync reads from a document's text (:func:`pinakes_core.read.links.read_text`)."""
    from pinakes_core.read.links import read_text

    return read_text("\n".join(lines[start:]), markdown=True)[1]


def _item(what: str, values: list[str]) -> AdoptItem:
    # Examples quote the vault (a title, a note's tags): each is clipped to one short line.
    examples = [clip(v, _EXAMPLE_CHARS) for v in values[:_EXAMPLES]]
    return AdoptItem(what=what, count=len(values), examples=examples)


def _analyse(
    root: Path, config: Config, docs: list[_Doc], census: Counter[str], *, ids_kept: bool = True
) -> tuple[list[AdoptItem], list[AdoptItem], Counter[str]]:
    """What maps and what does not.

    ``ids_kept``: whether ``config``'s KB id is the one the KB will have (not a dry run's
    stand-in), so ids derived from it can be shown.
    """
    keys = config.frontmatter
    kb_id = config.kb.id
    ulids: list[str] = []
    derived: list[str] = []
    no_id: list[str] = []
    titles: list[str] = []
    no_title: list[str] = []
    tagged: list[str] = []
    aliased: list[str] = []
    logseq: list[str] = []
    properties: list[str] = []
    inline: list[str] = []
    malformed: list[str] = []
    owners: dict[str, str] = {}
    duplicates: list[str] = []
    used: Counter[str] = Counter()
    distinct: set[str] = set()  # frontmatter tags
    from pinakes_core.index.preparation import norm_tags

    defaults = keys == FrontmatterConfig()
    for doc in docs:
        front = (
            doc.front
            if defaults and doc.front is not None
            else parse_frontmatter(doc.rel, doc.lines, keys)
        )
        if front.warning:
            malformed.append(front.warning)
        if front.id is None:
            # A dry run's KB id is not the one a real run creates: its derived ids would be
            # ids no document gets (issue 35).
            shown = path_id(kb_id, doc.rel) if ids_kept else "an id derived from its path"
            no_id.append(f"{doc.rel} → {shown}")
        else:
            mapped = frontmatter_id(kb_id, front.id)
            if mapped in owners:
                duplicates.append(f"{doc.rel} repeats {front.id!r} of {owners[mapped]}")
            else:
                owners[mapped] = doc.rel
                ulid = is_ulid(front.id.upper())
                target = ulids if ulid else derived
                shown = mapped if ulid or ids_kept else "an id derived from it"
                target.append(f"{doc.rel}: {front.id} → {shown}")
        (titles if front.title else no_title).append(
            f"{doc.rel}: {front.title}" if front.title else doc.rel
        )
        tags = norm_tags(front.tags)
        if tags:
            tagged.append(f"{doc.rel}: {', '.join(tags)}")
            used.update(tags)
            distinct.update(tags)
        written = (
            norm_tags(tuple(_inline_tags(doc.lines, front.end_line))) if keys.inline_tags else []
        )
        if written:
            inline.append(f"{doc.rel}: {', '.join(written)}")
            used.update(t for t in written if t not in tags)
        if front.aliases:
            aliased.append(f"{doc.rel}: {', '.join(front.aliases)}")
        body = doc.lines[front.end_line : front.end_line + 12]
        if front.fields and not front.end_line:
            properties.append(doc.rel)  # fields but no block: Logseq page properties
        elif any(PAGE_PROPERTY.fullmatch(line.rstrip()) for line in body):
            logseq.append(doc.rel)
    read = {k for role in ("id", "title", "tags", "aliases") for k in getattr(keys, role)}
    read.add("links")
    unread = [f"{k} ({n})" for k, n in census.most_common() if k not in read]
    mapped_items = [
        _item("frontmatter ids that are ULIDs, kept as the doc ids", ulids),
        _item("frontmatter ids mapped to derived ULIDs (stable across rebuilds)", derived),
        _item("frontmatter titles", titles),
        _item(f"documents with frontmatter tags ({len(distinct)} distinct)", tagged),
        _item("documents with frontmatter aliases (link targets by name)", aliased),
        _item(
            "documents with Logseq page properties (key:: value), read as frontmatter", properties
        ),
        _item(
            "documents with #tags in their text, read as tags ([frontmatter] inline_tags = "
            "false turns that off)",
            inline,
        ),
    ]
    unmapped_items = [
        _item(
            "documents without a frontmatter id: their id is derived from the path (kept "
            "across rebuilds; a rename without a sidecar keeps it by writing one)",
            no_id,
        ),
        _item(
            "documents repeating another's frontmatter id: each gets an id of its own, in a "
            "sidecar",
            duplicates,
        ),
        _item("documents without a frontmatter title: first heading or file name", no_title),
        _item("frontmatter keys Pinakes does not read (key, documents)", unread),
        _item(
            "documents keeping metadata as Logseq `key:: value` properties below their "
            "first lines, which are not read (only the page properties they open with are)",
            logseq,
        ),
        _item("documents whose frontmatter is not valid YAML (ignored)", malformed),
    ]
    return (
        [i for i in mapped_items if i.count],
        [i for i in unmapped_items if i.count],
        used,
    )


def _config_lines(plan: _Plan) -> list[str]:
    lines = ["[sidecars]", 'write = "when-needed"']
    if plan.include is not None or plan.exclude:
        lines.append("[sync]")
        if plan.include is not None:
            lines.append(f"include = {json.dumps(plan.include)}")
        if plan.exclude:
            lines.append(f"exclude = {json.dumps(plan.exclude)}")
    if plan.frontmatter:
        lines.append("[frontmatter]")
        lines += [f"{role} = {json.dumps(keys)}" for role, keys in plan.frontmatter.items()]
    return lines


def _planned_config(name: str, kb_id: str, plan: _Plan) -> Config:
    sync: dict[str, Any] = {"exclude": plan.exclude}
    if plan.include is not None:
        sync["include"] = plan.include
    return Config.model_validate(
        {
            "kb": {"name": name, "id": kb_id},
            "sync": sync,
            "sidecars": {"write": "when-needed"},
            "frontmatter": plan.frontmatter,
        }
    )


def _write_config(root: Path, name: str, plan: _Plan) -> Config:
    """Write ``pinakes.toml`` with adopt's sections; on a bad result no file is left.

    ``KB.init`` writes the file (and puts ``.pinakes/`` in ``.gitignore``); the sections are
    added to the fresh file, which is then validated.
    """
    from pinakes_core.kb import KB

    KB.init(root, name=name)
    path = root / CONFIG_FILE
    text = path.read_text(encoding="utf-8")
    sections: dict[str, list[str]] = {}
    current = ""
    for line in _config_lines(plan):
        if line.startswith("["):
            current = line
            sections[current] = []
        else:
            sections[current].append(line)
    note = "# set by `pnk adopt` (see docs/fleet.md)"
    for header, body in sections.items():
        block = "\n".join([note, *body])
        if f"{header}\n" in text:
            text = text.replace(f"{header}\n", f"{header}\n{block}\n", 1)
        else:
            text += f"\n{header}\n{block}\n"
    _atomic_write(path, text)
    try:
        return load_config(root)
    except ConfigError:
        path.unlink(missing_ok=True)
        raise


def _kb_name(root: Path, name: str | None) -> str:
    if name:
        return name
    clean = _NAME_CHARS.sub("-", root.name).strip("-._")
    return clean or "vault"


def adopt(path: str | Path, *, name: str | None = None, dry_run: bool = False) -> AdoptReport:
    """Onboard the vault at ``path`` as a KB, mapping its frontmatter; never touches a document.

    Args:
        path: the vault folder.
        name: the KB name (default: the folder name, made valid).
        dry_run: analyse and report only; write nothing. Ids derived from the KB id (from a
            path, or a frontmatter id that is not a ULID) are then described, not shown: the
            real run creates another KB id.

    Returns:
        The report: flavour, the chosen settings, what was mapped and what could not be.

    Raises:
        ConfigError: if ``path`` is not a folder, or the name is invalid.
    """
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder.", "Pass the vault's folder.")
    already = (root / CONFIG_FILE).is_file()
    existing = load_config(root) if already else None
    base_sync = existing.sync if existing else SyncConfig()
    entries, _ = scan(root, base_sync)
    docs = _read_docs(root, entries)
    census: Counter[str] = Counter()
    for doc in docs:
        doc.front = parse_frontmatter(doc.rel, doc.lines)
        doc.keys = tuple(str(key) for key in doc.front.fields)
        census.update(doc.keys)
    flavour = _flavour(root, docs)
    plan = _plan(root, flavour, census)
    wrote = False
    if existing is not None:
        config = existing
    else:
        try:
            config = _planned_config(_kb_name(root, name), new_ulid(), plan)
        except ValueError:
            raise ConfigError(
                f"{_kb_name(root, name)!r} is not a valid KB name.",
                "Use letters, digits, '.', '_' or '-', e.g. --name my-notes.",
            ) from None
        if not dry_run:
            config = _write_config(root, config.kb.name, plan)
            wrote = True
        if config.sync != base_sync:  # the vault's own include/exclude rules change the set
            docs = _read_docs(root, scan(root, config.sync)[0])
    mapped, unmapped, used = _analyse(
        root, config, docs, census, ids_kept=existing is not None or not dry_run
    )
    if flavour == "dendron":
        dotted = [d.rel for d in docs if Path(d.rel).name.count(".") >= 2]
        if dotted:
            unmapped.append(
                _item(
                    "documents in Dendron's dotted hierarchy (a.b.c.md): the hierarchy is not "
                    "read as folders; links between the notes are",
                    dotted,
                )
            )
    found = _vocabulary(root, docs)
    vocabulary = _vocabulary_report(found[0], found[1], used) if found else None
    if vocabulary is not None and vocabulary.used_not_in_vocabulary:
        unmapped.append(
            _item(
                f"tags in use that the vocabulary ({vocabulary.source}) lacks",
                vocabulary.used_not_in_vocabulary,
            )
        )
    sidecars = sum(1 for _ in root.rglob(f"*{SIDECAR_SUFFIX}"))
    return AdoptReport(
        root=str(root),
        flavour=flavour,
        name=config.kb.name,
        kb_id=config.kb.id,
        wrote_config=wrote,
        already_kb=already,
        config=[] if already else _config_lines(plan),
        documents=len(docs),
        sidecars=sidecars,
        mapped=mapped,
        unmapped=unmapped,
        vocabulary=vocabulary,
    )
