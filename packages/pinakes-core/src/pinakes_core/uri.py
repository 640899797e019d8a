"""``pnk://`` URIs and ULIDs (DESIGN §2).

Canonical form: ``pnk://<kb-ulid>/<doc-ulid>``; accepted as input also ``pnk://<doc-ulid>`` and
``pnk://<kb-name>/<doc-ulid>``; a chunk is ``…/<doc-ulid>#<ordinal>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pinakes_core.errors import UriError

__all__ = ["PnkUri", "is_ulid", "new_ulid", "parse_uri"]

SCHEME = "pnk://"
# Crockford base32 without I, L, O, U; the first character is at most 7 (128-bit bound).
_ULID_RE = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
_KB_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_ulid(value: str) -> bool:
    """Return whether ``value`` is a canonical (upper-case) 26-character ULID."""
    return bool(_ULID_RE.match(value))


def new_ulid() -> str:
    """Return a fresh ULID as its canonical 26-character string."""
    # Here, not at the top: python-ulid imports importlib.metadata (for its own version), which
    # costs a search process ~40 ms, and a search never makes an id (issue 37).
    from ulid import ULID

    return str(ULID())


@dataclass(frozen=True)
class PnkUri:
    """A parsed ``pnk://`` reference.

    Attributes:
        doc_id: the document ULID.
        kb: the KB ULID or KB name, or ``None`` for "this KB".
        chunk: the chunk ordinal when the URI names a chunk.
    """

    doc_id: str
    kb: str | None = None
    chunk: int | None = None

    def __str__(self) -> str:
        base = f"{SCHEME}{self.kb}/{self.doc_id}" if self.kb else f"{SCHEME}{self.doc_id}"
        return f"{base}#{self.chunk}" if self.chunk is not None else base


def parse_uri(text: str) -> PnkUri:
    """Parse a ``pnk://`` URI.

    Raises:
        UriError: if ``text`` is not of one of the accepted forms.
    """
    if not text.startswith(SCHEME):
        raise UriError(
            f"{text!r} is not a pnk:// URI.", "Use pnk://<doc-ulid> or pnk://<kb>/<doc-ulid>."
        )
    rest = text[len(SCHEME) :]
    chunk: int | None = None
    if "#" in rest:
        rest, _, frag = rest.partition("#")
        if not frag.isdigit():
            raise UriError(
                f"The chunk part {frag!r} of {text!r} is not a number.",
                "Use …/<doc-ulid>#<ordinal>.",
            )
        chunk = int(frag)
    parts = rest.split("/")
    if len(parts) == 1:
        kb, doc = None, parts[0]
    elif len(parts) == 2:
        kb, doc = parts
        if not (is_ulid(kb.upper()) or _KB_NAME_RE.match(kb)):
            raise UriError(f"The KB part {kb!r} of {text!r} is neither a ULID nor a KB name.")
        if is_ulid(kb.upper()):
            kb = kb.upper()
    else:
        raise UriError(f"{text!r} has too many path parts.", "Use pnk://<kb>/<doc-ulid>.")
    if not is_ulid(doc.upper()):
        raise UriError(f"{doc!r} in {text!r} is not a document ULID.", "A ULID has 26 characters.")
    return PnkUri(doc_id=doc.upper(), kb=kb, chunk=chunk)
