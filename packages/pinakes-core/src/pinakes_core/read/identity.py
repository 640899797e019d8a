"""Document identity when there is no sidecar, and when a sidecar is needed (DESIGN §2, issue 17).

A document's identity is a ULID. With ``[sidecars] write = "always"`` (the default) every
document gets a sidecar holding it, so every identity survives a rebuild of the store. The other
modes write fewer files, so a document without a sidecar needs an id that can be *derived* again
from the files alone:

- a frontmatter id (``[frontmatter] id`` keys, ``id:`` by default) that is a ULID is the doc id
  as it is; any other value (Dendron's ``id: ChcCM1Q2qrDTy7YnLUHiL``, a Zettelkasten number, a
  UUID) maps to a ULID derived from the KB id and that value, the same on every machine and
  every rebuild, and it moves with the document because the frontmatter does;
- a document with no frontmatter id gets a ULID derived from the KB id and its path, which
  survives rebuilds but not renames.

With ``"when-needed"`` a sidecar is written only when the document's id differs from the one a
rebuild would derive: a document renamed without a frontmatter id keeps its id (found by content
hash) and gets a sidecar holding it. Authored links and tags live in sidecars the user (or
``pnk link``) writes, so those documents have one anyway. ``"never"`` (the old
``[sync] write_sidecars = false``) writes none: a renamed document's kept id then lives only in
the store.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from pinakes_core.models import RepeatedId
from pinakes_core.uri import is_ulid, new_ulid

__all__ = [
    "derived_id",
    "fresh_id",
    "frontmatter_id",
    "holds_only_id",
    "needs_sidecar",
    "path_id",
    "repeated_ids_warning",
    "stand_in_id",
]

# A skeleton sidecar is one short line; anything much longer holds more than an id.
_SKELETON_MAX_BYTES = 256


def derived_id(kb_id: str, kind: str, value: str) -> str:
    """Return the ULID derived from ``(kb_id, kind, value)``: stable, and unique in practice.

    128 bits of BLAKE2b; the timestamp part of such a ULID carries no time.
    """
    # Here, not at the top: python-ulid imports importlib.metadata (for its own version), ~40 ms
    # a search process (which reaches this module through index.catalogue) never needs.
    from ulid import ULID

    digest = hashlib.blake2b(f"{kb_id}\x00{kind}\x00{value}".encode(), digest_size=16).digest()
    return str(ULID.from_bytes(digest))


def frontmatter_id(kb_id: str, value: str) -> str:
    """Return the doc id a frontmatter id stands for: itself if a ULID, else one derived from it."""
    value = value.strip()
    if is_ulid(value.upper()):
        return value.upper()
    return derived_id(kb_id, "frontmatter", value)


def path_id(kb_id: str, rel: str) -> str:
    """Return the doc id derived from a KB-relative path (for documents without any id)."""
    return derived_id(kb_id, "path", rel)


def stand_in_id(kb_id: str, rel: str, front_id: str | None) -> str:
    """The id a rebuild gives a document that has no sidecar (frontmatter id, else path)."""
    return frontmatter_id(kb_id, front_id) if front_id else path_id(kb_id, rel)


def fresh_id(policy: str, kb_id: str, rel: str) -> str:
    """The id of a document seen for the first time, with no sidecar and no frontmatter id.

    ``"always"`` mints a random ULID (the sidecar keeps it); the other modes derive it from
    the path, so a rebuild finds the same id without a sidecar.
    """
    return new_ulid() if policy == "always" else path_id(kb_id, rel)


def needs_sidecar(policy: str, doc_id: str, stand_in: str) -> bool:
    """Whether sync writes a skeleton sidecar for a document that has none.

    Args:
        policy: ``"always"``, ``"when-needed"`` or ``"never"``.
        doc_id: the id the document has.
        stand_in: the id a rebuild would give it without a sidecar (:func:`stand_in_id`).
    """
    if policy == "always":
        return True
    if policy == "never":
        return False
    return doc_id != stand_in


#: How many documents the repeated-id warning names; ``pnk sync --json`` lists them all.
_REPEAT_EXAMPLES = 3


def repeated_ids_warning(repeats: Sequence[RepeatedId]) -> str:
    """The one warning line for documents whose frontmatter id another document holds.

    Args:
        repeats: the documents that got an id of their own, in sync order.

    A docs site's versioned or translated copies repeat every page's ``id:`` (a Docusaurus
    slug), which made one line per copy (111 on Jest's docs); this says how many, names a few
    and says how to stop reading ``id:`` as the identity.
    """
    shown = "; ".join(
        f"{r.path} ({r.frontmatter_id!r}, also {r.also})" for r in repeats[:_REPEAT_EXAMPLES]
    )
    more = len(repeats) - _REPEAT_EXAMPLES
    one = len(repeats) == 1
    return (
        f"{len(repeats)} document{'' if one else 's'} repeat{'s' if one else ''} the frontmatter "
        f"id of another and got {'an id' if one else 'ids'} of {'its' if one else 'their'} own: "
        f"{shown}{f' and {more} more' if more > 0 else ''}. Versioned or translated copies of a "
        "docs site (Docusaurus, MkDocs, Hugo) repeat their pages' ids; to stop taking frontmatter "
        "ids as identities, set id = [] under [frontmatter] in pinakes.toml "
        "(pnk sync --json lists every one)"
    )


def holds_only_id(sidecar: Path, doc_id: str) -> bool:
    """Whether ``sidecar`` holds nothing but ``id: <doc_id>`` (no other key, no comment).

    Such a sidecar is what sync writes; deleting it loses nothing once its document is gone.
    Any read or parse problem answers ``False``: a sidecar in doubt is kept.
    """
    try:
        raw = sidecar.read_bytes()
    except OSError:
        return False
    if len(raw) > _SKELETON_MAX_BYTES:
        return False
    from ruamel.yaml.error import YAMLError  # only here: opening a KB reads no YAML (issue 14)

    from pinakes_core.intake import yaml_loader

    try:
        text = raw.decode("utf-8")
        data = yaml_loader().load(text)
    except (UnicodeDecodeError, YAMLError):
        return False
    return "#" not in text and data == {"id": doc_id}
