"""Other taggers' label sets read as ours: one home for the schemes outside models (BIO/IOB2, IOB1,
BIOES, BILOU, plain IO) and their PERSON names (``PER``, ``PERSON``), for the adapters that read
per-word labels (Hugging Face models, token-level Flair models)."""

from __future__ import annotations

import re
from typing import Sequence

from nerbias.data.tags import Span, bioes_to_spans
from nerbias.errors import NerbiasError

PERSON = "PER"                       # our PERSON type (RECOGNISED)
PERSON_TYPES = ("PER", "PERSON")     # what models call a person
# What taggers call a place: ours and CoNLL-03 models LOC, spaCy / OntoNotes GPE (and LOC for other
# locations), CoreNLP LOCATION; the paired probes' LOCATION recall counts a one-token entity of any of these.
PLACE_TYPES = ("LOC", "GPE", "LOCATION")
_LABEL = re.compile(r"^(?:([BIESLU])[-_])?([A-Za-z][A-Za-z0-9_]*)$")
_CANONICAL_PREFIX = {"B": "B", "I": "I", "E": "E", "S": "S", "L": "E", "U": "S", None: "I"}


def canonical_tag(raw: str, person_types: Sequence[str] = PERSON_TYPES) -> str:
    """One label as a BIOES tag with PERSON written ``PER``: BILOU's L/U become E/S, an IO label ``LOC``
    becomes ``I-LOC``, ``_`` (Flair's legacy empty label) is ``O``. Raises NerbiasError otherwise."""
    if raw.upper() == "O" or raw == "_":
        return "O"
    match = _LABEL.match(raw)
    if match is None:
        raise NerbiasError(f"label {raw!r}: not O, a type, or B-/I-/E-/S-/L-/U- plus a type")
    prefix, kind = match.group(1), match.group(2)
    if kind.upper() in {t.upper() for t in person_types}:
        kind = PERSON
    return f"{_CANONICAL_PREFIX[prefix]}-{kind}"


def word_spans(tags: Sequence[str]) -> list[Span]:
    """Entities of canonical per-word tags, read leniently (an I- opens an entity, as in IOB1 and IO)."""
    return bioes_to_spans(tags)
