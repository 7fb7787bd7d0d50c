"""Tag schemes: IOB1 (CoNLL-03 files), IOB2/BIO, and BIOES (the tagger's internal scheme); the one
home of tag syntax, span conversion, BIOES constraints and ``TagScheme``.

BIOES is used inside the model because every entity boundary is explicit in the tag
itself (S- for one-token entities, E- to close), so the CRF can learn boundaries
directly and a one-token PERSON is the single tag ``S-PER``.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, NamedTuple, Sequence

OUTSIDE = "O"
_TAG_RE = re.compile(r"^(?:O|([BIES])-([A-Za-z][A-Za-z0-9_]*))$")


class Span(NamedTuple):
    """An entity: tokens ``start`` .. ``end - 1`` of type ``label``."""

    start: int
    end: int
    label: str


def parse_tag(tag: str) -> tuple[str, str | None]:
    """Split ``B-PER`` into ``("B", "PER")``; ``O`` gives ``("O", None)``.

    Raises ValueError for an ill-formed tag.
    """
    match = _TAG_RE.match(tag)
    if match is None:
        raise ValueError(f"ill-formed tag {tag!r} (expected O or B-/I-/E-/S- followed by a type)")
    if tag == OUTSIDE:
        return OUTSIDE, None
    return match.group(1), match.group(2)


def iob1_to_spans(tags: Sequence[str]) -> list[Span]:
    """Entities of an IOB1 or IOB2 (BIO) sequence: one reading serves both.

    I-X continues an open X entity and otherwise opens one (IOB1's rule, and conlleval's for a
    stray I-X in BIO); B-X always opens one (IOB1 uses it only to separate two X entities).
    """
    spans: list[Span] = []
    start, label = None, None
    for i, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, kind = parse_tag(tag)
        continues = prefix == "I" and kind == label and start is not None
        if not continues and start is not None:
            spans.append(Span(start, i, label))
            start, label = None, None
        if prefix in ("I", "B") and not continues:
            start, label = i, kind
    return spans


bio_to_spans = iob1_to_spans  # IOB2 is read by the same rule


def bioes_to_spans(tags: Sequence[str]) -> list[Span]:
    """Entities of a well-formed BIOES sequence (as the constrained CRF always produces).

    Ill-formed fragments (an I- without a B-, say) are read leniently as entities so that
    a sequence from an unconstrained model still yields something sensible.
    """
    spans: list[Span] = []
    start, label = None, None
    for i, tag in enumerate(tags):
        prefix, kind = parse_tag(tag)
        if start is not None and (prefix in ("B", "S", "O") or kind != label):
            spans.append(Span(start, i, label))
            start, label = None, None
        if prefix == "S":
            spans.append(Span(i, i + 1, kind))
        elif prefix in ("B", "I", "E") and start is None:
            start, label = i, kind
        if prefix == "E" and start is not None:
            spans.append(Span(start, i + 1, label))
            start, label = None, None
    if start is not None:
        spans.append(Span(start, len(tags), label))
    return spans


def spans_to_bioes(spans: Iterable[Span], length: int) -> list[str]:
    tags = [OUTSIDE] * length
    for start, end, label in spans:
        if end - start == 1:
            tags[start] = f"S-{label}"
            continue
        tags[start] = f"B-{label}"
        for i in range(start + 1, end - 1):
            tags[i] = f"I-{label}"
        tags[end - 1] = f"E-{label}"
    return tags


def spans_to_bio(spans: Iterable[Span], length: int) -> list[str]:
    tags = [OUTSIDE] * length
    for start, end, label in spans:
        tags[start] = f"B-{label}"
        for i in range(start + 1, end):
            tags[i] = f"I-{label}"
    return tags


def spans_to_iob1(spans: Iterable[Span], length: int) -> list[str]:
    """IOB1 as in the CoNLL-03 files: B-X only where an X entity directly follows another X."""
    tags = [OUTSIDE] * length
    previous_end, previous_label = None, None
    for start, end, label in sorted(spans):
        first = "B" if (previous_end == start and previous_label == label) else "I"
        tags[start] = f"{first}-{label}"
        for i in range(start + 1, end):
            tags[i] = f"I-{label}"
        previous_end, previous_label = end, label
    return tags


def iob1_to_bioes(tags: Sequence[str]) -> list[str]:
    return spans_to_bioes(iob1_to_spans(tags), len(tags))


def bioes_to_iob1(tags: Sequence[str]) -> list[str]:
    return spans_to_iob1(bioes_to_spans(tags), len(tags))


def bioes_tag_set(entity_types: Iterable[str]) -> list[str]:
    """All BIOES tags for the given types, ``O`` first, then by type."""
    tags = [OUTSIDE]
    for kind in sorted(set(entity_types)):
        tags += [f"{prefix}-{kind}" for prefix in "BIES"]
    return tags


def bioes_transition_allowed(from_tag: str, to_tag: str) -> bool:
    """Whether ``to_tag`` may directly follow ``from_tag`` in a well-formed BIOES sequence."""
    from_prefix, from_kind = parse_tag(from_tag)
    to_prefix, to_kind = parse_tag(to_tag)
    inside = from_prefix in ("B", "I")  # an entity is open and must continue
    if inside:
        return to_prefix in ("I", "E") and to_kind == from_kind
    return to_prefix in ("O", "B", "S")


def bioes_start_allowed(tag: str) -> bool:
    return parse_tag(tag)[0] in ("O", "B", "S")


def bioes_end_allowed(tag: str) -> bool:
    return parse_tag(tag)[0] in ("O", "E", "S")


class TagScheme:
    """One tag scheme: the prefixes it uses, its span reading and writing, and, given a tag list,
    the tags a span takes and the tags that would continue it (what constrained confidences clamp).

    ``TagScheme("bioes", tags)``; names: ``iob1``, ``iob2`` (alias ``bio``), ``bioes``.
    """

    _SCHEMES: dict[str, tuple[tuple[str, ...], Callable, Callable]] = {
        "iob1": (("B", "I"), iob1_to_spans, spans_to_iob1),
        "iob2": (("B", "I"), bio_to_spans, spans_to_bio),
        "bioes": (("B", "I", "E", "S"), bioes_to_spans, spans_to_bioes),
    }
    NAMES = ("iob1", "iob2", "bio", "bioes")

    def __init__(self, name: str, tags: Sequence[str] = ()):
        canonical = "iob2" if name == "bio" else name
        if canonical not in self._SCHEMES:
            raise ValueError(f"unknown tag scheme {name!r}; choose one of {list(self.NAMES)}")
        self.name = canonical
        self.prefixes, self._to_spans, self._from_spans = self._SCHEMES[canonical]
        self.tags = list(tags)
        self.index = {tag: i for i, tag in enumerate(self.tags)}

    def spans(self, tags: Sequence[str]) -> list[Span]:
        return self._to_spans(tags)

    def tags_of(self, spans: Iterable[Span], length: int) -> list[str]:
        return self._from_spans(spans, length)

    def span_tag_names(self, span: Span) -> list[str]:
        """The tags of the positions of ``span`` (IOB1 has none of its own: they depend on the neighbours)."""
        length, label = span.end - span.start, span.label
        if self.name == "iob1":
            raise ValueError("IOB1 tags of a span depend on its neighbours; use iob2 or bioes")
        if self.name == "iob2":
            return [f"B-{label}"] + [f"I-{label}"] * (length - 1)
        if length == 1:
            return [f"S-{label}"]
        return [f"B-{label}"] + [f"I-{label}"] * (length - 2) + [f"E-{label}"]

    def span_tags(self, span: Span) -> list[int]:
        """Indices (in ``tags``) of the tags of the positions of ``span``."""
        return [self.index[name] for name in self.span_tag_names(span)]

    def continuation_tags(self, label: str) -> list[int]:
        """Indices of the tags that, right after a ``label`` span, would extend it (forbidden there)."""
        names = [f"I-{label}"] if self.name != "bioes" else [f"I-{label}", f"E-{label}"]
        return [self.index[name] for name in names if name in self.index]
